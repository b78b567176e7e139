/**
 * The embedded backend: PGlite (PostgreSQL compiled to WebAssembly, in-process), imported
 * lazily. `pglite:PATH` keeps its data in a folder created on first use (mode 0700: it holds
 * business data); `memory:` keeps it in memory for demos and tests.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { PGlite, Results, Transaction } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult } from './db.js';
import { acquireLock, type StoreLock } from './lock.js';

const NUMERIC_OID = 1700;

/** Opens `dataDir` (a folder path), or an in-memory store when `dataDir` is undefined. */
export async function openPglite(displayUrl: string, dataDir?: string): Promise<Db> {
  let lock: StoreLock | undefined;
  let absDir: string | undefined;
  if (dataDir !== undefined) {
    absDir = path.resolve(dataDir);
    fs.mkdirSync(path.dirname(absDir), { recursive: true, mode: 0o700 });
    lock = acquireLock(`${absDir}.lock`, displayUrl);
  }
  let pg: PGlite;
  try {
    if (absDir) fs.mkdirSync(absDir, { recursive: true, mode: 0o700 });
    const { PGlite } = await import('@electric-sql/pglite');
    // PGlite already returns int8 as a number; numeric (amount sums) comes back as text otherwise.
    pg = await PGlite.create(absDir, { parsers: { [NUMERIC_OID]: (v: string) => Number(v) } });
  } catch (err) {
    lock?.release();
    throw err;
  }

  let closed = false;
  return {
    kind: 'pglite',
    displayUrl,
    query: (sql, params) => run(pg, sql, params),
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) =>
      pg.transaction((tx) => fn({ query: (sql, params) => run(tx, sql, params) })),
    async close() {
      if (closed) return;
      closed = true;
      try {
        await pg.close();
      } finally {
        lock?.release();
      }
    },
  };
}

async function run<T>(target: PGlite | Transaction, sql: string, params?: unknown[]): Promise<QueryResult<T>> {
  // Like pg: no parameters → simple protocol, which accepts several statements (migrations).
  if (!params || params.length === 0) {
    const results = await target.exec(sql);
    return normalise<T>(results[results.length - 1]);
  }
  return normalise<T>(await target.query<T>(sql, params));
}

function normalise<T>(res: Results<T> | Results<unknown> | undefined): QueryResult<T> {
  const rows = (res?.rows ?? []) as T[];
  return { rows, rowCount: res?.rowCount ?? (res?.fields.length ? rows.length : (res?.affectedRows ?? 0)) };
}
