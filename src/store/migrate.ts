/**
 * Schema migrations: numbered `.sql` files in `src/store/migrations/` (`0001_init.sql` is
 * version 1), applied in order, each in its own transaction together with its row in
 * `recon.schema_migrations`.
 *
 * Concurrency: every migration transaction first takes a transaction-scoped advisory lock
 * (`pg_advisory_xact_lock`) and then re-reads what is applied, so two processes that open an
 * empty PostgreSQL store at once (`recon run` from two hosts) apply each migration exactly
 * once: the second waits for the first and then finds nothing left to do. The wait is bounded
 * by `lock_timeout`; past it, "another migration is running" is reported as exit 6. PGlite runs
 * the same SQL (it has a single connection, so the lock is always free).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ReconError, StoreLockedError, UsageError } from '../errors.js';
import type { Db, Queryable } from './db.js';
import { LOCK_NOT_AVAILABLE, pgCode } from './pgcodes.js';

/** 'recon' in ASCII: one fixed key shared by every recon binary, old and new. */
const MIGRATION_LOCK_KEY = 0x7265636f6e;
const FILE_NAME = /^(\d+)_([A-Za-z0-9_.-]+)\.sql$/;

export interface Migration {
  version: number;
  name: string;
  file: string;
  sql: string;
}

export interface MigrateOptions {
  /** Folder of `.sql` files; default `src/store/migrations` of this package. */
  dir?: string;
  /** How long to wait for another process's migration; default `'60s'` (a PostgreSQL interval). */
  lockTimeout?: string;
}

export interface SchemaStatus {
  /** Highest applied version; 0 for an empty store. */
  version: number;
  /** Highest version this binary knows. */
  latest: number;
  /** Known versions not yet applied, ascending. */
  pending: number[];
}

/**
 * The store's schema does not match this binary: newer (written by a newer recon), or older
 * with migrations pending. Exit 1, not 6: the store is reachable and unlocked, and waiting
 * will not help; the message says what to do instead.
 */
export class SchemaVersionError extends ReconError {}

/**
 * The migrations folder, found from this module's location so that it works from source
 * (`src/store/migrate.ts` under vitest) and from the build (`dist/src/store/migrate.js`),
 * which does not copy the `.sql` files: walk up to the package root and use its `src/store/migrations`.
 */
export function migrationsDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return path.join(dir, 'src', 'store', 'migrations');
    const parent = path.dirname(dir);
    if (parent === dir)
      throw new ReconError(`cannot find recon's package root above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

export function loadMigrations(dir: string = migrationsDir()): Migration[] {
  const migrations: Migration[] = [];
  for (const file of fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()) {
    const m = FILE_NAME.exec(file);
    if (!m) throw new ReconError(`migration file ${path.join(dir, file)} must be named NNNN_name.sql`);
    const version = Number(m[1]);
    if (version < 1 || migrations.some((x) => x.version === version)) {
      throw new ReconError(`migration ${path.join(dir, file)}: version ${version} is zero or used twice`);
    }
    migrations.push({ version, name: m[2], file, sql: fs.readFileSync(path.join(dir, file), 'utf8') });
  }
  return migrations.sort((a, b) => a.version - b.version);
}

export async function schemaStatus(db: Queryable, opts: MigrateOptions = {}): Promise<SchemaStatus> {
  const known = loadMigrations(opts.dir);
  const applied = await appliedVersions(db);
  return status(known, applied);
}

/** Applies every pending migration. Refuses a store newer than this binary. */
export async function migrate(db: Db, opts: MigrateOptions = {}): Promise<{ applied: number[]; version: number }> {
  const known = loadMigrations(opts.dir);
  const lockTimeout = opts.lockTimeout ?? '60s';
  const applied: number[] = [];
  const before = status(known, await appliedVersions(db));
  refuseNewer(db, before);
  if (before.pending.length === 0) return { applied, version: before.version };
  await refuseTransactionPooler(db);

  await locked(db, lockTimeout, async (tx) => {
    await tx.query(`CREATE SCHEMA IF NOT EXISTS recon;
      CREATE TABLE IF NOT EXISTS recon.schema_migrations (
        version    integer PRIMARY KEY,
        name       text NOT NULL,
        applied_at timestamptz NOT NULL
      );`);
    refuseNewer(db, status(known, await appliedVersions(tx)));
  });

  for (const migration of known) {
    await locked(db, lockTimeout, async (tx) => {
      // Re-read under the lock: another process may have applied it while we waited.
      const done = await tx.query('SELECT 1 FROM recon.schema_migrations WHERE version = $1::integer', [
        migration.version,
      ]);
      if (done.rowCount > 0) return;
      try {
        await tx.query(migration.sql);
      } catch (err) {
        throw new ReconError(`migration ${migration.file} failed: ${(err as Error).message}`, { cause: err });
      }
      await tx.query(
        'INSERT INTO recon.schema_migrations (version, name, applied_at) VALUES ($1::integer, $2::text, $3::timestamptz)',
        [migration.version, migration.name, new Date()],
      );
      applied.push(migration.version);
    });
  }
  return { applied, version: status(known, await appliedVersions(db)).version };
}

/**
 * Migrations are DDL run under a lock with `SET LOCAL`, and a half-applied schema behind a pooler
 * that reuses sessions is hard to diagnose; so they ask for PostgreSQL itself, by name.
 */
async function refuseTransactionPooler(db: Db): Promise<void> {
  if (!db.sharesSessions || !(await db.sharesSessions())) return;
  throw new UsageError(
    `${db.displayUrl} is a transaction-mode pooler such as PgBouncer (two connections were served by one ` +
      `PostgreSQL session); migrations need a direct connection: run \`recon db migrate --db URL\` with the ` +
      `URL of PostgreSQL itself (not the pooler's port), then use the pooler for everything else`,
  );
}

/** Throws SchemaVersionError when the store was migrated by a newer recon. */
export function refuseNewer(db: Pick<Db, 'displayUrl'>, s: SchemaStatus): void {
  if (s.version > s.latest) {
    throw new SchemaVersionError(
      `store ${db.displayUrl} has schema version ${s.version}, newer than this recon knows (${s.latest}); ` +
        `upgrade recon to use this store`,
    );
  }
}

async function locked(db: Db, lockTimeout: string, fn: (tx: Queryable) => Promise<void>): Promise<void> {
  await db.transaction(async (tx) => {
    // SET cannot take a parameter; the value is quoted as a literal after validation.
    if (!/^\d+(ms|s|min)?$/.test(lockTimeout)) throw new ReconError(`invalid migration lock timeout: ${lockTimeout}`);
    await tx.query(`SET LOCAL lock_timeout = '${lockTimeout}'`);
    try {
      await tx.query('SELECT pg_advisory_xact_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    } catch (err) {
      if (pgCode(err) !== LOCK_NOT_AVAILABLE) throw err;
      throw new StoreLockedError(
        `another migration is running on ${db.displayUrl} (waited ${lockTimeout}); try again when it has finished`,
        { cause: err },
      );
    }
    await fn(tx);
  });
}

async function appliedVersions(q: Queryable): Promise<number[]> {
  const present = await q.query<{ present: boolean }>(
    `SELECT to_regclass('recon.schema_migrations') IS NOT NULL AS present`,
  );
  if (!present.rows[0]?.present) return [];
  const res = await q.query<{ version: number }>('SELECT version FROM recon.schema_migrations ORDER BY version');
  return res.rows.map((r) => r.version);
}

function status(known: Migration[], applied: number[]): SchemaStatus {
  const done = new Set(applied);
  return {
    version: applied.length ? Math.max(...applied) : 0,
    latest: known.length ? known[known.length - 1].version : 0,
    pending: known.filter((m) => !done.has(m.version)).map((m) => m.version),
  };
}
