/**
 * Issue 26, exit codes and words a script can trust: a store that is not there is exit 6 for every
 * command but init, ops record, mcp and demo (named by RECON_DB or --db too, and nothing created);
 * `ops submit` and `retry` that end outcome_unknown exit 7; a command that changes something names
 * the store and the provider mode (never the key) in one line on stderr.
 */
import { execFileSync } from 'node:child_process';
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
    sandbox.faults.inject({ kind: 'drop_before_commit' }, { times: 3 });
    // 1.2 s later on the command's clock: past the 1 s window, without waiting for it.
    const later = () => new Date(Date.now() + 1200);
    const retry = await store.recon(['retry', id, '--json'], { env, now: later });
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

describe('what users of gh, stripe and kubectl reach for', () => {
  it('--json gives one JSON document for --version, --help, a group without its subcommand, and refusals', async () => {
    const version = await run(['--version', '--json']);
    expect(version.code).toBe(0);
    expect(version.json).toMatchObject({ version: expect.any(String), schema: expect.any(Number) });
    const help = await run(['ops', 'list', '--help', '--json']);
    expect(help.code).toBe(0);
    expect(help.json.command).toBe('recon ops list');
    expect(help.json.options.map((o: { flags: string }) => o.flags)).toContain('--since <duration|date>');
    const group = await run(['ops', '--json']);
    expect(group.code).toBe(2);
    expect(group.json.error).toMatchObject({ exit_code: 2, type: 'UsageError' });
    expect(group.json.error.message).toContain('ops: a subcommand is required');
    const prom = await run(['stats', '--format', 'prometheus', '--json']);
    expect(prom.code).toBe(2);
    expect(prom.json.error).toMatchObject({ exit_code: 2, type: 'UsageError' });
  });

  it('ops list --since; -y; empty filter values are usage errors', async () => {
    const since = await run(['ops', 'list', '--since', '1h', '--json']);
    expect(since.code, since.stderr).toBe(0);
    expect(since.json.operations.length).toBeGreaterThan(0);
    const future = await run(['ops', 'list', '--since', '2999-01-01', '--json']);
    expect(future.json.operations).toEqual([]);
    expect((await run(['-y', 'ops', 'list', '--json'])).code).toBe(0);
    for (const flag of ['--client-ref', '--older-than', '--after', '--since', '--provider']) {
      const r = await run(['ops', 'list', flag, '', '--json']);
      expect(r.code, flag).toBe(2);
      expect(r.json.error.message).toContain(`${flag}: empty`);
    }
  });

  it('completion offers values (--outcome, --state, the shell) and never a lone "-"; --help once', async () => {
    const script = (await run(['completion', 'bash'])).stdout;
    const file = path.join(tempDir(), 'recon.bash');
    fs.writeFileSync(file, script);
    const complete = (...words: string[]) =>
      execFileSync('bash', [
        '-c',
        `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _recon; echo "\${COMPREPLY[*]}"`,
      ])
        .toString()
        .trim()
        .split(' ');
    expect(complete('recon', 'review', 'resolve', 'x', '--outcome', '')).toEqual(['confirmed', 'failed', 'cancelled']);
    expect(complete('recon', 'ops', 'list', '--state', '')).toContain('needs_review');
    expect(complete('recon', 'completion', '')).toEqual(['bash', 'zsh', 'fish']);
    expect(complete('recon', 'ops', '')).toEqual(['record', 'approve', 'submit', 'list', 'show']);
    expect(complete('recon', 'ops', 'list', '--').filter((w) => w === '--help')).toHaveLength(1);
    // A value commander checks: the error names the choices.
    const bad = await run(['review', 'resolve', 'refund:exit7', '--outcome', 'done', '--note', 'x']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('confirmed, failed, cancelled');
  });
});
