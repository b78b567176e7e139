/**
 * The PostgreSQL backend: a `pg` pool. `pg` is imported lazily so that commands which never
 * open a store (`--version`, `--help`) do not load it.
 */
import type { Pool, PoolClient, QueryConfig, QueryResult as PgResult } from 'pg';
import { StoreLockedError } from '../errors.js';
import { planKept, statementName, type Db, type Queryable, type QueryResult } from './db.js';
import { requireBundled } from '../lib/bundled.js';
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
  /**
   * Send the statements registered with keepPlan as named (prepared) statements once the
   * connections are known to be sessions of their own; default true. See `namedStatements`.
   */
  namedStatements?: boolean;
}

/**
 * `pg`: the one file `npm run build` bundles it into (dist/vendor/pg.cjs, scripts/vendor.mjs: ~22 ms
 * of CPU where the package's ~40 files take ~39 ms, at every start that opens PostgreSQL), else
 * (not built; the TypeScript run as it is, by the tests) the package.
 *
 * Loaded without Node's fetch implementation: pg asks whether it runs in a Cloudflare Worker when
 * it is loaded: from `navigator.userAgent` where Node has it (21 and later), else by building a
 * `Response`, which loads all of undici on Node 20: ~40 ms of CPU at every start that opens
 * PostgreSQL (`node --cpu-prof` of `recon run`; four workers start four times). On Node 20 a
 * `navigator` as Node 21 has it stands in while pg loads, and is removed after.
 */
async function importPg(): Promise<typeof import('pg').default> {
  if ('navigator' in globalThis) return loadPg();
  const major = process.versions.node.split('.')[0];
  Object.defineProperty(globalThis, 'navigator', {
    value: { userAgent: `Node.js/${major}` },
    configurable: true,
    writable: true,
  });
  try {
    return await loadPg();
  } finally {
    delete (globalThis as { navigator?: unknown }).navigator;
  }
}

async function loadPg(): Promise<typeof import('pg').default> {
  const bundled = requireBundled('pg') as typeof import('pg').default | undefined;
  return bundled ?? (await import('pg')).default;
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
    // A session's kept plans (namedStatements) go with it: a plan made while a table was small is
    // made again within this long even where nothing analyses the table (autovacuum does after 50
    // changes, which also makes it again).
    maxLifetimeSeconds: CONNECTION_LIFETIME_S,
    types,
  });
  // An idle client whose server went away emits 'error' on the pool; unhandled, it would
  // crash the process. The pool drops that client, and the next query reports the failure.
  pool.on('error', () => {});

  const wrap = (err: unknown): unknown => toStoreError(err, displayUrl, password);
  let closed = false;
  const named = namedStatements(() => db.sharesSessions!(), opts.namedStatements !== false);

  const db: Db = {
    kind: 'postgres',
    displayUrl,
    async query<T>(sql: string, params?: unknown[]) {
      const config = named.config(sql, params);
      try {
        return normalise<T>(await pool.query(config));
      } catch (err) {
        // The statement was refused before it ran (Parse or Bind): sent again, unnamed, it runs once.
        if (named.refused(config, err)) {
          try {
            return normalise<T>(await pool.query(sql, params));
          } catch (again) {
            throw wrap(again);
          }
        }
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
      let refusedHere = false;
      /** One statement on the transaction's connection, its result as pg gives it (COMMIT's tag included). */
      const send = async (config: QueryConfig): Promise<PgResult | PgResult[]> => {
        if (lost !== undefined) throw wrap(lost);
        try {
          return await clientQuery(client, config);
        } catch (err) {
          // In a transaction the refusal has aborted it: the caller's, as any failed statement; and
          // the connection, which may hold other statements prepared before a change, is closed.
          if (named.refused(config, err)) refusedHere = true;
          // As pg's promise path did: a stack that leads back to the code that made the query
          // (await keeps the async callers), not one that starts in the socket's data handler.
          if (err instanceof Error) Error.captureStackTrace(err);
          throw wrap(err);
        }
      };
      const tx: Queryable = {
        query: async <R>(sql: string, params?: unknown[]) => normalise<R>(await send(named.config(sql, params))),
      };
      try {
        await tx.query('BEGIN');
        const result = await fn(tx);
        // A transaction in which a statement failed ends in a rollback whatever COMMIT says (PostgreSQL
        // answers it with the tag ROLLBACK, not an error): when `fn` caught that failure, nothing of
        // it was written, and the caller must not hear otherwise.
        const end = await send({ text: 'COMMIT' });
        if (!Array.isArray(end) && end.command !== 'COMMIT') {
          throw new Error('the transaction was rolled back, not committed: a statement in it failed');
        }
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
          release(refusedHere ? new Error('a named statement was refused: connection closed') : undefined);
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
      // and hands the next statement any: most recently used first (then the other client gets the
      // same one), or round robin (then one client gets two: each asks twice in a row).
      const options = {
        connectionString: url,
        connectionTimeoutMillis: PROBE_TIMEOUT_MS,
        query_timeout: PROBE_TIMEOUT_MS,
      };
      const clients = [new pg.Client(options), new pg.Client(options)];
      for (const c of clients) c.on('error', () => {});
      try {
        for (const c of clients) await c.connect();
        const seen = clients.map(() => new Set<number>());
        for (const i of [0, 0, 1, 1, 0, 1]) {
          seen[i].add((await clients[i].query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
        }
        // Directly, each client keeps one backend of its own: one pid per client, two different pids.
        const [a, b] = seen as [Set<number>, Set<number>];
        return a.size > 1 || b.size > 1 || [...a].some((pid) => b.has(pid));
      } catch (err) {
        throw wrap(err);
      } finally {
        for (const c of clients) await c.end().catch(() => undefined);
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await named.close();
      await pool.end();
    },
  };
  return db;
}

/** A pooled connection is closed (when next idle) after this long, and with it its prepared statements and plans. */
const CONNECTION_LIFETIME_S = 300;

/** Named statements kept per pool: beyond these, keepPlan's statements are sent unnamed. */
const MAX_NAMED = 256;
/** keepPlan statements a pool runs before it asks whether its sessions are its own: a one-shot command never does. */
const PROBE_AFTER = 20;
/** The probe's connect and each of its statements give up after this long. */
const PROBE_TIMEOUT_MS = 5000;
/** After a probe that failed (the server unreachable, too many connections), the next is asked this much later. */
const PROBE_RETRY_MS = 60_000;

/**
 * When a pool sends keepPlan's statements named. A session keeps a named statement's parse and plan
 * (after five executions PostgreSQL may keep one generic plan), where an unnamed one is parsed and
 * planned at every execution: the move statement took 2 ms of its 3 ms to parse and plan
 * (log_min_duration_statement, npm run bench agents), and execute_action sends it twice.
 *
 * A transaction-mode pooler (PgBouncer before 1.21) hands each transaction any server session, so
 * a statement prepared on one is missing on the next. So, unnamed until `sharesSessions` has found
 * sessions of our own: asked once, in the background, when the pool has run PROBE_AFTER of these
 * statements (a long-lived server at once; a one-shot command, which would keep no plan, never).
 * A name is the hash of the text, so one name is always one statement, whichever session holds
 * it. Should a session refuse a name anyway (missing, already there, or its table changed shape
 * since it was prepared), the pool sends unnamed from then on.
 */
function namedStatements(sharesSessions: () => Promise<boolean>, enabled: boolean) {
  let state: 'unknown' | 'probing' | 'on' | 'off' = enabled ? 'unknown' : 'off';
  let uses = 0;
  let notBefore = 0;
  let closing = false;
  let probe: Promise<void> | undefined;
  const names = new Map<string, string>();
  const ask = () => {
    state = 'probing';
    probe = sharesSessions().then(
      (shared) => {
        if (state === 'probing') state = shared ? 'off' : 'on';
      },
      () => {
        if (state !== 'probing') return;
        state = 'unknown';
        notBefore = Date.now() + PROBE_RETRY_MS;
      },
    );
  };
  return {
    config(sql: string, params?: unknown[]): QueryConfig {
      if (state === 'off' || !params?.length || !planKept(sql)) return { text: sql, values: params };
      if (state === 'unknown' && ++uses >= PROBE_AFTER && !closing && Date.now() >= notBefore) ask();
      if (state !== 'on') return { text: sql, values: params };
      let name = names.get(sql);
      if (name === undefined) {
        if (names.size >= MAX_NAMED) return { text: sql, values: params };
        name = statementName(sql);
        names.set(sql, name);
      }
      return { name, text: sql, values: params };
    },
    /** True (and unnamed from now on) when `err` is a session refusing the named statement of `config`. */
    refused(config: QueryConfig, err: unknown): boolean {
      if (!config.name) return false;
      const refusal = codes.refusesNamedStatement(err);
      if (refusal) state = 'off';
      return refusal;
    },
    /** No probe from now on; waits for one that is running (its connections are closed when it ends). */
    async close(): Promise<void> {
      closing = true;
      await probe;
    },
  };
}

/**
 * A pooled client's query through its callback, in a promise of our own: the promise
 * `client.query(sql, params)` returns (pg 8) kept every row it read alive through the next minor GC,
 * so a long transaction promoted all its rows to the old space as garbage (an audit's report at
 * a million refunds: 7 MB; `pool.query` already takes the callback path and promotes none;
 * node --trace-gc-nvp).
 */
function clientQuery(client: PoolClient, config: QueryConfig): Promise<PgResult | PgResult[]> {
  return new Promise((resolve, reject) => {
    client.query(config, (err: Error | undefined, res: PgResult | PgResult[]) => (err ? reject(err) : resolve(res)));
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
