import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { StoreLockedError, UsageError } from '../../src/errors.js';
import { textArrayParam, type Db } from '../../src/store/db.js';
import { loadMigrations, migrate, schemaStatus, SchemaVersionError } from '../../src/store/migrate.js';
import { openStore, parseStoreUrl, resolveStoreUrl } from '../../src/store/open.js';
import { backends, removeTempStores } from '../support/backends.js';

const latest = loadMigrations().at(-1)!.version;

const migrationDirs: string[] = [];
afterAll(() => {
  removeTempStores();
  for (const dir of migrationDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** A migrations folder of our own, so version arithmetic does not depend on the real schema. */
function migrationsFolder(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-migrations-'));
  migrationDirs.push(dir);
  for (const [name, sql] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), sql);
  return dir;
}
const V1 = { '0001_first.sql': 'CREATE SCHEMA IF NOT EXISTS recon; CREATE TABLE recon.widgets (id int PRIMARY KEY);' };
const V2 = { ...V1, '0002_second.sql': 'ALTER TABLE recon.widgets ADD COLUMN name text;' };

async function withStore<T>(db: Db, fn: (db: Db) => Promise<T>): Promise<T> {
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

describe.each(backends)('store on $name', (backend) => {
  // One open store for the tests of queries (each makes its own table): opening one is what the
  // tests above are about, not these, and a PGlite open costs about a second.
  let queried: Promise<Db> | undefined;
  const queryStore = () => (queried ??= backend.open());
  afterAll(async () => {
    await (await queried)?.close();
  });

  it('migrates an empty store on first open, to the latest schema', async () => {
    await withStore(await openStore(await backend.emptyUrl()), async (db) => {
      expect(db.kind).toBe(backend.name);
      expect(await schemaStatus(db)).toEqual({ version: latest, latest, pending: [] });
      const tables = await db.query<{ name: string }>(
        `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'recon' ORDER BY 1`,
      );
      expect(tables.rows.map((r) => r.name)).toEqual(
        expect.arrayContaining(['operations', 'attempts', 'audit_events', 'schema_migrations', 'webhook_events']),
      );
      const applied = await db.query('SELECT version, name FROM recon.schema_migrations');
      expect(applied.rowCount).toBe(loadMigrations().length);
    });
  });

  it('re-migrating and re-opening a current store changes nothing', async () => {
    const url = await backend.migratedUrl();
    await withStore(await openStore(url), async (db) => {
      expect(await migrate(db)).toEqual({ applied: [], version: latest });
    });
    await withStore(await openStore(url), async (db) => {
      const rows = await db.query('SELECT version FROM recon.schema_migrations');
      expect(rows.rowCount).toBe(loadMigrations().length);
    });
  });

  it('without autoMigrate an empty store reports everything pending, and is refused when current is required', async () => {
    const url = await backend.emptyUrl();
    await withStore(await openStore(url, { autoMigrate: false, requireCurrent: false }), async (db) => {
      const status = await schemaStatus(db);
      expect(status).toEqual({ version: 0, latest, pending: loadMigrations().map((m) => m.version) });
    });
    await expect(openStore(url, { autoMigrate: false })).rejects.toThrow(/has no schema yet: run `recon db migrate`/);
  });

  it('an older store is not migrated implicitly; `migrate` applies only what is pending', async () => {
    const url = await backend.emptyUrl();
    await (await openStore(url, { migrationsDir: migrationsFolder(V1) })).close();
    const v2 = migrationsFolder(V2);
    const refused = openStore(url, { migrationsDir: v2 });
    await expect(refused).rejects.toBeInstanceOf(SchemaVersionError);
    await expect(refused).rejects.toThrow(/schema version 1, this recon needs 2: run `recon db migrate`/);
    await withStore(await openStore(url, { migrationsDir: v2, requireCurrent: false }), async (db) => {
      expect(await migrate(db, { dir: v2 })).toEqual({ applied: [2], version: 2 });
      await db.query(`INSERT INTO recon.widgets (id, name) VALUES (1, 'a')`);
    });
  });

  it('a store migrated by a newer recon is refused, by open and by migrate', async () => {
    const url = await backend.migratedUrl();
    await withStore(await openStore(url), async (db) => {
      await db.query(`INSERT INTO recon.schema_migrations (version, name, applied_at) VALUES (999, 'future', now())`);
    });
    const refused = openStore(url);
    await expect(refused).rejects.toBeInstanceOf(SchemaVersionError);
    await expect(refused).rejects.toThrow(`has schema version 999, newer than this recon knows (${latest})`);
    // migrate() on such a store refuses too, and applies nothing.
    const db = await openRaw(url);
    await withStore(db, async () => {
      await expect(migrate(db)).rejects.toBeInstanceOf(SchemaVersionError);
    });
  });

  it('a failing migration is rolled back whole and names its file', async () => {
    const dir = migrationsFolder({
      ...V1,
      '0002_broken.sql': 'ALTER TABLE recon.widgets ADD COLUMN x int; SELECT * FROM nowhere;',
    });
    const url = await backend.emptyUrl();
    await expect(openStore(url, { migrationsDir: dir })).rejects.toThrow(
      /migration 0002_broken\.sql failed: .*nowhere/,
    );
    await withStore(await openStore(url, { migrationsDir: migrationsFolder(V1) }), async (db) => {
      expect(await schemaStatus(db, { dir: migrationsFolder(V1) })).toEqual({ version: 1, latest: 1, pending: [] });
      const cols = await db.query(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = 'recon' AND table_name = 'widgets'`,
      );
      expect(cols.rows).toEqual([{ column_name: 'id' }]);
    });
  });

  it('a transaction commits when its function resolves and rolls back when it throws', async () => {
    const db = await queryStore();
    await db.query('CREATE TABLE public.t (id int PRIMARY KEY)');
    const result = await db.transaction(async (tx) => {
      await tx.query('INSERT INTO public.t VALUES ($1::int)', [1]);
      return 'done';
    });
    expect(result).toBe('done');
    const boom = new Error('boom');
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO public.t VALUES ($1::int)', [2]);
        throw boom;
      }),
    ).rejects.toBe(boom);
    const rows = await db.query<{ id: number }>('SELECT id FROM public.t ORDER BY id');
    expect(rows.rows).toEqual([{ id: 1 }]);
  });

  // PostgreSQL only: PGlite runs a transaction's function from its own queue, where the async
  // stack of the caller ends (its errors carry PGlite's stack, as they always have).
  it.skipIf(backend.name !== 'postgres')(
    'a failed query in a transaction has a stack that leads back to the code that made it',
    async () => {
      const db = await queryStore();
      // A named caller, as in recon's core: with DEBUG, this stack is what a person reads.
      async function callerOfTheQuery(): Promise<void> {
        await db.transaction(async (tx) => {
          await tx.query('SELECT 1 / $1::int', [0]);
        });
      }
      const err = await callerOfTheQuery().then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toMatch(/division by zero/);
      expect(err?.stack).toContain('callerOfTheQuery');
    },
  );

  it('returns bigint and numeric as numbers, jsonb as objects, timestamptz as Dates; rowCount counts changes', async () => {
    const db = await queryStore();
    const res = await db.query(
      `SELECT 4200::bigint AS amount, 12.5::numeric AS n, ARRAY[1, 2]::bigint[] AS ids,
              '{"a": 1}'::jsonb AS j, '2024-01-02T03:04:05Z'::timestamptz AS at`,
    );
    expect(res.rows[0]).toEqual({
      amount: 4200,
      n: 12.5,
      ids: [1, 2],
      j: { a: 1 },
      at: new Date('2024-01-02T03:04:05Z'),
    });
    await db.query('CREATE TABLE public.c (id int)');
    expect((await db.query('INSERT INTO public.c SELECT generate_series(1, $1::int)', [3])).rowCount).toBe(3);
    expect((await db.query('UPDATE public.c SET id = id + 1 WHERE id > $1::int', [1])).rowCount).toBe(2);
    expect((await db.query('SELECT * FROM public.c')).rowCount).toBe(3);
  });

  it('reads an array parameter written by textArrayParam as the values it was made of', async () => {
    const db = await queryStore();
    const hostile = ['a', '', 'NULL', 'null', 'say "hi"', 'back\\slash \\"', '{,}', ' spaced ', 'é 😀 \u2028'];
    // (A lone surrogate cannot reach the server at all: UTF-8 has no spelling for it.)
    const controls = ['line\nbreak', 'tab\there', 'nul-free \u0001'];
    for (const values of [hostile, [...hostile, null], controls, [...hostile, ...controls], [], [null]]) {
      const param = textArrayParam(values);
      // Only values JSON writes as PostgreSQL reads them go as one literal; the others as they are.
      expect(typeof param === 'string').toBe(!values.some((v) => v !== null && /[\u0000-\u001f\ud800-\udfff]/.test(v)));
      const r = await db.query<{ v: (string | null)[] }>('SELECT $1::text[] AS v', [param]);
      expect(r.rows[0].v).toEqual(values);
    }
    // A value that is not a string (a provider's id of another type) goes to the driver, as it did.
    const odd = [{ a: 1 }, ['x'], 1] as unknown as string[];
    expect(textArrayParam(odd)).toBe(odd);
    // JSON texts (JSON.stringify's output: control characters and lone surrogates escaped) as jsonb[].
    const objects = [{ a: 'x"y\\z', n: 1 }, { nl: 'one\ntwo', tab: '\t', e: '😀' }, null, { nested: { k: [1, null] } }];
    const texts = objects.map((o) => (o === null ? null : JSON.stringify(o)));
    const param = textArrayParam(texts, { jsonTexts: true });
    expect(typeof param).toBe('string');
    const r = await db.query<{ v: unknown[] }>('SELECT $1::jsonb[] AS v', [param]);
    expect(r.rows[0].v).toEqual(objects);
  });

  it('claims rows with FOR UPDATE SKIP LOCKED', async () => {
    const db = await queryStore();
    await db.query('CREATE TABLE public.q (id int PRIMARY KEY); INSERT INTO public.q VALUES (1), (2), (3);');
    const claim = `SELECT id FROM public.q ORDER BY id LIMIT $1::int FOR UPDATE SKIP LOCKED`;
    if (db.kind === 'pglite') {
      // One connection: there is no concurrent holder, but the same SQL must parse and run.
      const rows = await db.transaction((tx) => tx.query<{ id: number }>(claim, [2]));
      expect(rows.rows).toEqual([{ id: 1 }, { id: 2 }]);
      return;
    }
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let firstClaimed!: (ids: number[]) => void;
    const first = new Promise<number[]>((r) => (firstClaimed = r));
    const holder = db.transaction(async (tx) => {
      firstClaimed((await tx.query<{ id: number }>(claim, [2])).rows.map((r) => r.id));
      await held;
    });
    expect(await first).toEqual([1, 2]);
    const second = await db.transaction((tx) => tx.query<{ id: number }>(claim, [2]));
    expect(second.rows).toEqual([{ id: 3 }]);
    release();
    await holder;
  });
});

/** Opens without schema checks, to look at a store that openStore refuses. */
async function openRaw(url: string): Promise<Db> {
  const target = parseStoreUrl(url);
  if (target.kind === 'postgres') return (await import('../../src/store/postgres.js')).openPostgres(url);
  return (await import('../../src/store/pglite.js')).openPglite(
    url,
    target.kind === 'pglite' ? target.path : undefined,
  );
}

describe.runIf(backends.some((b) => b.name === 'postgres'))('store on postgres: concurrency and reachability', () => {
  const pgBackend = backends.find((b) => b.name === 'postgres')!;

  it('several processes opening one empty database at once apply each migration once', async () => {
    const url = await pgBackend.url();
    const dbs = await Promise.all([openStore(url), openStore(url), openStore(url), openStore(url)]);
    try {
      const rows = await dbs[0].query<{ version: number }>(
        'SELECT version FROM recon.schema_migrations ORDER BY version',
      );
      expect(rows.rows.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
    } finally {
      await Promise.all(dbs.map((db) => db.close()));
    }
  });

  it('a migration waiting too long for another one reports "another migration is running" (exit 6)', async () => {
    const url = await pgBackend.url();
    await withStore(await openStore(url, { autoMigrate: false, requireCurrent: false }), async (db) => {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = db.transaction(async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock($1::bigint)', [0x7265636f6e]);
        locked();
        await held;
      });
      await isLocked;
      await withStore(await openStore(url, { autoMigrate: false, requireCurrent: false }), async (other) => {
        const err = await migrate(other, { lockTimeout: '200ms' }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(StoreLockedError);
        expect((err as StoreLockedError).exitCode).toBe(6);
        expect((err as Error).message).toMatch(/another migration is running on postgres:\/\/.*\(waited 200ms\)/);
        expect(await schemaStatus(other)).toMatchObject({ version: 0 });
      });
      release();
      await holder;
    });
  });

  it('an unreachable server is exit 6 "store unreachable", with the password redacted', async () => {
    const err = await openStore('postgres://recon:s3cret-pw@127.0.0.1:1/ops').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreLockedError);
    expect((err as Error).message).toMatch(
      /^store unreachable: postgres:\/\/recon:\[redacted\]@127\.0\.0\.1:1\/ops: .*ECONNREFUSED/,
    );
    expect((err as Error).message).not.toContain('s3cret-pw');
    expect((err as Error).cause).toBeDefined();
  });

  it('a database that does not exist is exit 6 too', async () => {
    const url = new URL(await pgBackend.url());
    url.pathname = '/recon_no_such_db';
    const err = await openStore(url.toString()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreLockedError);
    expect((err as Error).message).toMatch(/store unreachable: .*recon_no_such_db.*does not exist/);
  });
});

describe.runIf(backends.some((b) => b.name === 'pglite'))('embedded store lock', () => {
  const pgliteBackend = backends.find((b) => b.name === 'pglite')!;
  const folderOf = (url: string) => url.slice('pglite:'.length);
  const host = os.hostname();

  /** A process that is alive and is not us. */
  function liveChild() {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120000)'], { stdio: 'ignore' });
    return child;
  }
  /** A pid that was alive a moment ago and is no more. */
  function deadPid(): number {
    const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    return Number(r.stdout.toString());
  }
  const writeLock = (url: string, record: object) => fs.writeFileSync(`${folderOf(url)}.lock`, JSON.stringify(record));

  it('creates the data folder with mode 0700 and a lock file holding pid and host, removed on close', async () => {
    const url = await pgliteBackend.url();
    // A new folder, made as recon makes one (`recon init`, a first `ops record`): from the migrated
    // store template. Opened without auto-migration it would go through PGlite's initdb instead,
    // seconds of CPU for nothing this test is about (that path: store-template.test.ts).
    const db = await openStore(url);
    const lockFile = `${folderOf(url)}.lock`;
    expect(fs.statSync(folderOf(url)).mode & 0o777).toBe(0o700);
    expect(JSON.parse(fs.readFileSync(lockFile, 'utf8'))).toMatchObject({ pid: process.pid, host });
    await db.close();
    expect(fs.existsSync(lockFile)).toBe(false);
  });

  it('a second open while the store is open is exit 6 naming the holder; after close it opens', async () => {
    const url = await pgliteBackend.migratedUrl();
    const first = await openStore(url);
    const err = await openStore(url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreLockedError);
    expect((err as StoreLockedError).exitCode).toBe(6);
    expect((err as Error).message).toContain(`store ${url} is locked by pid ${process.pid} on host ${host} (since `);
    expect((err as Error).message).toContain('wait for it to finish or stop it');
    // The refused open must not have taken or removed the holder's lock.
    expect(JSON.parse(fs.readFileSync(`${folderOf(url)}.lock`, 'utf8')).pid).toBe(process.pid);
    await first.close();
    await (await openStore(url)).close();
  });

  it('a lock held by another live process on this host is respected until that process dies', async () => {
    const url = await pgliteBackend.migratedUrl();
    const child = liveChild();
    const exited = new Promise((r) => child.on('exit', r));
    try {
      writeLock(url, { pid: child.pid, host, started_at: '2024-05-01T10:00:00.000Z' });
      await expect(openStore(url)).rejects.toThrow(
        `is locked by pid ${child.pid} on host ${host} (since 2024-05-01T10:00:00.000Z)`,
      );
    } finally {
      child.kill('SIGKILL');
    }
    await exited;
    // Now the holder is dead: its lock is stale, cleared, and replaced by ours.
    const db = await openStore(url);
    expect(JSON.parse(fs.readFileSync(`${folderOf(url)}.lock`, 'utf8')).pid).toBe(process.pid);
    await db.close();
  });

  it("a dead process's lock on this host is cleared", async () => {
    const url = await pgliteBackend.migratedUrl();
    writeLock(url, { pid: deadPid(), host, started_at: '2024-05-01T10:00:00.000Z' });
    await withStore(await openStore(url), async (db) => {
      expect((await schemaStatus(db)).pending).toEqual([]);
    });
  });

  it('a lock from another host is never cleared (its pid cannot be checked from here)', async () => {
    const url = await pgliteBackend.url();
    fs.mkdirSync(path.dirname(folderOf(url)), { recursive: true });
    writeLock(url, { pid: deadPid(), host: `not-${host}`, started_at: '2024-05-01T10:00:00.000Z' });
    await expect(openStore(url)).rejects.toThrow(`on host not-${host}`);
  });

  it('an empty lock file with no live holder (a disk that filled while it was written) is stale: the store opens', async () => {
    // Issue 10: it used to be "held" for ever. Empty for longer than a writer needs, nobody holds it.
    const url = await pgliteBackend.migratedUrl();
    fs.mkdirSync(path.dirname(folderOf(url)), { recursive: true });
    fs.writeFileSync(`${folderOf(url)}.lock`, '');
    await withStore(await openStore(url), async () => {
      expect(JSON.parse(fs.readFileSync(`${folderOf(url)}.lock`, 'utf8')).pid).toBe(process.pid);
    });
  });

  it('memory: needs no lock and opens migrated', async () => {
    await withStore(await openStore('memory:'), async (db) => {
      expect(db.kind).toBe('pglite');
      expect((await schemaStatus(db)).version).toBe(latest);
    });
  });
});

describe('store URL', () => {
  it('takes --db, then RECON_DB, then DATABASE_URL, then the config, then pglite:.recon/db', () => {
    const env = { RECON_DB: 'pglite:/a', DATABASE_URL: 'postgres://h/b' };
    expect(resolveStoreUrl({ flag: 'memory:', env, configDb: 'pglite:/c' })).toBe('memory:');
    expect(resolveStoreUrl({ env, configDb: 'pglite:/c' })).toBe('pglite:/a');
    expect(resolveStoreUrl({ env: { DATABASE_URL: 'postgres://h/b' }, configDb: 'pglite:/c' })).toBe('postgres://h/b');
    expect(resolveStoreUrl({ env: { RECON_DB: '' }, configDb: 'pglite:/c' })).toBe('pglite:/c');
    expect(resolveStoreUrl({ env: {} })).toBe('pglite:.recon/db');
  });

  it('accepts postgres://, postgresql://, pglite:PATH and memory:, and nothing else (exit 2)', async () => {
    expect(parseStoreUrl('postgresql://u@h:5/d')).toEqual({ kind: 'postgres', url: 'postgresql://u@h:5/d' });
    expect(parseStoreUrl('pglite:.recon/db')).toEqual({ kind: 'pglite', path: '.recon/db' });
    expect(parseStoreUrl('memory:')).toEqual({ kind: 'memory' });
    for (const bad of ['mysql://u:pw@h/d', 'pglite:', '.recon/db', 'memory']) {
      expect(() => parseStoreUrl(bad)).toThrow(UsageError);
    }
    expect(() => parseStoreUrl('mysql://u:hunter2@h/d')).toThrow(
      /^invalid --db URL mysql:\/\/u:\[redacted\]@h\/d: use postgres/,
    );
    await expect(openStore('sqlite:x')).rejects.toBeInstanceOf(UsageError);
  });
});
