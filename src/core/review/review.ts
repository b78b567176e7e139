import { NotFoundError, ProviderUnavailableError, RefusedError, UsageError } from '../../errors.js';
import type { Operation, Provider, ProviderTxn } from '../../types.js';
import type { CoreContext } from '../journal/context.js';
import { refuseUnlessForced, type Force } from './force.js';
import { isLive, txnMismatches } from '../found/match.js';
import { getOperation, lockOperation, transactionsOf } from '../journal/operations.js';
import { lookupQueryFor } from '../reconcile/reconcile.js';
import { linkTransaction } from '../journal/links.js';
import { transition } from '../journal/transition.js';
import type { ReviewOutcome } from '../journal/states.js';

/** What a person is shown before resolving a review, and why recon would refuse it. */
export interface ResolveCheck {
  operation: Operation;
  outcome: ReviewOutcome;
  /** `--txn`, fetched from the provider. */
  txn: ProviderTxn | null;
  /** Disagreements that refuse the decision unless forced (`--force --reason`). */
  problems: string[];
  /**
   * The transactions the decision was judged on, as the provider answered just now (never recon's
   * stored copy): recorded with the person's decision.
   */
  seen: { provider_id: string; status: string | null; state: string | null }[];
}

/**
 * The checks of `review resolve` (SPEC §7), the same as `attach`'s: `--outcome confirmed --txn`
 * fetches the transaction and compares amount, currency and operation metadata; `failed` or
 * `cancelled` asks the provider whether it holds a transaction for the operation (a refund that
 * exists did happen), and fetches every linked transaction afresh: the decision is judged on what
 * the provider holds now, never on recon's stored copy. Read-only at the provider.
 */
export async function checkResolve(
  ctx: CoreContext,
  provider: Provider,
  id: string,
  o: { outcome: ReviewOutcome; txnId?: string },
): Promise<ResolveCheck> {
  const operation = await getOperation(ctx.db, id);
  const problems: string[] = [];
  const seen: ResolveCheck['seen'] = [];
  let txn: ProviderTxn | null = null;
  if (o.txnId) {
    txn = await provider.get(o.txnId);
    if (!txn) throw new NotFoundError(`transaction ${o.txnId} not found at provider ${provider.name}`);
    seen.push({ provider_id: txn.provider_id, status: txn.status, state: txn.state });
    problems.push(...txnMismatches(operation, txn));
    if (o.outcome === 'confirmed' && txn.state !== 'confirmed')
      problems.push(`status (${txn.status}: ${txn.state}, not confirmed)`);
  }
  if (o.outcome !== 'confirmed') {
    const lookup = await provider.lookup(lookupQueryFor(operation));
    if (lookup.result === 'unavailable')
      throw new ProviderUnavailableError(
        `${provider.name}: cannot check whether it holds a transaction for ${id} (${lookup.error ?? 'unavailable'}); try again, or use --force --reason TEXT`,
      );
    // The linked transactions as the provider holds them now: a stored copy may be stale (a refund
    // recon saw pending has failed since), and a person is never refused on a stale copy.
    const fresh = new Map<string, ProviderTxn | null>(lookup.matches.map((t) => [t.provider_id, t]));
    for (const t of await transactionsOf(ctx.db, id)) {
      if (fresh.has(t.provider_id)) continue;
      let got: ProviderTxn | null;
      try {
        got = await provider.get(t.provider_id);
      } catch (err) {
        throw new ProviderUnavailableError(
          `${provider.name}: cannot fetch ${t.provider_id}, linked to ${id} (${(err as Error).message}); try again, or use --force --reason TEXT`,
        );
      }
      fresh.set(t.provider_id, got);
    }
    const held = new Map<string, string>();
    for (const [pid, t] of fresh) {
      seen.push({ provider_id: pid, status: t?.status ?? null, state: t?.state ?? null });
      if (t && isLive(t)) held.set(pid, t.status);
    }
    if (held.size)
      problems.push(
        `the provider holds ${[...held].map(([pid, status]) => `${pid} (${status})`).join(', ')} for this operation`,
      );
  }
  return { operation, outcome: o.outcome, txn, problems, seen };
}

/** A person's decision on a needs_review operation: an audit event with the note, the actor and any forced problems. */
export async function resolveReview(
  ctx: CoreContext,
  provider: Provider | undefined,
  check: ResolveCheck,
  o: Force & { note: string },
): Promise<Operation> {
  const id = check.operation.id;
  refuseUnlessForced(check.problems, o, `${id} cannot be resolved ${check.outcome}`, 'resolve it', 'review.mismatch');
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const current = await lockOperation(tx, id);
    if (current.state !== 'needs_review') {
      throw new RefusedError(
        `operation ${id} is ${current.state}; only needs_review operations are resolved by review`,
        'state_machine',
      );
    }
    if (check.txn && provider) {
      const r = await linkTransaction(tx, provider.name, id, check.txn, { via: 'attach', by: ctx.actor, at: now });
      if (!r.linked)
        throw new RefusedError(
          `${check.txn.provider_id} is already linked to operation ${r.existingOperation}`,
          'attach.linked_elsewhere',
        );
    }
    if (check.outcome === 'confirmed' && !check.txn && (await transactionsOf(tx, id)).length === 0) {
      throw new UsageError('--txn: required to confirm an operation with no linked provider transaction');
    }
    const { op } = await transition(tx, id, check.outcome, {
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      by: 'person',
      kind: 'review.resolved',
      rule: check.problems.length ? 'human.review.forced' : 'human.review',
      detail: {
        note: o.note,
        outcome: check.outcome,
        provider_id: check.txn?.provider_id ?? null,
        review_reason: current.review_reason,
        // What the provider held when the person decided (null status: the provider has no such transaction).
        provider_seen: check.seen,
        ...(check.problems.length ? { problems: check.problems, reason: o.reason ?? null } : {}),
      },
    });
    return op;
  });
}
