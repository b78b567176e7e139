/**
 * A `memory:` store on a worker thread of its own, for `recon demo`: PostgreSQL's start (~0.4 s of
 * CPU: its file bundle, the template, shared memory, the catalogs) runs on the other core while the
 * main thread loads the demo's modules (~0.4 s: the MCP SDK, zod, Stripe's SDK), instead of after
 * them; then each statement runs there while the main thread goes on with the other scenes' work.
 * The same store as openStore('memory:') opens (the worker calls it), behind the same Db: each
 * query and each transaction's statements are posted to the worker in the order they are made, and
 * PGlite serialises them there as it does in process. Errors come back with their own fields
 * (`code`, the SQLSTATE), as `pgCode` reads them.
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Db, Queryable, QueryResult } from './db.js';
import { setBaselineWasm } from './wasm-tier.js';

/** What the main thread asks; `tx` names a transaction begun by a `begin`. */
export type Ask =
  | { id: number; op: 'open' }
  | { id: number; op: 'query'; sql: string; params?: unknown[]; tx?: number }
  | { id: number; op: 'begin' }
  | { id: number; op: 'end'; tx: number; commit: boolean }
  | { id: number; op: 'close' };

/** An Ask before it is numbered. */
type Unnumbered<T> = T extends unknown ? Omit<T, 'id'> : never;

export type Answer = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: ErrorFields };

export type ErrorFields = { name: string; message: string; stack?: string } & Record<string, unknown>;

/** An error as fields that survive postMessage (a structured clone keeps only an Error's message and name). */
export function errorFields(err: unknown): ErrorFields {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) };
  const fields: ErrorFields = { name: err.name, message: err.message, stack: err.stack };
  for (const [k, v] of Object.entries(err)) if (typeof v !== 'function' && typeof v !== 'object') fields[k] = v;
  return fields;
}

function toError(fields: ErrorFields): Error {
  const { name, message, stack, ...rest } = fields;
  const err = Object.assign(new Error(message), rest);
  err.name = name;
  if (stack) err.stack = stack;
  return err;
}

/** The store bin/recon started for `recon demo` before the CLI's modules loaded, until the demo takes it. */
let early: { store: Promise<Db>; worker: Worker } | undefined;
let taken = false;

/**
 * Starts the demo's store now, from bin/recon, before commander and the commands load (~0.15 s of
 * the main thread that PostgreSQL's start would otherwise wait for): openMemoryStoreOnThread then
 * returns it. The thread does not keep the process alive until it is taken, so a `recon demo` that
 * ends before it plays (a usage error) exits as it would have; a failure to open is the demo's to
 * report when it takes the store.
 */
export function startMemoryStoreThread(): void {
  if (taken || early) return;
  early = spawn();
  if (!early) return;
  early.worker.unref();
  early.store.catch(() => undefined);
}

/**
 * Starts a new `memory:` store on a worker thread now (or takes the one startMemoryStoreThread
 * started); the Db once it is open. Undefined where the worker's compiled module is not beside this
 * one (recon run from its TypeScript sources, in tests): the caller opens the store in process then.
 */
export function openMemoryStoreOnThread(): Promise<Db> | undefined {
  if (early && !taken) {
    taken = true;
    early.worker.ref();
    return early.store;
  }
  taken = true;
  return spawn()?.store;
}

function spawn(): { store: Promise<Db>; worker: Worker } | undefined {
  const script = new URL('./thread-worker.js', import.meta.url);
  if (script.protocol !== 'file:' || !fs.existsSync(fileURLToPath(script))) return undefined;
  // The demo is a one-shot command: its store on the baseline tier, set before the worker compiles
  // PostgreSQL's WebAssembly (started from bin/recon, it runs before the command's own setting).
  setBaselineWasm();
  const worker = new Worker(script);
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let next = 0;
  let gone: Error | undefined;
  const failAll = (err: Error) => {
    gone ??= err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  worker.on('message', (a: Answer) => {
    const p = pending.get(a.id);
    pending.delete(a.id);
    if (a.ok) p?.resolve(a.value);
    else p?.reject(toError(a.error));
  });
  worker.on('error', failAll);
  worker.on('exit', (code) => failAll(new Error(`the store's thread ended (exit code ${code})`)));
  const ask = <T>(a: Unnumbered<Ask>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (gone) return reject(gone);
      const id = ++next;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      worker.postMessage({ ...a, id });
    });
  const query = <T>(sql: string, params?: unknown[], tx?: number) =>
    ask<QueryResult<T>>({ op: 'query', sql, params, ...(tx === undefined ? {} : { tx }) });
  let closed = false;
  const db: Db = {
    kind: 'pglite',
    displayUrl: 'memory:',
    query: (sql, params) => query(sql, params),
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const tx = await ask<number>({ op: 'begin' });
      let result: T;
      try {
        result = await fn({ query: (sql, params) => query(sql, params, tx) });
      } catch (err) {
        await ask({ op: 'end', tx, commit: false });
        throw err;
      }
      await ask({ op: 'end', tx, commit: true });
      return result;
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await ask({ op: 'close' });
      } finally {
        await worker.terminate();
      }
    },
  };
  const store = ask({ op: 'open' }).then(
    () => db,
    async (err: unknown) => {
      await worker.terminate();
      throw err;
    },
  );
  return { store, worker };
}
