import type { CoreContext } from '../journal/context.js';
import { transition } from '../journal/transition.js';
import type { Operation } from '../../types.js';

/** proposed → approved, recording the approval reference. */
export async function approveOperation(ctx: CoreContext, id: string, ref: string): Promise<Operation> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const { op } = await transition(tx, id, 'approved', {
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      kind: 'approved',
      rule: 'human.approval',
      detail: { approval: ref },
    });
    // A hold by the re-plan guard ends here: a person approved it knowing the other one.
    await tx.query('UPDATE recon.operations SET approval = $2, review_reason = NULL WHERE id = $1', [id, ref]);
    return { ...op, approval: ref, review_reason: null };
  });
}

/** The approval reference an `autoApprove` policy gives (SPEC §9). */
export const POLICY_APPROVAL = 'policy:autoApprove';

/**
 * What a provider's `autoApprove` policy says about an operation about to be recorded: its
 * approval reference, or null when a person must approve it. An operation without an amount or a
 * currency is never approved by policy: the policy can only vouch for what it can measure.
 */
export function approvalByPolicy(
  policy: { maxAmount: number; currencies: string[] } | null | undefined,
  op: { amount: number | null; currency: string | null },
): string | null {
  if (!policy || op.amount === null || op.currency === null) return null;
  if (op.amount > policy.maxAmount || !policy.currencies.includes(op.currency)) return null;
  return POLICY_APPROVAL;
}
