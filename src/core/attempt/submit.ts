import type { Provider, State, SubmitRequest, SubmitResult, Operation } from '../../types.js';
import { claimAttempt, newOwnerToken, type AttemptClaim } from './claims.js';
import { LeaseLostError } from '../../errors.js';
import type { CoreContext } from '../journal/context.js';
import { applyFoundTransaction } from '../found/apply.js';
import { classifyFound } from '../found/classify.js';
import { getOperation, lockOperation, transactionsOf } from '../journal/operations.js';
import { linkTransaction } from '../journal/links.js';
import { transition } from '../journal/transition.js';

/** SPEC §3: the state a classified submit result moves the operation to. */
function stateForSubmit(r: SubmitResult): State {
  switch (r.outcome) {
    case 'confirmed':
      return 'confirmed';
    case 'pending':
      return 'pending';
    case 'failed':
      return 'failed';
    case 'conflict':
      return 'needs_review';
    default:
      // A timeout is an unknown outcome, never a failure (SPEC §1.1).
      return 'outcome_unknown';
  }
}

export interface SubmitOutcome {
  operation: Operation;
  attempt: number;
  result: SubmitResult;
  /**
   * The answer came back after this attempt's lease had run out (a loaded machine, a slow
   * provider): it was recorded as a late response (linked, and applied as SPEC §3 allows) rather
   * than as the attempt's result; `operation` is the state after it.
   */
  late_response?: boolean;
}

/**
 * One attempt, in the three phases of an idempotent request: (1) claim + attempt row, committed
 * before anything is sent; (2) the request with the operation's own key; (3) the classified
 * result, the provider transaction and the audit event in one transaction, under the lease.
 */
export async function submitOperation(
  ctx: CoreContext,
  provider: Provider,
  id: string,
  o: {
    from?: 'approved' | 'outcome_unknown';
    rule?: string;
    detail?: Record<string, unknown>;
    owner?: string;
    heldLease?: string;
  } = {},
): Promise<SubmitOutcome> {
  const claim = await claimAttempt(ctx, id, {
    owner: o.owner ?? newOwnerToken(ctx.actor),
    leaseMs: provider.capabilities.leaseMs,
    from: o.from ?? 'approved',
    rule: o.rule ?? 'submit.first_attempt',
    detail: o.detail,
    heldLease: o.heldLease,
    check: (op) => provider.validatePayload?.(submitRequest(op)),
  });
  const result = await send(provider, claim);
  try {
    const operation = await finishAttempt(ctx, provider, claim, result);
    return { operation, attempt: claim.attempt, result };
  } catch (err) {
    // finishAttempt recorded the transaction the answer names before it threw: the answer was
    // written, as a late response. Saying "result not written" (exit 4) was untrue (campaign).
    if (err instanceof LeaseLostError && result.txn)
      return { operation: await getOperation(ctx.db, id), attempt: claim.attempt, result, late_response: true };
    throw err;
  }
}

/** What the adapter is asked to send for an operation. */
export function submitRequest(
  op: Pick<Operation, 'id' | 'action' | 'payload' | 'idempotency_key' | 'client_reference'>,
): SubmitRequest {
  return {
    operation_id: op.id,
    action: op.action,
    payload: op.payload,
    idempotency_key: op.idempotency_key,
    client_reference: op.client_reference,
  };
}

async function send(provider: Provider, claim: AttemptClaim): Promise<SubmitResult> {
  try {
    return await provider.submit(submitRequest(claim.op));
  } catch (err) {
    // An adapter that throws has not told us what happened at the provider: unknown, not failed.
    return { outcome: 'unknown', error_class: 'exception', message: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * Phase 3: writes the result only while our lease holds (LeaseLostError otherwise). A late
 * response (the lease was lost) is not written as the attempt's result, but the transaction it
 * names goes through applyFoundTransaction (SPEC §3): one in needs_review stays there; a second
 * one for a confirmed operation is a duplicate; an unresolved operation follows it. It still
 * throws LeaseLostError; submitOperation reports the late response it recorded.
 */
export async function finishAttempt(
  ctx: CoreContext,
  provider: Provider,
  claim: AttemptClaim,
  result: SubmitResult,
): Promise<Operation> {
  try {
    return await writeResult(ctx, provider, claim, result);
  } catch (err) {
    const txn = result.txn;
    if (err instanceof LeaseLostError && txn) {
      const now = ctx.now();
      await ctx.db.transaction(async (tx) =>
        applyFoundTransaction(tx, await lockOperation(tx, claim.op.id), provider.name, txn, {
          source: 'late_response',
          via: result.replayed ? 'replay' : 'response',
          actor: ctx.actor,
          auditKey: ctx.auditKey,
          now,
          detail: { attempt: claim.attempt, outcome: result.outcome, lease_owner: claim.owner },
        }),
      );
    }
    throw err;
  }
}

async function writeResult(
  ctx: CoreContext,
  provider: Provider,
  claim: AttemptClaim,
  result: SubmitResult,
): Promise<Operation> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    // A transaction the response links is classified like a lookup's match and a webhook's
    // (classifyFound): one that disagrees with the operation is a human's to judge, never confirmed
    // (issue 10), and another live one linked meanwhile (a webhook while the request was in flight)
    // makes this one a second side effect: a person sees both (duplicate wins over a disagreement).
    const found = result.txn
      ? classifyFound({ ...claim.op, state: 'submitting' }, [result.txn], await transactionsOf(tx, claim.op.id))
      : null;
    const reason = found?.review_reason ?? null;
    const problems = found?.problems ?? [];
    const to = reason ? 'needs_review' : stateForSubmit(result);
    const detail: Record<string, unknown> = {
      attempt: claim.attempt,
      outcome: result.outcome,
      error_class: result.error_class ?? null,
      http_status: result.http_status ?? null,
      provider_request_id: result.provider_request_id ?? null,
      replayed: result.replayed ?? false,
      message: result.message ?? null,
    };
    let linked = true;
    if (result.txn) {
      detail.provider_id = result.txn.provider_id;
      detail.provider_status = result.txn.status;
    }
    if (problems.length) detail.problems = problems;
    const { op } = await transition(tx, claim.op.id, to, {
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      kind: 'attempt.finished',
      rule: reason ? `submit.${reason}` : `submit.${result.outcome}`,
      detail,
      review_reason: reason ?? (to === 'needs_review' ? 'idempotency_conflict' : null),
      leaseOwner: claim.owner,
    });
    await tx.query(
      `UPDATE recon.attempts SET ended_at = $3::timestamptz, outcome = $4, error_class = $5, provider_request_id = $6
        WHERE operation_id = $1 AND number = $2`,
      [
        claim.op.id,
        claim.attempt,
        now.toISOString(),
        result.outcome === 'unknown' || result.outcome === 'conflict'
          ? 'unknown'
          : result.outcome === 'failed'
            ? 'failed'
            : 'confirmed',
        result.error_class ?? null,
        result.provider_request_id ?? null,
      ],
    );
    if (result.txn) {
      const r = await linkTransaction(tx, provider.name, claim.op.id, result.txn, {
        via: result.replayed ? 'replay' : 'response',
        by: ctx.actor,
        at: now,
      });
      linked = r.linked;
    }
    return linked ? op : { ...op };
  });
}
