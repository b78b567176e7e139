/**
 * `recon lookup` (SPEC §7): ask the provider what it holds for an operation, in any state, and
 * show every transaction carrying its id or key and every ambiguous look-alike. What is written
 * depends on the state:
 *  - unresolved and reconcilable (outcome_unknown, pending, a submitting whose lease expired): one
 *    step of `recon run` for this operation, under a lease: the observation and the rule's
 *    decision (confirm, fail, pending, review, wait). Lookup stays read-only at the provider: a
 *    decision to retry is recorded as the observation only and named as the next command.
 *  - any state the rule does not decide (needs_review, terminal, not yet submitted): the observation,
 *    and what carries the operation linked as evidence (applyLookupFindings, SPEC §3): a review
 *    never moves; a second transaction for a confirmed operation is a duplicate (→ needs_review).
 *  - an attempt in flight (a live lease): nothing is written.
 */
import type { LookupResult, Operation, Provider, ProviderTransaction } from '../../types.js';
import { lookupDetail, type DecisionJson } from '../journal/decision-json.js';
import { claimOne, newOwnerToken, releaseLease } from '../attempt/claims.js';
import type { CoreContext } from '../journal/context.js';
import { lookUpAndDecide, safeLookup } from './reconcile.js';
import { getOperation, listOperations, transactionsOf } from '../journal/operations.js';
import { applyLookupFindings } from '../found/apply.js';
import { isInFlight, isReconcilable } from '../journal/states.js';
import { note } from '../journal/note.js';
import { recordObservation } from '../journal/observations.js';
import { applyDecisions } from './write-decisions.js';

export interface OperationLookup {
  /** The operation after the lookup. */
  operation: Operation;
  /** Its state before. */
  before: Operation['state'];
  lookup: LookupResult;
  /** The rule's decision, when the rule was applied (or, for a retry, only evaluated). */
  decision: DecisionJson | null;
  /** What was written: the decision, evidence for a review, or nothing. */
  wrote: 'decision' | 'evidence' | 'nothing';
  /** Why nothing was written, or what the engineer should know. */
  note: string | null;
  /** The transactions linked to the operation after the lookup. */
  linked: ProviderTransaction[];
}

export async function lookupOperation(ctx: CoreContext, provider: Provider, id: string): Promise<OperationLookup> {
  const op = await getOperation(ctx.db, id);
  const now = ctx.now();
  if (!isReconcilable(op.state)) return findings(ctx, provider, op);
  if (!isInFlight(op, now)) {
    const owner = newOwnerToken(ctx.actor);
    const claimed = await claimOne(ctx.db, id, { owner, leaseMs: provider.capabilities.leaseMs, now });
    if (claimed) return reconcileStep(ctx, provider, claimed, owner);
  }
  return {
    operation: op,
    before: op.state,
    lookup: await safeLookup(provider, op),
    decision: null,
    wrote: 'nothing',
    note: 'an attempt or another worker holds this operation right now; nothing written',
    linked: await transactionsOf(ctx.db, id),
  };
}

/** One step of `recon run` for the operation we claimed (lookUpAndDecide), read-only at the provider. */
async function reconcileStep(
  ctx: CoreContext,
  provider: Provider,
  claimed: Operation,
  owner: string,
): Promise<OperationLookup> {
  try {
    const plan = await lookUpAndDecide(ctx, provider, claimed, { owner });
    const { op, lookup } = plan;
    let decision: DecisionJson;
    let note_: string | null = null;
    if (plan.ruling.decision === 'retry') {
      // Read-only at the provider: the retry is the job of `recon retry` or the next `recon run`.
      await ctx.db.transaction(async (tx) => {
        await recordObservation(tx, op.id, { at: ctx.now(), result: lookup.result, detail: lookupDetail(lookup) });
        await note(tx, op.id, {
          actor: ctx.actor,
          auditKey: ctx.auditKey,
          now: ctx.now(),
          kind: 'lookup',
          detail: { ...lookupDetail(lookup), would: plan.ruling.rule },
        });
      });
      decision = {
        id: op.id,
        decision: 'retry',
        rule: plan.ruling.rule,
        state: op.state,
        explanation: plan.ruling.explanation,
      };
      note_ = `the rule allows a retry now; lookup never sends one: recon retry ${op.id}  (or the next recon run)`;
    } else {
      const [applied] = await applyDecisions(ctx, [plan], owner);
      if (!applied.ok) throw applied.error;
      decision = applied.json;
    }
    const after = await getOperation(ctx.db, op.id);
    return {
      operation: after,
      before: claimed.state,
      lookup,
      decision,
      wrote: 'decision',
      note: note_,
      linked: await transactionsOf(ctx.db, op.id),
    };
  } finally {
    await releaseLease(ctx.db, claimed.id, owner);
  }
}

/** A state the rule does not decide: the lookup is evidence (applyLookupFindings, SPEC §3). */
async function findings(ctx: CoreContext, provider: Provider, op: Operation): Promise<OperationLookup> {
  const lookup = await safeLookup(provider, op);
  const state = await applyLookupFindings(ctx, provider, op, lookup);
  const note =
    state !== op.state
      ? `${op.state} → ${state}: a transaction the provider holds for it changed that (see recon ops show ${op.id})`
      : op.state === 'needs_review'
        ? 'needs_review: recorded as evidence; only a person resolves it'
        : `${op.state}: the rule decides only unresolved operations; the lookup is recorded as evidence, the state stays`;
  return {
    operation: await getOperation(ctx.db, op.id),
    before: op.state,
    lookup,
    decision: null,
    wrote: 'evidence',
    note,
    linked: await transactionsOf(ctx.db, op.id),
  };
}

/**
 * `lookup --client-ref R --provider P`: the provider's transactions carrying that reference, and,
 * when recon has an operation with it, the look-alikes on its charge (same amount, no recon
 * metadata: a refund made by hand in the dashboard).
 */
export async function lookupClientReference(
  ctx: CoreContext | null,
  provider: Provider,
  q: { clientReference?: string; key?: string; since?: Date },
): Promise<{ lookup: LookupResult; operations: Operation[] }> {
  const operations =
    ctx && q.clientReference
      ? await listOperations(ctx.db, { clientReference: q.clientReference, provider: provider.name, limit: 20 })
      : [];
  const payload = operations[0]?.payload;
  const lookup = await provider.lookup({
    idempotency_key: q.key,
    operation_id: q.key,
    client_reference: q.clientReference,
    since: q.since,
    ...(payload ? { payload } : {}),
  });
  return { lookup, operations };
}
