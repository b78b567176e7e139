import { RefusedError } from '../../errors.js';
import type { Operation, Provider } from '../../types.js';
import type { CoreContext } from '../journal/context.js';
import { decisionJson, type DecisionJson } from '../journal/decision-json.js';
import { lookUpAndDecide, reconcileById } from './reconcile.js';
import { getOperation } from '../journal/operations.js';
import { isInFlight, isReconcilable, RECONCILABLE_STATES } from '../journal/states.js';

/**
 * `recon retry ID` (SPEC §7): the rule (§4), now, for one operation, and a new attempt with the
 * original key and payload only if it allows. `dryRun`: the decision only, nothing written.
 * Refused (exit 4) for an operation the rule does not judge: one whose attempt is in flight, or
 * one that is not unresolved, or waits for a person.
 */
export async function retryNow(
  ctx: CoreContext,
  provider: Provider,
  op: Operation,
  o: { dryRun?: boolean } = {},
): Promise<DecisionJson & { dry_run?: true }> {
  refuseUnlessRetryable(op, ctx.now());
  if (o.dryRun) {
    const { ruling } = await lookUpAndDecide(ctx, provider, op, { dryRun: true });
    return { ...decisionJson(op.id, ruling), dry_run: true };
  }
  const result = await reconcileById(ctx, provider, op.id);
  if (result) return result;
  // Not claimable: it moved since it was read, or another worker holds it.
  refuseUnlessRetryable(await getOperation(ctx.db, op.id), ctx.now());
  throw new RefusedError(`operation ${op.id} is claimed by another worker right now; try again shortly`, 'lease_held');
}

function refuseUnlessRetryable(op: Operation, now: Date): void {
  if (isInFlight(op, now))
    throw new RefusedError(
      `operation ${op.id} has an attempt in flight until ${op.lease_expires_at!.toISOString()}`,
      'lease_held',
    );
  if (!isReconcilable(op.state))
    throw new RefusedError(
      `operation ${op.id} is ${op.state}; only ${RECONCILABLE_STATES.join(', ')} operations are retried`,
      'state_machine',
    );
}
