/**
 * The PostgreSQL backend: a `pg` pool. `pg` is imported lazily so that commands which never
 * open a store (`--version`, `--help`) do not load it.
 */
import type { Pool, PoolClient, QueryResult as PgResult } from 'pg';
import { StoreLockedError } from '../errors.js';
import type { Db, Queryable, QueryResult } from './db.js';
import { REDACTED, redact, registerSecret } from '../config/redact.js';
import * as codes from './pgcodes.js';

const INT8_OID = 20;
const INT8_ARRAY_OID = 1016;
const NUMERIC_OID = 1700;
const NUMERIC_ARRAY_OID = 1231;

/** Errors that mean "we never got a usable session", as opposed to a failing statement. */
const UNREACHABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);
const UNREACHABLE_SQLSTATES = new Set([
  codes.INVALID_PASSWORD,
  codes.INVALID_AUTHORIZATION_SPECIFICATION,
  codes.INVALID_CATALOG_NAME,
  codes.CANNOT_CONNECT_NOW,
  codes.TOO_MANY_CONNECTIONS,
  codes.ADMIN_SHUTDOWN,
  codes.CRASH_SHUTDOWN,
]);
const UNREACHABLE_MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error and is not queryable/i,
];

export interface PostgresOptions {
  /** Pool size; default 10 (pg's default). */
  max?: number;
  /** How long to wait for a connection before reporting the store unreachable; default 10s. */
  connectionTimeoutMillis?: number;
}

/**
 * `pg`, imported without loading Node's fetch implementation. pg asks whether it runs in a
 * Cloudflare Worker when it is loaded: from `navigator.userAgent` where Node has it (21 and later),
 * else by building a `Response`, which loads all of undici on Node 20: ~40 ms of CPU at every start
 * that opens PostgreSQL (`node --cpu-prof` of `recon run`; four workers start four times). On Node
 * 20 a `navigator` as Node 21 has it stands in while pg loads, and is removed after.
 */
async function importPg(): Promise<typeof import('pg').default> {
  if ('navigator' in globalThis) return (await import('pg')).default;
  const major = process.versions.node.split('.')[0];
  Object.defineProperty(globalThis, 'navigator', {
    value: { userAgent: `Node.js/${major}` },
    configurable: true,
    writable: true,
  });
  try {
    return (await import('pg')).default;
  } finally {
    delete (globalThis as { navigator?: unknown }).navigator;
  }
}

export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<Db> {
  const pg = await importPg();
  const displayUrl = redact(url);
  const password = safePassword(url);
  // Whatever prints later (an error naming the URL, a driver message) is redacted of it too.
  registerSecret(password);

  // Amounts and counts are bigint/numeric in SQL; callers want numbers. Set on this pool only,
  // so an application embedding recon keeps its own global pg parsers.
  const toNumber = (v: string) => Number(v);
  const builtin = pg.types.getTypeParser as unknown as (oid: number, format?: string) => (v: string) => unknown;
  const getTypeParser = (oid: number, format?: string) => {
    if (format !== 'binary') {
      if (oid === INT8_OID || oid === NUMERIC_OID) return toNumber;
      if (oid === INT8_ARRAY_OID || oid === NUMERIC_ARRAY_OID) {
        const parseArray = builtin(oid, 'text') as (v: string) => (string | null)[];
        return (v: string) => parseArray(v).map((x) => (x === null ? null : Number(x)));
      }
    }
    return builtin(oid, format);
  };
  const types = { getTypeParser: getTypeParser as unknown as typeof pg.types.getTypeParser };

  const pool: Pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectionTimeoutMillis ?? 10_000,
    types,
  });
  // An idle client whose server went away emits 'error' on the pool; unhandled, it would
  // crash the process. The pool drops that client, and the next query reports the failure.
  pool.on('error', () => {});

  const wrap = (err: unknown): unknown => toStoreError(err, displayUrl, password);
  let closed = false;

  const db: Db = {
    kind: 'postgres',
    displayUrl,
    async query<T>(sql: string, params?: unknown[]) {
      try {
        return normalise<T>(await pool.query(sql, params));
      } catch (err) {
        throw wrap(err);
      }
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      let client: PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw wrap(err);
      }
      // A checked-out client has no listener of the pool's: without one, a server that goes away
      // (crash, `pg_ctl stop -m immediate`, a failover) is an unhandled 'error' event that kills
      // the process with a raw stack. The same error also fails the query in flight, if any;
      // between queries, it is remembered and reported by the next one.
      let lost: unknown;
      const onError = (err: unknown) => {
        lost ??= err;
      };
      client.on('error', onError);
      const release = (err?: Error) => {
        client.removeListener('error', onError);
        client.release(err);
      };
      const tx: Queryable = {
        async query<R>(sql: string, params?: unknown[]) {
          if (lost !== undefined) throw wrap(lost);
          try {
            return normalise<R>(await clientQuery(client, sql, params));
          } catch (err) {
            // As pg's promise path did: a stack that leads back to the code that made the query
            // (await keeps the async callers), not one that starts in the socket's data handler.
            if (err instanceof Error) Error.captureStackTrace(err);
            throw wrap(err);
          }
        },
      };
      try {
        await tx.query('BEGIN');
        const result = await fn(tx);
        await tx.query('COMMIT');
        release();
        return result;
      } catch (err) {
        if (lost !== undefined) {
          // eslint-disable-next-line @typescript-eslint/no-base-to-string -- whatever was thrown, as String() prints it
          release(lost instanceof Error ? lost : new Error(String(lost)));
          throw wrap(err);
        }
        try {
          await client.query('ROLLBACK');
          release();
        } catch (rollbackErr) {
          // A connection that cannot roll back must not go back to the pool mid-transaction.
          release(rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr)));
        }
        throw err;
      }
    },
    async sharesSessions() {
      // Two clients connected at the same time: directly, each has its own backend, so their pids
      // always differ. A transaction-mode pooler gives the server session back after each statement
      // and (most recently used first) hands the same one to the other client. Three rounds, in case
      // the pooler hands out sessions round robin.
      const clients = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })];
      for (const c of clients) c.on('error', () => {});
      try {
        for (const c of clients) await c.connect();
        const seen = clients.map(() => new Set<number>());
        for (let round = 0; round < 3; round++) {
          for (const [i, c] of clients.entries())
            seen[i].add((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
          // Directly, each client keeps one backend of its own: one pid per client, two different pids.
          const [a, b] = seen as [Set<number>, Set<number>];
          if (a.size > 1 || b.size > 1 || [...a].some((pid) => b.has(pid))) return true;
        }
        return false;
      } catch (err) {
        throw wrap(err);
      } finally {
        for (const c of clients) await c.end().catch(() => undefined);
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
  return db;
}

/**
 * A pooled client's query through its callback, in a promise of our own: the promise
 * `client.query(sql, params)` returns (pg 8) kept every row it read alive through the next minor GC,
 * so a long transaction promoted all its rows to the old space as garbage (an audit's report at
 * a million refunds: 7 MB; `pool.query` already takes the callback path and promotes none;
 * node --trace-gc-nvp).
 */
function clientQuery(client: PoolClient, sql: string, params?: unknown[]): Promise<PgResult | PgResult[]> {
  return new Promise((resolve, reject) => {
    client.query(sql, params ?? [], (err: Error | undefined, res: PgResult | PgResult[]) =>
      err ? reject(err) : resolve(res),
    );
  });
}

function normalise<T>(res: PgResult | PgResult[]): QueryResult<T> {
  // A parameterless multi-statement query yields one result per statement.
  const last = Array.isArray(res) ? res[res.length - 1] : res;
  return { rows: (last?.rows ?? []) as T[], rowCount: last?.rowCount ?? 0 };
}

/** Maps "cannot reach / log in to the server" and a full disk to exit 6; statement errors pass unchanged. */
export function toStoreError(err: unknown, displayUrl: string, password?: string): unknown {
  if (codes.pgCode(err) === codes.DISK_FULL) {
    const reason = describe(err);
    return new StoreLockedError(
      `the store ${displayUrl} is out of disk space on the database server (${password ? reason.split(password).join(REDACTED) : reason}); ` +
        'the change was not made (PostgreSQL rolled it back); free some space there, then run the command again',
      { cause: err },
    );
  }
  if (!isUnreachable(err)) return err;
  let reason = describe(err);
  if (password) reason = reason.split(password).join(REDACTED);
  return new StoreLockedError(`store unreachable: ${displayUrl}: ${reason}`, { cause: err });
}

function isUnreachable(err: unknown): boolean {
  if (err instanceof AggregateError) return err.errors.some(isUnreachable) || hasErrno(err);
  if (hasErrno(err)) return true;
  const sqlstate = codes.pgCode(err);
  if (sqlstate) return UNREACHABLE_SQLSTATES.has(sqlstate);
  const message = err instanceof Error ? err.message : '';
  return UNREACHABLE_MESSAGES.some((re) => re.test(message));
}

function hasErrno(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNREACHABLE_ERRNOS.has(code);
}

function describe(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) {
    return err.errors.map((e) => (e instanceof Error ? e.message : String(e))).join('; ');
  }
  return err instanceof Error ? err.message || (err as { code?: string }).code || err.name : String(err);
}

function safePassword(url: string): string | undefined {
  try {
    const u = new URL(url);
    const p = decodeURIComponent(u.password) || u.searchParams.get('password') || '';
    return p || undefined;
  } catch {
    return undefined;
  }
}
