import type { Queryable } from '../../store/db.js';
import type { Observation, Operation } from '../../types.js';
import { chainHeads, type ChainHead } from './chain.js';
import { rowToObservation, type ObservationRow } from './operations.js';

/** What the rule reads besides the operation: its observations so far and when its last attempt started. */
export interface History {
  observations: Observation[];
  lastAttemptAt: Date | null;
  /**
   * The head of the operation's audit chain when the history was read. The decision's event is
   * chained to it without reading it again; should another writer have appended meanwhile, the
   * event's seq is taken and the write fails as a whole (primary key), then goes step by step.
   */
  head?: ChainHead;
  /** The transactions linked to the operation so far (the rule's `linked`). */
  linked?: { provider_id: string; state: string }[];
}

/** The histories of many operations (observations, last attempt, chain head, links), four queries whatever their number. */
export async function historiesOf(q: Queryable, ops: Operation[]): Promise<Map<string, History>> {
  const out = new Map<string, History>();
  if (ops.length === 0) return out;
  // With one attempt, it started at first_attempt_at (claimAttempt writes both from one clock
  // reading): attempts are only read for retried operations.
  const retried = ops.filter((op) => op.attempt_count > 1).map((op) => op.id);
  const ids = ops.map((op) => op.id);
  const [obs, attempts, heads, linked] = await Promise.all([
    q.query<ObservationRow>(
      'SELECT * FROM recon.observations WHERE operation_id = ANY($1::text[]) ORDER BY operation_id, observed_at, id',
      [ids],
    ),
    retried.length
      ? q.query<{ operation_id: string; started_at: Date }>(
          `SELECT DISTINCT ON (operation_id) operation_id, started_at FROM recon.attempts
            WHERE operation_id = ANY($1::text[]) ORDER BY operation_id, number DESC`,
          [retried],
        )
      : Promise.resolve({ rows: [] as { operation_id: string; started_at: Date }[] }),
    chainHeads(q, ids),
    q.query<{ operation_id: string; provider_id: string; state: string }>(
      'SELECT operation_id, provider_id, state FROM recon.provider_transactions WHERE operation_id = ANY($1::text[])',
      [ids],
    ),
  ]);
  for (const op of ops)
    out.set(op.id, {
      observations: [],
      lastAttemptAt: op.attempt_count > 1 ? null : op.first_attempt_at,
      linked: [],
    });
  for (const o of obs.rows) {
    out.get(o.operation_id)!.observations.push(rowToObservation(o));
  }
  for (const a of attempts.rows) out.get(a.operation_id)!.lastAttemptAt = a.started_at;
  for (const [id, head] of heads) out.get(id)!.head = head;
  for (const t of linked.rows) out.get(t.operation_id)!.linked!.push({ provider_id: t.provider_id, state: t.state });
  return out;
}
