import type { Queryable } from '../store/db.js';
import type { Decision, LookupResult, Operation, Provider, ProviderTxn } from '../types.js';
import { payloadHash } from './canonical.js';
import type { CoreContext } from './context.js';
import { backoffDelay } from './ratelimit.js';
import { observationsOf } from './repo.js';
import { decide } from './rule.js';
import { submitOperation } from './submit.js';
import { linkTransaction, note, recordObservation, transition } from './transition.js';

/** The JSON shape of a `retry`/`run` decision (SPEC §7). */
export interface DecisionJson {
  id: string;
  decision: Decision['decision'];
  rule: string;
  state: string;
  explanation: string;
  review_reason?: string;
  provider_txn_ids?: string[];
  attempt?: number;
}

export function lookupQueryFor(op: Operation) {
  return { operation_id: op.id, idempotency_key: op.idempotency_key, client_reference: op.client_reference ?? undefined, payload: op.payload };
}

/** The lookup, never throwing for provider trouble: an adapter that throws is `unavailable`. */
export async function safeLookup(provider: Provider, op: Operation): Promise<LookupResult> {
  try {
    return await provider.lookup(lookupQueryFor(op));
  } catch (err) {
    return { result: 'unavailable', matches: [], candidates: [], error: err instanceof Error ? err.message : String(err) };
  }
}

export function lookupDetail(l: LookupResult): Record<string, unknown> {
  return {
    result: l.result,
    matches: l.matches.map(txnSummary),
    candidates: l.candidates.map(txnSummary),
    ...(l.error ? { error: l.error } : {}),
  };
}

function txnSummary(t: ProviderTxn) {
  return { provider_id: t.provider_id, status: t.status, amount: t.amount, currency: t.currency, operation_id: t.operation_id };
}

async function lastAttemptStart(q: Queryable, id: string): Promise<Date | null> {
  const r = await q.query<{ started_at: Date }>('SELECT started_at FROM recon.attempts WHERE operation_id = $1 ORDER BY number DESC LIMIT 1', [id]);
  return r.rows[0]?.started_at ?? null;
}

/** Runs the rule for `op` against a fresh lookup, without writing anything. */
export async function evaluate(ctx: CoreContext, provider: Provider, op: Operation, lookup?: LookupResult) {
  // The history is read while the provider answers: `recon run` spends most of its time waiting
  // on lookups, and the store round trips need not add to it. The lookup's own observation is
  // written only afterwards, so the history is still "before this one".
  const [l, history, lastAttemptAt] = await Promise.all([
    lookup ?? safeLookup(provider, op),
    observationsOf(ctx.db, op.id),
    // With one attempt, it started at first_attempt_at (claimAttempt writes both from one clock
    // reading): the query is only needed for retried operations.
    op.attempt_count > 1 ? lastAttemptStart(ctx.db, op.id) : Promise.resolve(op.first_attempt_at),
  ]);
  const subject = op.state === 'submitting' ? { ...op, state: 'outcome_unknown' as const } : op;
  const decision = decide({
    operation: subject,
    retryPayloadHash: payloadHash(op.payload),
    history,
    lookup: l,
    capabilities: provider.capabilities,
    now: ctx.now(),
    lastAttemptAt,
  });
  return { lookup: l, decision };
}

export interface ReconcileOptions {
  /** Our lease token on `op` (from claimForRun), re-checked on every write. */
  owner: string;
  /** When false, a `retry` decision is recorded but no attempt is made (used by `retry --dry-run`-like callers). */
  allowRetry?: boolean;
}

/**
 * Reconciles one claimed operation (SPEC §4): a `submitting` left by a crashed worker becomes
 * outcome_unknown first; then lookup, rule, and the decision applied in one transaction with the
 * observation and the audit event; a retry then goes through the normal attempt phases with the
 * original key and payload.
 */
export async function reconcileOne(ctx: CoreContext, provider: Provider, claimed: Operation, o: ReconcileOptions): Promise<DecisionJson> {
  let op = claimed;
  if (op.state === 'submitting') {
    op = await ctx.db.transaction(async (tx) =>
      (
        await transition(tx, op.id, 'outcome_unknown', {
          actor: ctx.actor,
          now: ctx.now(),
          kind: 'lease.expired',
          rule: 'lease.expired',
          detail: { note: 'the submitting worker did not finish (crash or kill); outcome unknown, never failed', previous_lease_expired_at: claimed.lease_expires_at?.toISOString() ?? null },
          leaseOwner: o.owner,
          keepLease: { owner: o.owner, expiresAt: claimed.lease_expires_at! },
        })
      ).op,
    );
  }
  const { lookup, decision } = await evaluate(ctx, provider, op);
  const applied = await applyDecision(ctx, provider, op, lookup, decision, o.owner);
  if (decision.decision === 'retry' && o.allowRetry !== false) {
    const r = await submitOperation(ctx, provider, op.id, {
      from: 'outcome_unknown',
      rule: decision.rule,
      detail: { explanation: decision.explanation },
      owner: o.owner,
      heldLease: o.owner,
    });
    return { ...applied, state: r.operation.state, attempt: r.attempt };
  }
  return applied;
}

async function applyDecision(
  ctx: CoreContext,
  provider: Provider,
  op: Operation,
  lookup: LookupResult,
  d: Decision,
  owner: string,
): Promise<DecisionJson> {
  const now = ctx.now();
  const unavailableStreak = d.decision === 'unavailable' ? await trailingUnavailable(ctx.db, op.id) : 0;
  await ctx.db.transaction(async (tx) => {
    await recordObservation(tx, op.id, { at: now, result: lookup.result, detail: lookupDetail(lookup) });
    for (const t of d.link ?? []) {
      const r = await linkTransaction(tx, provider.name, op.id, t, { via: 'lookup', by: ctx.actor, at: now });
      if (!r.linked) d = { ...d, explanation: `${d.explanation}; ${t.provider_id} is already linked to ${r.existingOperation}` };
    }
    const detail = { explanation: d.explanation, lookup: lookupDetail(lookup) };
    if (d.decision === 'retry') {
      // Only the authorisation is audited here; `submitting` is entered by the attempt itself (claimAttempt).
      await note(tx, op.id, { actor: ctx.actor, now, kind: 'retry.authorised', rule: d.rule, detail, leaseOwner: owner });
    } else if (d.state !== op.state) {
      await transition(tx, op.id, d.state, {
        actor: ctx.actor,
        now,
        kind: 'reconcile.decision',
        rule: d.rule,
        detail,
        review_reason: d.review_reason ?? null,
        leaseOwner: owner,
      });
    } else {
      await note(tx, op.id, { actor: ctx.actor, now, kind: `reconcile.${d.decision}`, rule: d.rule, detail, leaseOwner: owner });
      if (d.decision === 'unavailable') {
        // Back off a provider that is down, bounded by its uncertainty window so short test windows stay short.
        const delay = backoffDelay(unavailableStreak, { baseMs: Math.min(5_000, provider.capabilities.uncertaintyWindowMs / 2), maxMs: 15 * 60_000 });
        await tx.query('UPDATE recon.operations SET next_check_at = $2::timestamptz WHERE id = $1', [op.id, new Date(now.getTime() + delay).toISOString()]);
      }
      await tx.query('UPDATE recon.operations SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_owner = $2', [op.id, owner]);
    }
  });
  return decisionJson(op.id, d);
}

export function decisionJson(id: string, d: Decision): DecisionJson {
  return {
    id,
    decision: d.decision,
    rule: d.rule,
    state: d.state,
    explanation: d.explanation,
    ...(d.review_reason ? { review_reason: d.review_reason } : {}),
    ...(d.link?.length ? { provider_txn_ids: d.link.map((t) => t.provider_id) } : {}),
  };
}

async function trailingUnavailable(q: Queryable, id: string): Promise<number> {
  const obs = await observationsOf(q, id);
  let n = 0;
  for (let i = obs.length - 1; i >= 0 && obs[i].result === 'unavailable'; i--) n++;
  return n;
}
