/**
 * The migrated store template (src/store/template.ts), built by `npm test` and `npm run build`
 * (scripts/store-template.mjs): a new embedded store made from it is the store the migrations make
 * (the same schema dump, the same rows, the same migration bookkeeping), later migrations still apply
 * to it, and it is never laid over an existing store. Embedded only: PostgreSQL stores are migrated.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { loadMigrations, migrate, migrationsDir, schemaStatus } from '../../src/store/migrate.js';
import { openStore } from '../../src/store/open.js';
import { templateVersions } from '../../src/store/pglite.js';
import { readTemplate, templatePath } from '../../src/store/template.js';
import { embeddedBackend, removeTempStores } from '../support/backends.js';
import { dumpSchema } from '../support/schema-dump.js';

const dirs: string[] = [];
afterAll(() => {
  removeTempStores();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-template-test-'));
  dirs.push(dir);
  return dir;
}

const versions = loadMigrations().map((m) => m.version);

/** Every row of every recon table (applied_at aside: a store's own creation time), in a fixed order. */
async function contents(db: Db): Promise<Record<string, unknown[]>> {
  const tables = await db.query<{ name: string }>(
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = 'recon' ORDER BY tablename`,
  );
  const out: Record<string, unknown[]> = {};
  for (const { name } of tables.rows) {
    const rows = await db.query<Record<string, unknown>>(`SELECT * FROM recon.${name} ORDER BY 1`);
    out[name] = rows.rows.map(({ applied_at: _, ...rest }) => rest);
  }
  return out;
}

async function databases(db: Db): Promise<string[]> {
  return (await db.query<{ datname: string }>('SELECT datname FROM pg_database ORDER BY 1')).rows.map((r) => r.datname);
}

async function withStore<T>(db: Db, fn: (db: Db) => Promise<T>): Promise<T> {
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

describe('the migrated store template', () => {
  it('is built for the current migrations and PGlite (scripts/store-template.mjs)', () => {
    expect(fs.existsSync(templatePath()), `${templatePath()} is missing: run node scripts/store-template.mjs`).toBe(
      true,
    );
    expect(readTemplate()).toBeDefined();
  });

  it('makes a memory: store identical to a freshly migrated one, with its migrations recorded', async () => {
    const started = new Date();
    // Migrated here one migration at a time: a copy of the run's initdb-only folder (PGlite's initdb
    // takes seconds), never the template.
    const [fromTemplate, migrated] = await Promise.all([
      openStore('memory:'),
      embeddedBackend.emptyUrl().then((url) => openStore(url, { template: false })),
    ]);
    try {
      expect(templateVersions(fromTemplate)).toEqual(versions);
      expect(templateVersions(migrated)).toEqual([]);
      // The template leaves out what a recon store never uses: the template databases (CREATE DATABASE's).
      expect(await databases(fromTemplate)).toEqual(['postgres']);
      expect(await dumpSchema(fromTemplate)).toBe(await dumpSchema(migrated));
      expect(await contents(fromTemplate)).toEqual(await contents(migrated));
      expect(await schemaStatus(fromTemplate)).toEqual({
        version: versions.at(-1),
        latest: versions.at(-1),
        pending: [],
      });
      // Bookkeeping dated when this store was made, not when the template was built.
      const applied = await fromTemplate.query<{ applied_at: Date }>('SELECT applied_at FROM recon.schema_migrations');
      for (const r of applied.rows) expect(r.applied_at.getTime()).toBeGreaterThanOrEqual(started.getTime() - 1000);
    } finally {
      await Promise.all([fromTemplate.close(), migrated.close()]);
    }
  });

  it('makes a new pglite: folder that is kept, reopens as the same store, and takes later migrations', async () => {
    const folder = path.join(tempDir(), 'db');
    const url = `pglite:${folder}`;
    await withStore(await openStore(url), async (db) => {
      expect(templateVersions(db)).toEqual(versions);
      // The same store as memory:'s, without the template databases: ~430 files to write, not ~1,000.
      expect(await databases(db)).toEqual(['postgres']);
      await db.query(`CREATE TABLE recon.kept (id int PRIMARY KEY); INSERT INTO recon.kept VALUES (7)`);
    });
    expect(fs.existsSync(path.join(folder, 'PG_VERSION'))).toBe(true);
    // A migration added after the template was built applies to a store made from it.
    const dir = tempDir();
    for (const m of loadMigrations()) fs.copyFileSync(path.join(migrationsDir(), m.file), path.join(dir, m.file));
    const next = versions.at(-1)! + 1;
    fs.writeFileSync(
      path.join(dir, `${String(next).padStart(4, '0')}_later.sql`),
      'ALTER TABLE recon.kept ADD COLUMN note text;',
    );
    await withStore(
      await openStore(url, { migrationsDir: dir, autoMigrate: false, requireCurrent: false }),
      async (db) => {
        expect(templateVersions(db)).toEqual([]);
        expect(await migrate(db, { dir })).toEqual({ applied: [next], version: next });
        expect((await db.query('SELECT id, note FROM recon.kept')).rows).toEqual([{ id: 7, note: null }]);
      },
    );
  });

  it('is not used for an existing store: one without recon schema is migrated one by one', async () => {
    await withStore(await openStore(await embeddedBackend.emptyUrl()), async (db) => {
      expect(templateVersions(db)).toEqual([]);
      expect((await schemaStatus(db)).pending).toEqual([]);
    });
  });

  it('is not used for a new store opened without auto-migration (recon db status, db migrate)', async () => {
    const folder = path.join(tempDir(), 'db');
    await withStore(await openStore(`pglite:${folder}`, { autoMigrate: false, requireCurrent: false }), async (db) => {
      expect(templateVersions(db)).toEqual([]);
      expect((await schemaStatus(db)).version).toBe(0);
    });
  });
});
