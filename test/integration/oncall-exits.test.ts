/**
 * Issue 26, exit codes and words a script can trust: a store that is not there is exit 6 for every
 * command but init, ops record, mcp and demo (named by RECON_DB or --db too, and nothing created);
 * `ops submit` and `retry` that end outcome_unknown exit 7; a command that changes something names
 * the store and the provider mode (never the key) in one line on stderr.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import {
  configDir,
  recon,
  refund,
  removeTempDirs,
  sharedStore,
  STRIPE_ENV,
  tempDir,
  withStore,
} from './oncall-support.js';

vi.setConfig({ testTimeout: 180_000, hookTimeout: 240_000 });

let sandbox: StripeSandbox;
let dir: string;
let store: ReturnType<typeof sharedStore>;
let pi: string;
const env = STRIPE_ENV;
const run = (args: string[], input?: string) => store.recon(args, { env, input });

beforeAll(async () => {
  sandbox = await startStripeSandbox({ apiKey: env.STRIPE_API_KEY, webhookSecret: env.STRIPE_WEBHOOK_SECRET });
  dir = await withStore(configDir(sandbox.url, { uncertaintyWindow: '1s' }));
  store = sharedStore(dir);
  pi = sandbox.seedPaymentIntent({ amount: 100_000, currency: 'usd' }).payment_intent;
}, 240_000);
afterAll(async () => {
  await store?.release();
  await sandbox?.close();
  removeTempDirs();
});

describe('a store that is not there', () => {
  it('RECON_DB or --db naming a missing store: exit 6 for run, nothing created; ops record creates it', async () => {
    const root = tempDir();
    const typo = path.join(root, 'typo-db');
    const r = await recon(['run', '--json'], { cwd: dir, env: { ...env, RECON_DB: `pglite:${typo}` } });
    expect(r.code, r.stderr).toBe(6);
    expect(r.json.error.message).toContain(`no recon store at ${typo} (named by RECON_DB)`);
    expect(fs.existsSync(typo)).toBe(false);
    const flag = await recon(['--db', `pglite:${typo}`, 'ops', 'list'], { cwd: dir, env });
    expect(flag.code, flag.stderr).toBe(6);
    expect(fs.existsSync(typo)).toBe(false);
    const rec = await recon(['ops', 'record', '-', '--json'], {
      cwd: dir,
      env: { ...env, RECON_DB: `pglite:${typo}` },
      input: JSON.stringify(refund('refund:new_store')),
    });
    expect(rec.code, rec.stderr).toBe(0);
    expect(fs.existsSync(typo)).toBe(true);
  });
});

describe('exit 7: the request went out and its answer was lost', () => {
  it('ops submit that ends outcome_unknown exits 7; retry that ends outcome_unknown exits 7', async () => {
    const id = 'refund:exit7';
    const rec = await run(
      ['ops', 'record', '-'],
      JSON.stringify(refund(id, { payload: { payment_intent: pi, amount: 500, currency: 'usd' } })),
    );
    expect(rec.code).toBe(0);
    sandbox.faults.inject({ kind: 'drop_before_commit' }, { times: 3 });
    const submit = await run(['ops', 'submit', id]);
    expect(submit.code, submit.stderr).toBe(7);
    expect(submit.stdout).toContain('outcome_unknown');
    sandbox.faults.clear();
    // Nothing at Stripe: after the window a lookup finds nothing and a retry is allowed; it is lost too.
    expect(await run(['lookup', id])).toMatchObject({ code: 0 });
    await new Promise((r) => setTimeout(r, 1200));
    sandbox.faults.inject({ kind: 'drop_before_commit' }, { times: 3 });
    const retry = await run(['retry', id, '--json']);
    sandbox.faults.clear();
    expect(retry.json, retry.stderr).toMatchObject({ decision: 'retry', state: 'outcome_unknown' });
    expect(retry.code).toBe(7);
    expect(sandbox.refunds({ payment_intent: pi }).filter((r) => r.amount === 500)).toHaveLength(0);
    // A submit that succeeds is 0.
    const ok = 'refund:exit0';
    await run(
      ['ops', 'record', '-'],
      JSON.stringify(refund(ok, { payload: { payment_intent: pi, amount: 600, currency: 'usd' } })),
    );
    expect((await run(['ops', 'submit', ok])).code).toBe(0);
  });
});

describe('the store and the provider mode', () => {
  it('a command that changes something names them on stderr, never the key; -q and --json stay quiet', async () => {
    await store.release();
    const live = { ...env, STRIPE_API_KEY: 'sk_live_supersecretvalue' };
    const r = await recon(['ops', 'record', '-'], {
      cwd: dir,
      env: live,
      input: JSON.stringify(refund('refund:mode_1')),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`recon: store pglite:${path.join(dir, '.recon', 'db')} · stripe live\n`);
    expect(r.stderr).not.toContain('supersecret');
    const test = await recon(['escalate', 'refund:mode_1', '--reason', 'x'], { cwd: dir, env });
    expect(test.stderr).toContain('· stripe test');
    const quiet = await recon(['-q', 'escalate', 'refund:mode_1', '--reason', 'y'], { cwd: dir, env });
    expect(quiet.stderr).not.toContain('recon: store');
    const list = await recon(['ops', 'list'], { cwd: dir, env });
    expect(list.stderr).not.toContain('recon: store');
  });
});
