/**
 * PostgreSQL error codes (SQLSTATE) recon reacts to, by name, so a reader sees which failure a
 * branch handles. Both backends report them in `err.code`.
 * Source: https://www.postgresql.org/docs/current/errcodes-appendix.html
 */

/** `lock_timeout` expired, or `NOWAIT` found the row locked. */
export const LOCK_NOT_AVAILABLE = '55P03';
export const INVALID_PASSWORD = '28P01';
export const INVALID_AUTHORIZATION_SPECIFICATION = '28000';
export const INVALID_CATALOG_NAME = '3D000';
export const CANNOT_CONNECT_NOW = '57P03';
export const TOO_MANY_CONNECTIONS = '53300';
/** No space left on the disk that holds the data (PostgreSQL rolls the transaction back). */
export const DISK_FULL = '53100';
export const ADMIN_SHUTDOWN = '57P01';
/** The server is restarting after a crash or an immediate shutdown (`pg_ctl stop -m immediate`). */
export const CRASH_SHUTDOWN = '57P02';

/** A row's key already taken (an audit event's (operation_id, seq): the chain's head moved). */
export const UNIQUE_VIOLATION = '23505';
/** The move statement's links part aborts this way when a transaction was linked elsewhere meanwhile. */
export const DIVISION_BY_ZERO = '22012';

/** A named (prepared) statement the session does not have: another session's, behind a pooler. */
const INVALID_SQL_STATEMENT_NAME = '26000';
/** A named statement the session already has (prepared by another client, behind a pooler). */
const DUPLICATE_PREPARED_STATEMENT = '42P05';
/** Among others, "cached plan must not change result type": a prepared statement's table changed shape. */
const FEATURE_NOT_SUPPORTED = '0A000';

/** The SQLSTATE of a database error, or undefined for anything else. */
export function pgCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * Whether `err` is a session refusing a named statement before it ran: the name missing or already
 * there, or "cached plan must not change result type" (its table changed shape since it was
 * prepared), known by the server function that raises it (the message is in the server's language).
 */
export function refusesNamedStatement(err: unknown): boolean {
  const code = pgCode(err);
  return (
    code === INVALID_SQL_STATEMENT_NAME ||
    code === DUPLICATE_PREPARED_STATEMENT ||
    (code === FEATURE_NOT_SUPPORTED &&
      ((err as { routine?: string }).routine === 'RevalidateCachedQuery' || /cached plan/i.test(String(err))))
  );
}
