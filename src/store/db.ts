/**
 * The store's connection, the same for PostgreSQL and PGlite (SPEC §5: one SQL dialect for both).
 * Everything above this layer writes plain SQL with `$n` parameters against `Queryable`.
 */

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
