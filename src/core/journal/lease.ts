/**
 * The one writer of `lease.expired` (SPEC §3): a `submitting` operation whose worker's lease
 * expired was left by a crashed or killed worker; it becomes `outcome_unknown` (judgedState), never
 * `failed`, with an event that says when the crashed worker's lease ended. Whoever meets it first
 * writes it: a reconciliation pass that claimed it, a transaction found for it, a person escalating.
 */
import type { Queryable } from '../../store/db.js';
import type { Operation, State } from '../../types.js';
import { judgedState } from './states.js';
import { transition, type Move, type TransitionOptions } from './transition.js';

export async function writeLeaseExpired(
  tx: Queryable,
  op: { id: string; state: State },
  /** When the crashed worker's lease ended (not a lease the caller took since). */
  previousLeaseExpiresAt: Date | null | undefined,
  o: Pick<TransitionOptions, 'actor' | 'auditKey' | 'now' | 'leaseOwner' | 'keepLease'>,
): Promise<Operation> {
  const { kind, rule, detail } = leaseExpiredMove(op, previousLeaseExpiresAt);
  const { op: moved } = await transition(tx, op.id, judgedState(op.state), { ...o, kind, rule, detail });
  return moved;
}

/** The same move for transitionMany (the lease released): what writeLeaseExpired writes. */
export function leaseExpiredMove(
  op: { id: string; state: State },
  previousLeaseExpiresAt: Date | null | undefined,
): Move & { to: State; from: State; rule: string } {
  return {
    id: op.id,
    from: op.state,
    to: judgedState(op.state),
    kind: 'lease.expired',
    rule: 'lease.expired',
    detail: {
      note: 'the submitting worker did not finish (crash or kill); outcome unknown, never failed',
      previous_lease_expired_at: previousLeaseExpiresAt?.toISOString() ?? null,
    },
    lease: 'release',
  };
}
