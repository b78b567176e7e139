import type { Queryable } from '../../store/db.js';
import type { ObservationResult } from '../../types.js';

/**
 * The one spelling of an observation's INSERT (issue 25): recordObservations and the move statement
 * (transition.ts, WRITE_MOVES) both use it. `rows` yields (operation_id, observed_at, result, detail).
 */
export function insertObservationsSql(rows: string): string {
  return `INSERT INTO recon.observations (operation_id, observed_at, result, detail)
  ${rows.trim()}`;
}

export async function recordObservation(
  tx: Queryable,
  operationId: string,
  o: { at: Date; result: ObservationResult; detail: Record<string, unknown> },
): Promise<void> {
  await recordObservations(tx, [{ operationId, ...o }]);
}

/**
 * Observations (the evidence the rule reads), and each operation's last_checked_at with them:
 * a pass of `recon run` does not claim what was looked up after it began (claimForRun).
 */
async function recordObservations(
  tx: Queryable,
  rows: { operationId: string; at: Date; result: ObservationResult; detail: Record<string, unknown> }[],
): Promise<void> {
  if (rows.length === 0) return;
  const params = [
    rows.map((r) => r.operationId),
    rows.map((r) => r.at.toISOString()),
    rows.map((r) => r.result),
    rows.map((r) => JSON.stringify(r.detail)),
  ];
  await tx.query(
    insertObservationsSql('SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::jsonb[])'),
    params,
  );
  await tx.query(
    `UPDATE recon.operations o SET last_checked_at = greatest(o.last_checked_at, u.at)
       FROM (SELECT id, max(at) AS at FROM unnest($1::text[], $2::timestamptz[]) AS x(id, at) GROUP BY id) u
      WHERE o.id = u.id`,
    params.slice(0, 2),
  );
}
