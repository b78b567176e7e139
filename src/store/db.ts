/**
 * The store's connection, the same for PostgreSQL and PGlite (SPEC §5: one SQL dialect for both).
 * Everything above this layer writes plain SQL with `$n` parameters against `Queryable`.
 */
import { createHash } from 'node:crypto';

export interface QueryResult<T> {
  rows: T[];
  /** Rows returned by a SELECT, or rows changed by INSERT/UPDATE/DELETE. */
  rowCount: number;
}

export interface Queryable {
  /**
   * Runs one statement with `$n` parameters. Without parameters, `sql` may hold several
   * statements separated by `;` (the simple query protocol, on both backends), which is how
   * migration files run; the result is then the last statement's.
   */
  query<T>(sql: string, params?: unknown[]): Promise<QueryResult<T>>;
}

/** The statements registered with keepPlan. */
const kept = new Set<string>();

/**
 * Marks a statement (its exact text) as one whose plan a PostgreSQL session may keep: it is sent
 * as a named, prepared statement once the store's connections are known to be sessions of their
 * own (not a transaction-mode pooler's), so the server parses and plans it once per session rather
 * than at every execution. For statements run often whose best plan does not depend on their
 * parameters' values (rows by id); and for constant texts or a bounded set of them, since each
 * is kept by every session that runs it. Returns `sql`.
 */
export function keepPlan(sql: string): string {
  kept.add(sql);
  return sql;
}

/** A kept statement's name in a session: the hash of its text, so one name is always one statement. */
export function statementName(sql: string): string {
  return `recon_${createHash('sha256').update(sql).digest('hex').slice(0, 32)}`;
}

/** Whether keepPlan registered `sql`. */
export function planKept(sql: string): boolean {
  return kept.has(sql);
}

export interface Db extends Queryable {
  kind: 'postgres' | 'pglite';
  /** The URL with any password redacted, for messages. */
  displayUrl: string;
  /**
   * Runs `fn` in one transaction on one connection: committed when `fn` resolves, rolled
   * back when it throws (the error is rethrown). Do not call `db.query` or nest
   * `db.transaction` inside `fn`: on PGlite they wait for this transaction to end.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * PostgreSQL only: true when two connections of ours were served by one server session, which
   * only a transaction-mode pooler (PgBouncer `pool_mode = transaction`) does. Migrations need a
   * session of their own and refuse such a URL.
   */
  sharesSessions?(): Promise<boolean>;
  /** Closes connections and, for an embedded store, releases its lock file. Idempotent. */
  close(): Promise<void>;
}

/** What PostgreSQL's array input reads otherwise than JSON writes it: control characters (JSON's `\n` is `n` there) and surrogates. */
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const NOT_AS_JSON = /[\u0000-\u001f\ud800-\udfff]/;

/**
 * A `text[]` (or `jsonb[]`, `timestamptz[]`, …) parameter as PostgreSQL's array literal, written by
 * one native JSON.stringify: `["a",null,"b\"c"]` is `{"a",null,"b\"c"}` once its brackets are
 * braces, since inside double quotes both escape `"` and `\` with a backslash, and an unquoted null
 * is NULL in both. The driver writes an array element by element (two regular-expression passes
 * over each), which was ~5% of `recon run`'s CPU in its group writes (npm run bench, claims).
 * Values holding what the two read differently (control characters, surrogates) are handed to the
 * driver as they are. `jsonTexts`: every value is JSON.stringify's output (never holds either).
 */
export function textArrayParam(
  values: readonly (string | null)[],
  o: { jsonTexts?: boolean } = {},
): string | readonly (string | null)[] {
  if (!o.jsonTexts)
    for (const v of values) {
      // Anything but a string (a provider's id that is not one) is the driver's to write, as before.
      if (v !== null && (typeof v !== 'string' || NOT_AS_JSON.test(v))) return values;
    }
  const json = JSON.stringify(values);
  return `{${json.slice(1, -1)}}`;
}

/**
 * SQL for a jsonb[] made of parameter `$n`, one JSON array (`JSON.stringify(values)`; its nulls SQL
 * NULLs), in order. The values are written once, by one JSON.stringify, where a jsonb[] parameter
 * has each written as JSON and that text escaped again into the array's literal by the driver
 * (npm run bench, claims: the group writes' details; webhooks: the events' payloads).
 */
export const jsonbArraySql = (n: number) =>
  `(SELECT array_agg(nullif(e, 'null'::jsonb) ORDER BY i) FROM jsonb_array_elements($${n}::jsonb) WITH ORDINALITY AS j(e, i))`;
