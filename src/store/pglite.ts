/**
 * The embedded backend: PGlite (PostgreSQL compiled to WebAssembly, in-process), imported
 * lazily. `pglite:PATH` keeps its data in a folder created on first use (mode 0700: it holds
 * business data); `memory:` keeps it in memory for demos and tests.
 */
import fs from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import type { PGlite, Results, Transaction } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult } from './db.js';
import { ReconError, StoreLockedError, UsageError } from '../errors.js';
import { acquireLock, type StoreLock } from './lock.js';

const NUMERIC_OID = 1700;

export interface OpenPgliteOptions {
  /**
   * A data folder tarball (the migrated store template, src/store/template.ts) to start a new store
   * from: used when the store is in memory or its folder is missing or empty, never for an existing
   * store. Called only then.
   */
  template?: () => Blob | undefined;
}

/** Opens `dataDir` (a folder path), or an in-memory store when `dataDir` is undefined. */
export async function openPglite(displayUrl: string, dataDir?: string, opts: OpenPgliteOptions = {}): Promise<Db> {
  let lock: StoreLock | undefined;
  let absDir: string | undefined;
  if (dataDir !== undefined) {
    absDir = prepareDataDir(dataDir, displayUrl);
    lock = acquireLock(`${absDir}.lock`, displayUrl);
  }
  let pg: PGlite;
  let seeded: number[] | undefined;
  try {
    if (absDir) mkdir(absDir, displayUrl);
    const files = runtimeFiles();
    // Looked at under the lock: another process may have created the store meanwhile.
    const template = absDir === undefined || isEmptyFolder(absDir) ? opts.template?.() : undefined;
    const { PGlite } = await import('@electric-sql/pglite');
    // PGlite already returns int8 as a number; numeric (amount sums) comes back as text otherwise.
    pg = await PGlite.create(absDir, {
      parsers: { [NUMERIC_OID]: (v: string) => Number(v) },
      ...(template ? { loadDataDir: template } : {}),
      ...(await files),
    });
    if (template) {
      // The template's migrations were applied when it was built; this store is made now.
      const res = await pg.query<{ version: number }>(
        'UPDATE recon.schema_migrations SET applied_at = now() RETURNING version',
      );
      seeded = res.rows.map((r) => r.version).sort((a, b) => a - b);
    }
  } catch (err) {
    lock?.release();
    if (err instanceof ReconError) throw err;
    const e = pgliteError(err, displayUrl);
    throw new StoreLockedError(
      `cannot open the embedded store ${displayUrl}: ${e.message}; is ${absDir} a recon store written by a ` +
        `compatible version? Point --db at another folder, or restore it from a backup`,
      { cause: err },
    );
  }
  const db = wrap(pg, displayUrl, lock);
  if (seeded) createdFromTemplate.set(db, seeded);
  return db;
}

const createdFromTemplate = new WeakMap<Db, number[]>();

/**
 * The migration versions a store opened by this process got from the migrated store template (it
 * was created from it): applied as a copy rather than one by one. Empty for any other store.
 */
export function templateVersions(db: Db): number[] {
  return createdFromTemplate.get(db) ?? [];
}

/**
 * A new in-memory store migrated by the migrations (not from a template), dumped as a gzipped data
 * folder tarball: the migrated store template's contents.
 */
export async function dumpMigratedStore(): Promise<Uint8Array> {
  const { migrate } = await import('./migrate.js');
  const { PGlite } = await import('@electric-sql/pglite');
  const pg = await PGlite.create({ ...(await runtimeFiles()) });
  try {
    await migrate(wrap(pg, 'memory:'));
    const blob = await pg.dumpDataDir('gzip');
    return new Uint8Array(await blob.arrayBuffer());
  } finally {
    await pg.close();
  }
}

function wrap(pg: PGlite, displayUrl: string, lock?: StoreLock): Db {
  let closed = false;
  return {
    kind: 'pglite',
    displayUrl,
    query: (sql, params) => run(pg, sql, params),
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) =>
      pg
        .transaction((tx) => fn({ query: (sql, params) => run(tx, sql, params) }))
        .catch((err: unknown) => {
          throw pgliteError(err, displayUrl);
        }),
    async close() {
      if (closed) return;
      closed = true;
      try {
        await pg.close();
      } catch (err) {
        throw pgliteError(err, displayUrl);
      } finally {
        lock?.release();
      }
    },
  };
}

/**
 * Runs PGlite's compiled PostgreSQL on V8's baseline WebAssembly compiler (Liftoff) only, without
 * tiering hot functions up to the optimizing one (TurboFan). For a process that opens the store, does
 * a few queries and exits: tier-up compiles PostgreSQL's hot functions on background threads that
 * compete with the main thread for the cores while the store starts, and Node waits for those
 * compilations to finish before it exits (~0.2 s after the work is done, here). A one-shot command
 * on the embedded store ends ~30% sooner this way (`ops list` on an empty store, `stats` and
 * `ops list` on 100k operations, the demo); optimized code wins only in minutes of heavy querying,
 * so a server (`recon mcp`, `recon webhook serve`) keeps V8's default. Process-wide: call it before
 * the first store opens (a module compiled before keeps its tiering).
 */
export function useBaselineWasm(): void {
  v8.setFlagsFromString(BASELINE_WASM_FLAGS);
}

/** Both, at once: without dynamic tiering, --no-wasm-tier-up alone tiers every function up eagerly. */
export const BASELINE_WASM_FLAGS = '--no-wasm-dynamic-tiering --no-wasm-tier-up';

/**
 * PGlite's compiled PostgreSQL (pglite.wasm, 9 MB) and its file bundle (pglite.data, 6 MB), read and
 * compiled while its JavaScript is imported, and once per process: PGlite.create reads and compiles
 * them itself, one after the other, on every call. Should the package lay its files out otherwise,
 * PGlite finds them itself, as before.
 */
let runtime: Promise<{ pgliteWasmModule?: WebAssembly.Module; fsBundle?: Blob }> | undefined;
function runtimeFiles() {
  runtime ??= (async () => {
    try {
      const dist = new URL('.', import.meta.resolve('@electric-sql/pglite'));
      const [wasm, data] = await Promise.all([
        fs.promises.readFile(new URL('pglite.wasm', dist)).then((bytes) => WebAssembly.compile(bytes)),
        fs.promises.readFile(new URL('pglite.data', dist)),
      ]);
      // PGlite only calls the bundle's arrayBuffer(): hand it the bytes as read, where a Blob would
      // copy the 6 MB twice (into the Blob, out of it).
      const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
      const bytes = whole ? data.buffer : data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
      const fsBundle = { arrayBuffer: () => Promise.resolve(bytes) } as unknown as Blob;
      return { pgliteWasmModule: wasm, fsBundle };
    } catch {
      return {};
    }
  })();
  return runtime;
}

async function run<T>(target: PGlite | Transaction, sql: string, params?: unknown[]): Promise<QueryResult<T>> {
  try {
    // Like pg: no parameters → simple protocol, which accepts several statements (migrations).
    if (!params || params.length === 0) {
      const results = await target.exec(sql);
      return normalise<T>(results[results.length - 1]);
    }
    return normalise<T>(await target.query<T>(sql, params));
  } catch (err) {
    if (err instanceof Error) throw err;
    throw pgliteError(err, 'the embedded store');
  }
}

/**
 * PGlite (emscripten underneath) may throw things that are not Errors, such as an `ExitStatus`
 * `{name, message, status}`; printed with String() they read "[object Object]". Always an Error
 * with a message a person can use.
 */
export function pgliteError(err: unknown, where: string): Error {
  if (err instanceof Error) return err;
  let message: string;
  if (typeof err === 'string') message = err;
  else if (err && typeof err === 'object') {
    const o = err as { name?: unknown; message?: unknown };
    if (typeof o.message === 'string' && o.message) {
      message = typeof o.name === 'string' && o.name ? `${o.name}: ${o.message}` : o.message;
    } else {
      try {
        message = JSON.stringify(err);
      } catch {
        message = Object.prototype.toString.call(err);
      }
    }
  } else message = String(err);
  return new ReconError(`${where}: ${message}`, { cause: err });
}

/**
 * The data folder's real path (so a symlink to a store takes the same lock as the store itself),
 * after checking that it can be a store: a folder (or nothing yet) that is empty or holds a PostgreSQL
 * data directory. Someone else's non-empty folder is refused rather than filled with PostgreSQL files.
 */
function prepareDataDir(dataDir: string, displayUrl: string): string {
  const abs = path.resolve(dataDir);
  let stat: fs.Stats | undefined;
  try {
    stat = fs.statSync(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') throw notAFolder(abs, displayUrl);
    if (code !== 'ENOENT') throw err;
  }
  if (stat && !stat.isDirectory()) throw notAFolder(abs, displayUrl);
  if (stat) {
    const real = fs.realpathSync(abs);
    const entries = fs.readdirSync(real);
    if (entries.length > 0 && !entries.includes('PG_VERSION')) {
      throw new UsageError(
        `${displayUrl}: ${abs} is not empty and is not a recon store (no PG_VERSION in it); ` +
          `give a new or empty folder for the store, e.g. pglite:${path.join(dataDir, '.recon', 'db')}`,
      );
    }
    return real;
  }
  // Not there yet: create its parent (mode 0700 for what we create) and resolve that.
  const parent = path.dirname(abs);
  mkdir(parent, displayUrl);
  return path.join(fs.realpathSync(parent), path.basename(abs));
}

function isEmptyFolder(dir: string): boolean {
  return fs.readdirSync(dir).length === 0;
}

function mkdir(dir: string, displayUrl: string): void {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') throw notAFolder(dir, displayUrl);
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS' || code === 'ENOSPC') {
      throw new StoreLockedError(
        `cannot write the store folder ${dir} for ${displayUrl}: ${code === 'EROFS' ? 'the file system is read-only' : code === 'ENOSPC' ? 'no space left on the device' : 'permission denied'} (${code}); ` +
          `use a folder you can write, or fix its permissions`,
        { cause: err },
      );
    }
    throw err;
  }
}

function notAFolder(where: string, displayUrl: string): UsageError {
  // Name the part of the path that is a file.
  let file = where;
  for (let p = where; p !== path.dirname(p); p = path.dirname(p)) {
    try {
      if (!fs.statSync(p).isDirectory()) file = p;
      break;
    } catch {
      continue;
    }
  }
  return new UsageError(
    `${displayUrl}: ${file} is a file, not a folder; the embedded store is a folder: give a folder path, e.g. pglite:.recon/db`,
  );
}

function normalise<T>(res: Results<T> | Results<unknown> | undefined): QueryResult<T> {
  const rows = (res?.rows ?? []) as T[];
  return { rows, rowCount: res?.rowCount ?? (res?.fields.length ? rows.length : (res?.affectedRows ?? 0)) };
}
