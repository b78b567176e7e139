import type { Provider, ProviderTransaction, State, SubmitRequest, SubmitResult, Operation } from '../../types.js';
import type { ChainHead } from '../journal/chain.js';
import { claimAttempt, newOwnerToken, type AttemptClaim, type ClaimView } from './claims.js';
import { LeaseLostError } from '../../errors.js';
import type { CoreContext } from '../journal/context.js';
import { applyFoundTransaction } from '../found/apply.js';
import { classifyFound } from '../found/classify.js';
import { getOperation, lockOperation, transactionsAndHead } from '../journal/operations.js';
import { linkTransaction } from '../journal/links.js';
import { assertLease, movedOn, transitionMany, type Move } from '../journal/transition.js';

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
  /** The provider transactions linked to it when the result was written, oldest link first (not for a late response). */
  txnIds?: string[];
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
    /** An event to write with `attempt.started`, in its statement (claimAttempt's `note`). */
    note?: () => Move['note'];
    /** Told when the statement `note` was given to wrote nothing (claimAttempt's `noteUnwritten`). */
    noteUnwritten?: () => void;
    /** The operation as the caller has just read it (readForClaim): claimed on, without a read of its own. */
    seen?: ClaimView;
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
    note: o.note,
    noteUnwritten: o.noteUnwritten,
    seen: o.seen,
  });
  const result = await send(provider, claim);
  try {
    const { operation, txnIds } = await finish(ctx, provider, claim, result);
    return { operation, attempt: claim.attempt, result, txnIds };
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
  return (await finish(ctx, provider, claim, result)).operation;
}

/** finishAttempt, with the provider transactions linked when the result was written. */
async function finish(
  ctx: CoreContext,
  provider: Provider,
  claim: AttemptClaim,
  result: SubmitResult,
): Promise<{ operation: Operation; txnIds: string[] }> {
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

/**
 * Phase 3's write. The short way first, one statement: the move with the attempt's end and the
 * answer's link (Move.attemptEnd, Move.links), on what the claim left (the chain's head after its
 * events, the transactions linked then), with no row lock or read of its own. The statement checks
 * the lease and the state under the row lock; an event written for the operation since the claim (a
 * link always comes with one) has taken the seq the move's event needs, and a transaction linked to
 * another operation fails the link: either fails the statement as a whole. Then (movedOn) the long
 * way decides as before: the row lock, the lease, the head and the links read again, the link made on
 * its own (a transaction linked elsewhere is not re-pointed). A store error is the caller's, as it
 * was. execute_action's end: 6 statements → 1.
 */
async function writeResult(
  ctx: CoreContext,
  provider: Provider,
  claim: AttemptClaim,
  result: SubmitResult,
): Promise<{ operation: Operation; txnIds: string[] }> {
  const id = claim.op.id;
  const txn = result.txn;
  const ended = {
    number: claim.attempt,
    outcome: attemptOutcome(result),
    errorClass: result.error_class ?? null,
    providerRequestId: result.provider_request_id ?? null,
  };
  const via = result.replayed ? ('replay' as const) : ('response' as const);
  try {
    const seen = { state: claim.op.state, ...claim.left };
    const now = ctx.now();
    const [moved] = await transitionMany(
      ctx.db,
      [
        {
          ...endMove(claim, result, seen),
          attemptEnd: ended,
          ...(txn ? { links: [{ provider: provider.name, txn, via }] } : {}),
        },
      ],
      { actor: ctx.actor, auditKey: ctx.auditKey, now, returnRows: true },
    );
    if (moved.ok) {
      const txnIds = seen.transactions.map((t) => t.provider_id);
      if (txn && !txnIds.includes(txn.provider_id)) txnIds.push(txn.provider_id);
      return { operation: moved.op!, txnIds };
    }
  } catch (err) {
    // Written since the claim, or linked elsewhere: nothing of the short way stands. A store error is
    // the caller's, as on the long way (it may have committed: the long way would read a lost lease).
    if (!movedOn(err)) throw err;
  }
  return ctx.db.transaction(async (tx) => {
    const now = ctx.now();
    // The row lock; then, in a statement begun after it was granted (chainHeads), the chain's head
    // and the transactions linked: the move needs no lock or head read of its own.
    const locked = await lockOperation(tx, id);
    assertLease(locked, claim.owner, now);
    const { head, transactions } = await transactionsAndHead(tx, id);
    const [moved] = await transitionMany(
      tx,
      [{ ...endMove(claim, result, { state: locked.state, head, transactions }), attemptEnd: ended }],
      { actor: ctx.actor, auditKey: ctx.auditKey, now, returnRows: true },
    );
    if (!moved.ok) throw moved.error;
    const txnIds = transactions.map((t) => t.provider_id);
    // Linked now (or brought up to date, already ours): the newest link, last as provider_txn_ids lists
    // them. One linked to another operation meanwhile is not re-pointed.
    if (txn && (await linkTransaction(tx, provider.name, id, txn, { via, by: ctx.actor, at: now })).linked)
      if (!txnIds.includes(txn.provider_id)) txnIds.push(txn.provider_id);
    return { operation: moved.op!, txnIds };
  });
}

/** The attempt row's outcome for a classified answer. */
function attemptOutcome(r: SubmitResult): 'confirmed' | 'failed' | 'unknown' {
  if (r.outcome === 'unknown' || r.outcome === 'conflict') return 'unknown';
  return r.outcome === 'failed' ? 'failed' : 'confirmed';
}

/**
 * The move that ends the attempt, on the operation as `seen` (its state, chain head and linked
 * transactions): where the answer takes it and why, under the attempt's lease.
 */
function endMove(
  claim: AttemptClaim,
  result: SubmitResult,
  seen: { state: State; head: ChainHead; transactions: ProviderTransaction[] },
): Move {
  // A transaction the response links is classified like a lookup's match and a webhook's
  // (classifyFound): one that disagrees with the operation is a human's to judge, never confirmed
  // (issue 10), and another live one linked meanwhile (a webhook while the request was in flight)
  // makes this one a second side effect: a person sees both (duplicate wins over a disagreement).
  const found = result.txn
    ? classifyFound({ ...claim.op, state: 'submitting' }, [result.txn], seen.transactions)
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
  if (result.txn) {
    detail.provider_id = result.txn.provider_id;
    detail.provider_status = result.txn.status;
  }
  if (problems.length) detail.problems = problems;
  return {
    id: claim.op.id,
    from: seen.state,
    head: seen.head,
    to,
    kind: 'attempt.finished',
    rule: reason ? `submit.${reason}` : `submit.${result.outcome}`,
    detail,
    review_reason: reason ?? (to === 'needs_review' ? 'idempotency_conflict' : null),
    leaseOwner: claim.owner,
    lease: 'release',
  };
}
