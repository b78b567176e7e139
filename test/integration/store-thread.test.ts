/**
 * `recon demo`'s store on a worker thread (src/store/thread.ts): the same `memory:` store as in
 * process, behind the same Db, with transactions committed or rolled back as on PGlite itself and
 * PostgreSQL's errors carrying their SQLSTATE. Runs the built module (the worker is compiled JS).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { loadMigrations } from '../../src/store/migrate.js';
import { pgCode } from '../../src/store/pgcodes.js';
import { BASELINE_WASM_FLAGS } from '../../src/store/wasm-tier.js';
import { collect, recon, ROOT } from '../support/cli.js';

async function open(): Promise<Db> {
  const url = pathToFileURL(path.join(ROOT, 'dist', 'src', 'store', 'thread.js')).href;
  const { openMemoryStoreOnThread } = (await import(url)) as typeof import('../../src/store/thread.js');
  const store = openMemoryStoreOnThread();
  expect(store, 'dist/src/store/thread-worker.js is built').toBeDefined();
  return store!;
}

describe('a memory: store on a worker thread', () => {
  it('is a migrated store; a transaction commits when its function resolves and rolls back when it throws', async () => {
    const db = await open();
    try {
      const versions = (await db.query<{ version: number }>('SELECT version FROM recon.schema_migrations ORDER BY 1'))
        .rows;
      expect(versions.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
      await db.query('CREATE TABLE t (id int PRIMARY KEY, at timestamptz)');
      const at = new Date('2026-01-02T03:04:05.678Z');
      expect(
        await db.transaction(async (tx) => {
          await tx.query('INSERT INTO t VALUES ($1, $2)', [1, at]);
          return (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM t')).rows[0].n;
        }),
      ).toBe(1);
      const thrown = new Error('the caller changed its mind');
      await expect(
        db.transaction(async (tx) => {
          await tx.query('INSERT INTO t VALUES (2, now())');
          throw thrown;
        }),
      ).rejects.toThrow('the caller changed its mind');
      expect((await db.query('SELECT id, at FROM t')).rows).toEqual([{ id: 1, at }]);
      // A statement's error keeps PostgreSQL's fields, the SQLSTATE first.
      const dup = await db.query('INSERT INTO t VALUES (1, now())').catch((e: unknown) => e);
      expect(pgCode(dup)).toBe('23505');
      expect((dup as Error).message).toMatch(/duplicate key value violates unique constraint "t_pkey"/);
      // Statements from concurrent callers, with a transaction among them, all land in order.
      await Promise.all([
        db.transaction(async (tx) => {
          for (let i = 10; i < 20; i++) await tx.query('INSERT INTO t VALUES ($1, now())', [i]);
        }),
        ...Array.from({ length: 10 }, (_, i) => db.query('INSERT INTO t VALUES ($1, now())', [100 + i])),
      ]);
      expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM t')).rows[0].n).toBe(21);
    } finally {
      await db.close();
    }
    await expect(db.query('SELECT 1')).rejects.toThrow(/thread ended/);
  });

  // bin/recon starts the demo's store before the CLI loads (startMemoryStoreThread); the demo takes it.
  const THREAD = pathToFileURL(path.join(ROOT, 'dist', 'src', 'store', 'thread.js')).href;
  // A CommonJS script (its worker inherits node's flags, and --input-type would be one of them).
  const node = (script: string) =>
    collect(spawn(process.execPath, ['-e', `(async () => { ${script} })()`], { cwd: ROOT }), { timeoutMs: 30_000 });

  it('a store started early and never taken does not keep its process alive; taken, it is the store', async () => {
    const abandoned = await node(
      `const m = await import(${JSON.stringify(THREAD)}); m.startMemoryStoreThread(); console.log('started');`,
    );
    expect(abandoned.signal, 'the process ended by itself').toBeNull();
    expect(abandoned.code).toBe(0);
    expect(abandoned.stdout).toBe('started\n');

    const taken = await node(`const m = await import(${JSON.stringify(THREAD)});
      m.startMemoryStoreThread();
      const db = await m.openMemoryStoreOnThread();
      const { rows } = await db.query('SELECT count(*)::int AS n FROM recon.schema_migrations');
      console.log(JSON.stringify(rows[0]));
      await db.close();`);
    expect(taken.stderr).toBe('');
    expect(taken.code).toBe(0);
    expect(JSON.parse(taken.stdout).n).toBe(loadMigrations().length);
  });

  it('recon demo that ends at a usage error exits at once, its early store left behind', async () => {
    const r = await recon(['demo', '--no-such-flag'], { timeoutMs: 30_000 });
    expect(r.signal).toBeNull();
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--no-such-flag');
  });

  it('recon demo plays on the one thread bin/recon started before the CLI loaded, on the baseline WebAssembly tier', async () => {
    // A preload records, in order, each V8 flag the process sets and each worker thread it starts,
    // with whether commander (the CLI) was loaded by then.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-thread-'));
    const log = path.join(dir, 'log.txt');
    const preload = path.join(dir, 'record.mjs');
    fs.writeFileSync(
      preload,
      `import fs from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import v8 from 'node:v8';
import wt from 'node:worker_threads';
const note = (line) => fs.appendFileSync(${JSON.stringify(log)}, line + '\\n');
const set = v8.setFlagsFromString;
v8.setFlagsFromString = (flags) => { note('flags ' + flags); set(flags); };
const cache = createRequire(import.meta.url).cache;
const Worker = wt.Worker;
wt.Worker = class extends Worker {
  constructor(...args) {
    note('worker, commander loaded: ' + Object.keys(cache).some((k) => k.includes('/node_modules/commander/')));
    super(...args);
  }
};
syncBuiltinESMExports();
`,
    );
    try {
      const r = await recon(['demo', '--json'], { env: { NODE_OPTIONS: `--import ${preload}` }, timeoutMs: 120_000 });
      expect(r.code, r.stderr).toBe(0);
      expect(r.json.ok).toBe(true);
      const lines = fs.readFileSync(log, 'utf8').trim().split('\n');
      // The flags before the thread compiles PostgreSQL; the thread before the CLI; one thread only.
      expect(lines.slice(0, 2)).toEqual([`flags ${BASELINE_WASM_FLAGS}`, 'worker, commander loaded: false']);
      expect(lines.filter((l) => l.startsWith('worker'))).toHaveLength(1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
