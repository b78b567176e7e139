/**
 * Issue 11, "never a silent wrong answer": the store is found like git finds `.git`, a cron job in
 * the wrong directory alerts (exit 6) instead of reporting a green empty store, an outage is not
 * hidden by an open review, lists say what they left out, and scripts get JSON errors.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
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

// Commands run in process (oncall-support.ts); a shared, loaded machine: generous timeouts.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 240_000 });

afterAll(removeTempDirs);

const NO_STORE = /no recon store in (\S+) or a parent; run `recon init` here or set RECON_DB/;
const ndjson = (ops: unknown[]) => ops.map((o) => JSON.stringify(o)).join('\n') + '\n';

describe('finding the store', () => {
  it('a command run where there is no store exits 6 and creates nothing', async () => {
    const dir = tempDir();
    const list = await recon(['ops', 'list', '--unresolved'], { cwd: dir });
    expect(list.code).toBe(6);
    expect(list.stderr).toMatch(NO_STORE);
    expect(NO_STORE.exec(list.stderr)![1]).toBe(dir);
    const run = await recon(['run', '--json'], { cwd: dir });
    expect(run.code).toBe(6);
    expect(run.json.error).toMatchObject({ exit_code: 6 });
    expect(run.json.error.message).toMatch(NO_STORE);
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('ops record creates the store and says where; commands in subfolders and inside .recon find it', async () => {
    const dir = tempDir();
    const rec = await recon(['ops', 'record', '-'], {
      cwd: dir,
      env: STRIPE_ENV,
      input: ndjson([refund('refund:ord_1', { approval: undefined })]),
    });
    expect(rec.code, rec.stderr).toBe(0);
    expect(rec.stderr).toContain(`created a new recon store at ${path.join(dir, '.recon', 'db')}`);
    const deep = path.join(dir, 'a', 'b');
    fs.mkdirSync(deep, { recursive: true });
    for (const cwd of [deep, path.join(dir, '.recon')]) {
      const list = await recon(['ops', 'list', '--json'], { cwd });
      expect(list.code, list.stderr).toBe(0);
      expect(list.json.operations.map((o: { id: string }) => o.id)).toEqual(['refund:ord_1']);
      expect(list.stderr).not.toContain('created');
    }
    expect(fs.existsSync(path.join(dir, '.recon', '.recon'))).toBe(false);
    expect(fs.existsSync(path.join(deep, '.recon'))).toBe(false);
  });

  it('recon init makes the store beside its config; the config and its relative db are found from a subfolder', async () => {
    const dir = tempDir();
    const init = await recon(['init'], { cwd: dir });
    expect(init.code, init.stderr).toBe(0);
    expect(init.stderr).toContain(`created a new recon store at ${path.join(dir, '.recon', 'db')}`);
    const sub = path.join(dir, 'services', 'refunds');
    fs.mkdirSync(sub, { recursive: true });
    // The provider `stripe` comes from the parent's config file (apiKey from the environment).
    const rec = await recon(['ops', 'record', '-'], {
      cwd: sub,
      input: ndjson([refund('refund:ord_2')]),
      env: STRIPE_ENV,
    });
    expect(rec.code, rec.stderr).toBe(0);
    expect(rec.stderr).not.toContain('created a new recon store');
    expect(fs.existsSync(path.join(sub, '.recon'))).toBe(false);
    const show = await recon(['ops', 'show', 'refund:ord_2', '--json'], { cwd: dir });
    expect(show.code, show.stderr).toBe(0);
  });
});

describe('a bad config file', () => {
  it('is exit 2 for every command, run included, even with nothing to claim', async () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'recon.config.json'), '{"providers": {');
    for (const args of [['run'], ['ops', 'list'], ['review', 'list'], ['stats']]) {
      const r = await recon(args, { cwd: dir, env: { RECON_DB: 'memory:' } });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/^recon: recon\.config\.json: invalid JSON/m);
    }
  });
});

describe('recon run', () => {
  it('exits 5, not 8, when the provider is down while a review is open; the metrics file carries both', async () => {
    // The store a first `ops record` would create (its creation is tested above).
    // One open store for the test's commands (finding it is tested above; opening it costs ~1 s each).
    const dir = await withStore(configDir('http://127.0.0.1:9', { uncertaintyWindow: '1s', timeout: '1s' }));
    const store = sharedStore(dir);
    const env = STRIPE_ENV;
    try {
      expect(
        (await store.recon(['ops', 'record', '-'], { env, input: ndjson([refund('refund:a'), refund('refund:b')]) }))
          .code,
      ).toBe(0);
      for (const id of ['refund:a', 'refund:b']) {
        const s = await store.recon(['ops', 'submit', id], { env });
        // The provider is unreachable: outcome_unknown, exit 7 (SPEC §7).
        expect(s.code, s.stderr).toBe(7);
      }
      const esc = await store.recon(['escalate', 'refund:b', '--reason', 'customer called'], { env });
      expect(esc.code, esc.stderr).toBe(0);
      const metrics = path.join(dir, 'recon.prom');
      // The provider's port is closed: recon retries each read; the back-off is not waited out here.
      const run = await store.recon(['run', '--json', '--metrics-file', metrics], { env, shortBackoff: true });
      expect(run.code, run.stderr).toBe(5);
      expect(run.json.unavailable).toBe(1);
      const text = fs.readFileSync(metrics, 'utf8');
      expect(text).toMatch(/^recon_needs_review_operations 1$/m);
      expect(text).toMatch(/^recon_run_provider_unavailable 1$/m);
    } finally {
      await store.release();
    }
  });
});

describe('ops list', () => {
  it('says how many it did not show, and --json carries total', async () => {
    const dir = await withStore(tempDir());
    const store = sharedStore(dir);
    try {
      const ops = Array.from({ length: 151 }, (_, i) => refund(`refund:ord_${1000 + i}`, { approval: undefined }));
      expect((await store.recon(['ops', 'record', '-'], { env: STRIPE_ENV, input: ndjson(ops) })).code).toBe(0);
      const list = await store.recon(['ops', 'list', '--state', 'proposed']);
      expect(list.code).toBe(0);
      expect(list.stderr).toContain('showing 50 of 151; --limit N');
      const json = await store.recon(['ops', 'list', '--json']);
      expect(json.json.operations).toHaveLength(50);
      expect(json.json.total).toBe(151);
    } finally {
      await store.release();
    }
  });
});

describe('--json errors', () => {
  it.each([
    [['ops', 'list', '--bogus']],
    [['ops', 'list', '--limit', 'abc']],
    [['frobnicate']],
    [['review', 'resolve', 'refund:x', '--outcome', 'failed']],
  ])('recon %j --json prints the error document on stdout (exit 2)', async (args) => {
    const r = await recon([...args, '--json'], { cwd: tempDir() });
    expect(r.code).toBe(2);
    expect(r.json?.error, `stdout: ${r.stdout}`).toMatchObject({ exit_code: 2, type: 'UsageError' });
    expect(r.json.error.message).toBeTruthy();
  });
});

describe('ops submit', () => {
  it('prints its result on stdout', async () => {
    const dir = await withStore(configDir('http://127.0.0.1:9', { timeout: '1s' }));
    const store = sharedStore(dir);
    try {
      await store.recon(['ops', 'record', '-'], { env: STRIPE_ENV, input: ndjson([refund('refund:s1')]) });
      const r = await store.recon(['ops', 'submit', 'refund:s1'], { env: STRIPE_ENV });
      // The provider is unreachable: outcome unknown, exit 7 (SPEC §7).
      expect(r.code, r.stderr).toBe(7);
      expect(r.stdout).toMatch(/refund:s1: attempt 1 → outcome_unknown/);
    } finally {
      await store.release();
    }
  });
});
