/**
 * `recon escalate` on an operation already in `needs_review` (SPEC §7): reassign it or add a reason.
 * The state does not move (only a resolution leaves needs_review); the change is an audit event.
 */
import type { Operation } from '../types.js';
import type { CoreContext } from './context.js';
import { getOperation, lockOperation } from './repo.js';
import { note } from './transition.js';

/** Null when the operation is not in needs_review (the caller escalates it instead). */
export async function reassignReview(
  ctx: CoreContext,
  id: string,
  o: { reason: string; assignee?: string },
): Promise<Operation | null> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const current = await lockOperation(tx, id);
    if (current.state !== 'needs_review') return null;
    const reasons = (current.review_reason ?? '').split('; ').filter(Boolean);
    const reason = reasons.includes(o.reason) ? reasons.join('; ') : [...reasons, o.reason].join('; ');
    const assignee = o.assignee ?? current.assignee;
    await tx.query(
      `UPDATE recon.operations SET review_reason = $2::text, assignee = $3::text, updated_at = $4::timestamptz WHERE id = $1::text`,
      [id, reason, assignee, now.toISOString()],
    );
    await note(tx, id, {
      actor: ctx.actor,
      now,
      kind: 'review.reassigned',
      rule: 'human.escalate',
      detail: {
        reason: o.reason,
        review_reason_before: current.review_reason,
        review_reason: reason,
        assignee_before: current.assignee,
        assignee,
      },
    });
    return getOperation(tx, id);
  });
}
