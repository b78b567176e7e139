/**
 * The embedded backend: PGlite (PostgreSQL compiled to WebAssembly, in-process), imported
 * lazily. `pglite:PATH` keeps its data in a folder created on first use (mode 0700: it holds
 * business data); `memory:` keeps it in memory for demos and tests.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { PGlite, Results, Transaction } from '@electric-sql/pglite';
import { planKept, statementName, type Db, type Queryable, type QueryResult } from './db.js';
import { ReconError, StoreLockedError, UsageError } from '../errors.js';
import { acquireLock, type StoreLock } from './lock.js';
import { DISK_FULL, pgCode, refusesNamedStatement } from './pgcodes.js';
import { userName } from '../config/trust.js';
import { readTar, type TarEntry } from '../lib/tar.js';
import { setBaselineWasm } from './wasm-tier.js';

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
  let fresh: 'new' | 'empty' | false = false;
  if (dataDir !== undefined) {
    ({ dir: absDir, fresh } = prepareDataDir(dataDir, displayUrl));
    lock = acquireLock(`${absDir}.lock`, displayUrl);
  }
  let pg: PGlite;
  let seeded: number[] | undefined;
  /** The template's files being written into a new folder, while PGlite starts its runtime. */
  let unpacked: Promise<void> | undefined;
  try {
    if (absDir) mkdir(absDir, displayUrl);
    const files = runtimeFiles();
    // Looked at under the lock: another process may have created the store meanwhile.
    const template = absDir === undefined || isEmptyFolder(absDir) ? opts.template?.() : undefined;
    // Loaded while a new folder is written (unpackInto waits on the disk, not the CPU).
    const pglite = import('@electric-sql/pglite');
    const nodefs = template && absDir ? import('@electric-sql/pglite/nodefs') : undefined;
    // Awaited below; marked handled now, so that a failing write is the error reported, not an unhandled rejection.
    pglite.catch(() => undefined);
    nodefs?.catch(() => undefined);
    // A new folder gets the template's files before PostgreSQL starts on it: an existing store, to PGlite.
    if (template && absDir) {
      unpacked = template.arrayBuffer().then((bytes) => unpackInto(absDir, readTar(new Uint8Array(bytes))));
      unpacked.catch(() => undefined);
    }
    const { PGlite, MemoryFS } = await pglite;
    // PGlite already returns int8 as a number; numeric (amount sums) comes back as text otherwise.
    const smallPool = absDir === undefined || shortLived;
    pg = await PGlite.create(absDir, {
      parsers: { [NUMERIC_OID]: (v: string) => Number(v) },
      ...(template && !absDir ? { fs: templateMemoryFs(MemoryFS, PGlite.paths.PGDATA, template) } : {}),
      ...(unpacked && nodefs ? { fs: filledNodeFs((await nodefs).NodeFS, absDir!, unpacked) } : {}),
      ...(smallPool ? { startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${SMALL_POOL}`] } : {}),
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
    // A store that could not be created is not left half-written, to be taken for a damaged one later
    // (once the template's writes in flight have ended).
    await unpacked?.catch(() => undefined);
    if (fresh && absDir) removeContents(absDir, fresh === 'new');
    lock?.release();
    if (err instanceof ReconError) throw err;
    const problem = fsProblem(err);
    if (problem) throw fsError(problem, err, displayUrl, absDir, fresh ? 'nothing was kept' : null);
    // PostgreSQL writes at every start (a WAL segment): on a full disk PGlite only says "failed to
    // initialize properly", which must not read as a damaged store.
    if (absDir && !fresh && diskNearlyFull(absDir))
      throw fsError(
        'space',
        new Error('No space left on device (ENOSPC) for PostgreSQL to start'),
        displayUrl,
        absDir,
        // True for any command, a read-only one (ops list) as well: the store never opened.
        'recon could not open it, so nothing was changed',
      );
    const e = pgliteError(err, displayUrl);
    throw new StoreLockedError(
      `cannot open the embedded store ${displayUrl}: ${e.message}; is ${absDir} a recon store written by a ` +
        `compatible version? Point --db at another folder, or restore it from a backup`,
      { cause: err },
    );
  }
  const db = wrap(pg, displayUrl, lock, absDir);
  if (seeded) createdFromTemplate.set(db, seeded);
  return db;
}

const createdFromTemplate = new WeakMap<Db, number[]>();

/**
 * Writes the template's folders and files into the new, empty store folder `dir` with Node's own calls,
 * as initdb would have made them (folders 0700, files 0600). PGlite's `loadDataDir` writes each of a
 * folder store's files through its emulated file system (path lookups, open, write, utime, each from
 * JavaScript into WebAssembly and back): with the ~1,000 files the template had then (its template
 * databases included), ~0.5 s of `recon init`'s ~1.7 s of CPU (node --cpu-prof). Here the folders
 * first, then the files UNPACK_WRITERS at a time, taken from each folder in turn: on this machine's
 * ext4 creating a file takes ~0.7 ms however small it is, and creating 1,028 files one after the
 * other 690–850 ms, this way 450–520 ms (creates in one folder wait for each other; in different
 * folders they do not). The template now has ~430 (dropTemplateDatabases). A failure (a full disk, a
 * folder turned read-only) is Node's error, reported as any other, once the writes in flight have
 * ended; the half-written folder is emptied by the caller.
 */
async function unpackInto(dir: string, entries: TarEntry[]): Promise<void> {
  const made = new Set<string>([dir]);
  const folder = (p: string) => {
    if (made.has(p)) return;
    fs.mkdirSync(p, { recursive: true, mode: 0o700 });
    made.add(p);
  };
  const named = (err: unknown) => {
    // Named by its code (ENOSPC, EACCES), as when PGlite wrote the files: the message says where.
    const code = (err as NodeJS.ErrnoException).code;
    return code ? Object.assign(new Error(code, { cause: err }), { code }) : err;
  };
  const byFolder = new Map<string, { file: string; data: Uint8Array }[]>();
  try {
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.type === 'dir') folder(p);
      else {
        const parent = path.dirname(p);
        folder(parent);
        let files = byFolder.get(parent);
        if (!files) byFolder.set(parent, (files = []));
        files.push({ file: p, data: e.data });
      }
    }
  } catch (err) {
    throw named(err);
  }
  // One file of each folder in turn.
  const order: { file: string; data: Uint8Array }[] = [];
  const folders = [...byFolder.values()];
  const rounds = Math.max(0, ...folders.map((files) => files.length));
  for (let i = 0; i < rounds; i++) for (const files of folders) if (i < files.length) order.push(files[i]);
  let next = 0;
  let failed: { err: unknown } | undefined;
  await Promise.all(
    Array.from({ length: Math.min(UNPACK_WRITERS, order.length) }, async () => {
      while (failed === undefined && next < order.length) {
        const { file, data } = order[next++];
        try {
          await fs.promises.writeFile(file, data, { mode: 0o600, flag: 'wx' });
        } catch (err) {
          failed ??= { err };
        }
      }
    }),
  );
  if (failed) throw named(failed.err);
}

/** Files written at once by unpackInto (Node's thread pool has 4 threads; more in flight keep them busy). */
const UNPACK_WRITERS = 16;

/**
 * PGlite's file system for a folder (its NodeFS, as PGlite.create(folder) makes it) that the
 * template's files are still being written into: PGlite compiles and instantiates PostgreSQL's
 * WebAssembly (~0.2 s of CPU) while unpackInto waits on the disk (creating ~430 files),
 * and asks the file system for what it holds (initialSyncFs) before it looks at the folder, which
 * waits here for the last file. A failed write fails PGlite.create with the write's error.
 */
function filledNodeFs(
  NodeFS: typeof import('@electric-sql/pglite/nodefs').NodeFS,
  dir: string,
  written: Promise<void>,
): InstanceType<typeof NodeFS> {
  return new (class extends NodeFS {
    override async initialSyncFs(): Promise<void> {
      await written;
      await super.initialSyncFs();
    }
  })(dir);
}

/**
 * PGlite's in-memory file system with a `memory:` store's data folder already in it: the template's
 * files, put there when PGlite asks its file system for what it holds (before it looks for a store),
 * each one a view into the inflated tarball rather than a copy (emscripten's MEMFS `canOwn`). PGlite's
 * `loadDataDir` parses the tarball into copies of each file, then copies each into a new file, ~0.2 s
 * of `recon demo` (node --cpu-prof).
 */
function templateMemoryFs(
  MemoryFS: typeof import('@electric-sql/pglite').MemoryFS,
  pgdata: string,
  template: Blob,
): InstanceType<typeof MemoryFS> {
  return new (class extends MemoryFS {
    override async initialSyncFs(): Promise<void> {
      // Emscripten's FS, which PGlite's types leave unresolved.
      const FS = this.pg!.Module.FS as unknown as {
        mkdirTree(path: string): void;
        writeFile(path: string, data: Uint8Array, opts: { canOwn: boolean }): void;
      };
      const made = new Set<string>();
      const folder = (p: string) => {
        if (made.has(p)) return;
        FS.mkdirTree(p);
        made.add(p);
      };
      folder(pgdata);
      for (const e of readTar(new Uint8Array(await template.arrayBuffer()))) {
        const p = `${pgdata}/${e.name}`;
        if (e.type === 'dir') folder(p);
        else {
          folder(p.slice(0, p.lastIndexOf('/')));
          FS.writeFile(p, e.data, { canOwn: true });
        }
      }
    }
  })();
}

/**
 * The migration versions a store opened by this process got from the migrated store template (it
 * was created from it): applied as a copy rather than one by one. Empty for any other store.
 */
export function templateVersions(db: Db): number[] {
  return createdFromTemplate.get(db) ?? [];
}

/**
 * A new in-memory store migrated by the migrations (not from a template), dumped as a gzipped data
 * folder tarball: the migrated store template's contents. Its WAL is written in 1 MB segment files
 * (initdb --wal-segsize=1) rather than 16 MB ones: a store holds at least its current segment, all of
 * it, and every new store is a copy of this folder (its bytes inflated, untarred and written), so the
 * 16 MB segment, nearly all zeros, was 40% of what each copy moved (41 → 30 MB). The segment size is
 * the store's own from then on (pg_control), like any initdb option; PostgreSQL handles either.
 * Without the template databases (dropTemplateDatabases).
 */
export async function dumpMigratedStore(): Promise<Uint8Array> {
  const { migrate } = await import('./migrate.js');
  const { PGlite } = await import('@electric-sql/pglite');
  const pg = await PGlite.create({ ...(await runtimeFiles()), initDbStartParams: ['--wal-segsize=1'] });
  try {
    await migrate(wrap(pg, 'memory:'));
    await dropTemplateDatabases(pg);
    await dropRecycledWal(pg, PGlite.paths.PGDATA);
    return new Uint8Array(await (await pg.dumpDataDir('gzip')).arrayBuffer());
  } finally {
    await pg.close();
  }
}

/**
 * A recon store is only ever the `postgres` database PGlite opens: template0 and template1, which
 * initdb makes for CREATE DATABASE to copy (recon never creates a database), were 600 of the 1,028
 * files a new `pglite:` folder was written with and 15 of the 24 MB each new store inflates and
 * untars. Creating a file takes ~0.7 ms on this machine's ext4 however small it is: with them,
 * `recon init` took a median 1.57 s in 12 runs on a loaded machine, without them 1.21 s (interleaved
 * with the same build); for `memory:` stores (the demo, tests) they were half of the store's start
 * (node --cpu-prof of `recon demo`). Dropped as PostgreSQL drops a database, catalog and files. A
 * store made before keeps its own.
 */
async function dropTemplateDatabases(pg: PGlite): Promise<void> {
  for (const name of ['template0', 'template1']) {
    await pg.exec(`ALTER DATABASE ${name} IS_TEMPLATE false`);
    await pg.exec(`DROP DATABASE ${name}`);
  }
}

/**
 * Leaves in pg_wal only the segments that hold WAL: PostgreSQL renames the segments a checkpoint no
 * longer needs to future names, kept for reuse (up to min_wal_size, 80 MB), full of old records. In
 * the template they were 6 of its 7 MB of WAL, a fifth of what every new store inflates and untars,
 * for nothing: PostgreSQL creates a segment when it needs one. After a checkpoint the WAL to keep runs
 * from its redo point to the insert position; a store made from the template replays no more.
 */
async function dropRecycledWal(pg: PGlite, dataDir: string): Promise<void> {
  await pg.exec('CHECKPOINT');
  const { rows } = await pg.query<{ first: string; last: string }>(
    `SELECT (pg_control_checkpoint()).redo_wal_file AS first,
            pg_walfile_name(pg_current_wal_insert_lsn() + 1) AS last`,
  );
  const { first, last } = rows[0];
  const dir = `${dataDir}/pg_wal`;
  // Emscripten's FS, which PGlite's types leave unresolved.
  const fs = pg.Module.FS as unknown as { readdir(path: string): string[]; unlink(path: string): void };
  for (const name of fs.readdir(dir)) {
    if (/^[0-9A-F]{24}$/.test(name) && (name < first || name > last)) fs.unlink(`${dir}/${name}`);
  }
}

function wrap(pg: PGlite, displayUrl: string, lock?: StoreLock, absDir?: string): Db {
  let closed = false;
  // A full disk or a folder turned read-only under a running store: exit 6 with what to fix.
  // PostgreSQL rolled the statement's transaction back, so the change was not made.
  const storeError = (err: unknown): unknown => {
    const problem = err instanceof ReconError ? null : fsProblem(err);
    return problem ? fsError(problem, err, displayUrl, absDir, 'the change was not made') : err;
  };
  const named = namedStatements(pg);
  return {
    kind: 'pglite',
    displayUrl,
    query: <T>(sql: string, params?: unknown[]) =>
      named.query<T>(sql, params, null).catch((err: unknown) => {
        throw storeError(err);
      }),
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) =>
      pg
        .transaction((tx) => fn({ query: (sql, params) => named.query(sql, params, tx) }))
        .catch((err: unknown) => {
          throw storeError(pgliteError(err, displayUrl));
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
 * A one-shot command's store (src/store/wasm-tier.ts: PostgreSQL's WebAssembly on the baseline tier
 * only), with the small buffer pool below.
 */
export function useBaselineWasm(): void {
  setBaselineWasm();
  shortLived = true;
}

/**
 * PostgreSQL's buffer pool for a store that lives in this process briefly or that this process opens
 * briefly: a `memory:` store (the demo, tests: its data is in memory already), and any `pglite:` folder
 * opened by a one-shot command (`ops list`, `ops record`, `stats`, `recon init`…; not `recon mcp` nor
 * `webhook serve`, whose cache lives as long as they run). PostgreSQL's shared memory is zeroed at every
 * start by PGlite's libc (memset, on the baseline WebAssembly tier): with initdb's 128MB (145 MB of
 * shared memory), ~0.4 s of CPU and 120 MB of memory in every command on the store (`ops list` on
 * an empty store: 1.28 → 0.86 s of CPU, /usr/bin/time; node --cpu-prof: memset under mmap under main);
 * with 16MB (24 MB), a sixth of that. A one-shot command starts with an empty pool, reads a few pages
 * of an index and a table, and is gone: it never fills 16 MB with pages it reads twice (a scan of a
 * table past a quarter of the pool reads through a small ring of buffers, whatever the pool's size).
 * Given on the command line (`-c`), for this start only: the folder's postgresql.conf keeps initdb's
 * setting, for the servers and for PostgreSQL tools pointed at a copy of it.
 */
const SMALL_POOL = '16MB';
/** Set by useBaselineWasm: this process runs one command and exits. */
let shortLived = false;

/**
 * PGlite's compiled PostgreSQL (pglite.wasm, 9 MB) and its file bundle (pglite.data, 6 MB), read and
 * compiled while its JavaScript is imported, and once per process: PGlite.create reads and compiles
 * them itself, one after the other, on every call. Should the package lay its files out otherwise,
 * PGlite finds them itself, as before.
 */
let runtime: Promise<{ pgliteWasmModule?: WebAssembly.Module; fsBundle?: Blob }> | undefined;

/** Starts reading and compiling PGlite's files now (other threads do the work), for a store opened soon. */
export function prefetchRuntime(): void {
  void runtimeFiles();
}

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

/** Named statements kept by a store's session: beyond these, keepPlan's statements are sent unnamed. */
const MAX_NAMED = 256;

/**
 * keepPlan's statements (src/store/db.ts) as named statements of the store's one PostgreSQL session,
 * as the PostgreSQL pool sends them (postgres.ts, namedStatements): parsed once, and after five
 * executions planned once. PGlite's own `query` sends every statement unnamed, so PostgreSQL parsed,
 * analysed and planned the move statement (transition.ts) at each of its executions: ~5 ms of its
 * ~10 ms in `recon mcp` on an embedded store, and execute_action sends it twice. The messages are
 * PGlite's own (its protocol module), sent as its `query` sends them (Parse and Describe once, then
 * Bind, Describe, Execute and Sync), under the same locks: a statement outside a transaction waits
 * for any transaction to end, as `query` does; one inside takes the query lock only, as `tx.query`.
 * The rows are parsed by PGlite's parser with the store's type parsers. Should the session refuse a
 * name (missing, already there, or its table changed shape since it was prepared), statements are
 * sent unnamed from then on; outside a transaction, the refused one is sent again unnamed.
 */
function namedStatements(pg: PGlite) {
  const names = new Map<string, { name: string; types: number[] }>();
  let off = false;
  const send = async <T>(sql: string, params: unknown[]): Promise<Results<T>> => {
    const { protocol, parse } = await pgliteModule();
    const { serialize } = protocol;
    const exec = (message: Uint8Array) => pg.execProtocolStream(message, { syncToFs: false });
    const messages: Awaited<ReturnType<typeof exec>> = [];
    try {
      let statement = names.get(sql);
      if (!statement) {
        const name = statementName(sql);
        await exec(serialize.parse({ name, text: sql }));
        const types = parse.parseDescribeStatementResults(await exec(serialize.describe({ type: 'S', name })));
        statement = { name, types };
        names.set(sql, statement);
      }
      const { types } = statement;
      // As PGlite's query serialises a value: by the parameter's type, else as text.
      const values = params.map((v, i) => {
        if (v === null || v === undefined) return null;
        const serializer = pg.serializers[types[i]];
        return serializer ? serializer(v) : (v as { toString(): string }).toString();
      });
      messages.push(...(await exec(serialize.bind({ statement: statement.name, values }))));
      messages.push(...(await exec(serialize.describe({ type: 'P' }))));
      messages.push(...(await exec(serialize.execute({}))));
    } catch (err) {
      // As PGlite's query reports it: the statement and its parameters on the error.
      if (err instanceof Error) Object.assign(err, { query: sql, params });
      throw err;
    } finally {
      messages.push(...(await exec(serialize.sync())));
    }
    return parse.parseResults(messages, pg.parsers)[0] as Results<T>;
  };
  /** Whether `sql` goes named: a keepPlan statement with parameters, while no name has been refused. */
  const goesNamed = (sql: string, params: unknown[] | undefined): params is unknown[] =>
    !off && params !== undefined && params.length > 0 && planKept(sql) && (names.has(sql) || names.size < MAX_NAMED);
  return {
    /** Runs `sql`, named when it goes named: in `tx` when given, else on its own (after any transaction in progress). */
    async query<T>(sql: string, params: unknown[] | undefined, tx: Transaction | null): Promise<QueryResult<T>> {
      if (!goesNamed(sql, params)) return run<T>(tx ?? pg, sql, params);
      try {
        if (tx) return normalise<T>(await pg.runExclusive(() => send<T>(sql, params)));
        const res = await pg._runExclusiveTransaction(() =>
          pg.runExclusive(async () => {
            const r = await send<T>(sql, params);
            await pg.syncToFs();
            return r;
          }),
        );
        return normalise<T>(res);
      } catch (err) {
        if (!refusesNamedStatement(err)) throw err;
        off = true;
        if (tx) throw err;
        return run<T>(pg, sql, params);
      }
    },
  };
}

let pgliteModuleLoad: Promise<typeof import('@electric-sql/pglite')> | undefined;
/** PGlite's module (loaded already by the store that asks). */
function pgliteModule(): Promise<typeof import('@electric-sql/pglite')> {
  return (pgliteModuleLoad ??= import('@electric-sql/pglite'));
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
 * data directory that this user may read and write. Someone else's non-empty folder is refused
 * rather than filled with PostgreSQL files. `fresh`: the store does not exist yet (`new`: nor its
 * folder; `empty`: an empty folder), so a failed creation may remove what it wrote.
 */
function prepareDataDir(dataDir: string, displayUrl: string): { dir: string; fresh: 'new' | 'empty' | false } {
  const abs = path.resolve(dataDir);
  let stat: fs.Stats | undefined;
  try {
    stat = fs.statSync(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') throw notAFolder(abs, displayUrl);
    if (code === 'EACCES' || code === 'EPERM') throw fsError('permission', err, displayUrl, abs, null);
    if (code !== 'ENOENT') throw err;
  }
  if (stat && !stat.isDirectory()) throw notAFolder(abs, displayUrl);
  if (stat) {
    const real = fs.realpathSync(abs);
    let entries: string[];
    try {
      entries = fs.readdirSync(real);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM') throw fsError('permission', err, displayUrl, real, null);
      throw err;
    }
    if (entries.length > 0 && !entries.includes('PG_VERSION')) {
      throw new UsageError(
        `${displayUrl}: ${abs} is not empty and is not a recon store (no PG_VERSION in it); ` +
          `give a new or empty folder for the store, e.g. pglite:${path.join(dataDir, '.recon', 'db')}`,
      );
    }
    if (entries.length > 0) checkWritable(real, displayUrl);
    return { dir: real, fresh: entries.length === 0 ? 'empty' : false };
  }
  // Not there yet: create its parent (mode 0700 for what we create) and resolve that.
  const parent = path.dirname(abs);
  mkdir(parent, displayUrl);
  return { dir: path.join(fs.realpathSync(parent), path.basename(abs)), fresh: 'new' };
}

/**
 * PostgreSQL writes into its data folder on every start: a store this user may only read would fail
 * inside PGlite with "failed to initialize properly", read as a damaged store. Checked up front on
 * the folders it writes (root passes, except on a read-only file system: the lock file reports that).
 */
function checkWritable(dir: string, displayUrl: string): void {
  for (const p of [
    dir,
    ...['global', 'base', 'pg_wal', path.join('global', 'pg_control')].map((d) => path.join(dir, d)),
  ]) {
    try {
      fs.accessSync(p, fs.constants.R_OK | fs.constants.W_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
        throw fsError('permission', err, displayUrl, p, null);
      if (code !== 'ENOENT') throw err;
    }
  }
}

/** Less free space on the store's disk than PostgreSQL needs to start (a 16 MB WAL segment, at most). */
function diskNearlyFull(dir: string): boolean {
  try {
    const st = fs.statfsSync(dir);
    return st.bavail * st.bsize < 16 * 1024 * 1024;
  } catch {
    return false;
  }
}

/** Empties a store folder that could not be created: the folder itself goes if this run made it. */
function removeContents(dir: string, ours: boolean): void {
  try {
    for (const entry of fs.readdirSync(dir)) fs.rmSync(path.join(dir, entry), { recursive: true, force: true });
    if (ours) fs.rmdirSync(dir);
  } catch {
    // Nothing there, or not ours to remove: the error being reported says what happened.
  }
}

/** ENOSPC/EDQUOT (Node's, or errno 51/19 of PGlite's file system) or PostgreSQL's disk_full. */
const SPACE_ERRNOS = new Set(['ENOSPC', 'EDQUOT', 51, 19]);
/** EACCES/EPERM/EROFS, Node's or PGlite's (errno 2/63/69). */
const PERMISSION_ERRNOS = new Set(['EACCES', 'EPERM', 'EROFS', 2, 63, 69]);

/** Whether a failure is the file system's: out of space, or not allowed to write. */
function fsProblem(err: unknown): 'space' | 'permission' | null {
  const e = (err instanceof ReconError && err.cause !== undefined ? err.cause : err) as {
    code?: unknown;
    errno?: unknown;
    name?: unknown;
    message?: unknown;
  } | null;
  if (e === null || typeof e !== 'object') return null;
  const errno = e.name === 'ErrnoError' ? e.errno : undefined;
  const message = typeof e.message === 'string' ? e.message : '';
  if (SPACE_ERRNOS.has(e.code as string) || SPACE_ERRNOS.has(errno as number) || pgCode(e) === DISK_FULL)
    return 'space';
  if (/No space left on device|Disk quota exceeded/.test(message)) return 'space';
  if (PERMISSION_ERRNOS.has(e.code as string) || PERMISSION_ERRNOS.has(errno as number)) return 'permission';
  // The operating system's words (PostgreSQL quotes strerror), not PostgreSQL's own "permission denied for table".
  if (/: (Permission denied|Read-only file system|Operation not permitted)$/m.test(message)) return 'permission';
  return null;
}

/** Exit 6 naming what to fix: space on the disk, or the folder's permissions (and its owner). */
function fsError(
  problem: 'space' | 'permission',
  err: unknown,
  displayUrl: string,
  where: string | undefined,
  outcome: string | null,
): StoreLockedError {
  const detail = describeFsError(err);
  const done = outcome ? `; ${outcome}` : '';
  if (problem === 'space') {
    return new StoreLockedError(
      `the embedded store ${displayUrl} is out of disk space (${detail})${done}; free some space on the disk that holds ${where ?? 'it'}, then run the command again`,
      { cause: err },
    );
  }
  const owner = where ? ownerOf(where) : null;
  return new StoreLockedError(
    `cannot write the embedded store ${displayUrl}: ${where ?? 'its folder'} cannot be read and written by you (${detail})${done}; ` +
      `${owner ? `it belongs to ${owner}: run recon as that user, or fix its permissions (chown -R / chmod -R u+w)` : 'fix its permissions, or point --db at a folder you can write'}`,
    { cause: err },
  );
}

function describeFsError(err: unknown): string {
  const e = (err instanceof ReconError && err.cause !== undefined ? err.cause : err) as {
    code?: unknown;
    errno?: unknown;
    name?: unknown;
    message?: unknown;
  };
  if (e?.name === 'ErrnoError') {
    const names: Record<number, string> = { 51: 'ENOSPC', 19: 'EDQUOT', 2: 'EACCES', 63: 'EPERM', 69: 'EROFS' };
    return names[e.errno as number] ?? `errno ${String(e.errno)}`;
  }
  const message = typeof e?.message === 'string' ? e.message : String(err);
  return typeof e?.code === 'string' && !message.includes(e.code) ? `${message} (${e.code})` : message;
}

/** The owner of a path or of its nearest existing parent, for the message; null when none can be read. */
function ownerOf(where: string): string | null {
  for (let p = where; ; p = path.dirname(p)) {
    try {
      const uid = fs.statSync(p).uid;
      return uid === process.geteuid?.() ? null : userName(uid);
    } catch {
      if (path.dirname(p) === p) return null;
    }
  }
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
