import { RefusedError } from '../../errors.js';
import type { Operation } from '../../types.js';
import type { CoreContext } from '../journal/context.js';
import { lockOperation, rowToOperation, type OperationRow } from '../journal/operations.js';
import { isInFlight, judgedState } from '../journal/states.js';
import { note } from '../journal/note.js';
import { transition } from '../journal/transition.js';
import { writeLeaseExpired } from '../journal/lease.js';

/**
 * `recon escalate ID --reason TEXT [--assignee WHO]` (SPEC §7): hands an operation to a person
 * (needs_review), or, already in review, reassigns it and records the added reason.
 */
export async function escalate(
  ctx: CoreContext,
  id: string,
  o: { reason: string; assignee?: string },
): Promise<Operation> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const current = await lockOperation(tx, id);
    if (isInFlight(current, now)) {
      throw new RefusedError(
        `operation ${id} has an attempt in flight (lease until ${current.lease_expires_at!.toISOString()}); escalate it after the attempt ends`,
        'lease_held',
      );
    }
    if (current.state === 'needs_review') {
      // Already a person's to decide (SPEC §7): reassign, and record the added reason; the state
      // and the reason a rule gave (duplicate, mismatch…) stay.
      const r = await tx.query<OperationRow>(
        `UPDATE recon.operations SET assignee = coalesce($2::text, assignee), updated_at = $3::timestamptz
          WHERE id = $1 RETURNING *`,
        [id, o.assignee ?? null, now.toISOString()],
      );
      await note(tx, id, {
        actor: ctx.actor,
        auditKey: ctx.auditKey,
        now,
        kind: 'escalated',
        rule: 'human.escalate',
        detail: {
          reason: o.reason,
          assignee: o.assignee ?? null,
          review_reason: current.review_reason,
          previous_assignee: current.assignee,
        },
      });
      return rowToOperation(r.rows[0]);
    }
    // Its worker is gone (the lease expired): it is the outcome_unknown it is before it is escalated.
    if (judgedState(current.state) !== current.state)
      await writeLeaseExpired(tx, current, current.lease_expires_at, { actor: ctx.actor, auditKey: ctx.auditKey, now });
    // From any state but cancelled, confirmed and failed included (SPEC §3): a person may always put
    // an operation in front of people. The reason is `escalated`; the person's words are the note.
    if (current.state === 'cancelled')
      throw new RefusedError(
        `operation ${id} is cancelled: it will not happen, there is nothing to review`,
        'state_machine',
      );
    const { op } = await transition(tx, id, 'needs_review', {
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      by: 'person',
      kind: 'escalated',
      rule: 'human.escalate',
      review_reason: 'escalated',
      assignee: o.assignee ?? null,
      detail: { reason: o.reason, assignee: o.assignee ?? null, from_state: current.state },
    });
    return op;
  });
}
