import type { LookupResult, Operation, Provider } from '../../types.js';
import { exitCodeOf } from '../../errors.js';
import { decisionJson, type Applied, type DecisionJson } from '../journal/decision-json.js';
import { historiesOf, type History } from '../journal/history.js';
import { planDecision, type PlannedDecision } from './plan.js';
import { applyDecisions } from './write-decisions.js';
import type { ClaimedOperation } from '../attempt/claims.js';
import type { CoreContext } from '../journal/context.js';
import { claimOne, newOwnerToken, releaseLease } from '../attempt/claims.js';
import { submitOperation } from '../attempt/submit.js';
import { judgedState } from '../journal/states.js';
import { unavailableLookup } from '../found/lookup-result.js';
import { writeLeaseExpired } from '../journal/lease.js';

export interface ReconcileOptions {
  /** Our lease token on `op` (from claimForRun), re-checked on every write. */
  owner: string;
  /** The decision only: nothing written, nothing sent (`recon run --dry-run`). */
  dryRun?: boolean;
  /** The operation's history, when the caller read it already (`recon run` reads a batch's at once). */
  history?: History;
  /** How the decision is written; default: on its own. `recon run` passes its group writer. */
  write?: (plan: PlannedDecision) => Promise<Applied>;
  /** Wraps each provider call (the lookup, the retry's submit): `recon run`'s concurrency limit. */
  limited?: <T>(call: () => Promise<T>) => Promise<T>;
  /**
   * Asked as the decision is written (alone, not with `write`): an event to write in the decision's
   * own statement (PlannedDecision.note), e.g. the `mcp.call` of the agent's check that made it, so
   * a crash cannot keep the decision and lose the record of the call (SPEC §9); none when that call
   * is recorded already (with an expired lease's move, written first).
   */
  note?: () => PlannedDecision['note'];
}

/**
 * Reconciles one claimed operation (SPEC §4): lookup and rule (lookUpAndDecide: a `submitting` left
 * by a crashed worker becomes outcome_unknown first), then the decision written with the observation
 * and the audit event (alone, or in `recon run`'s groups: `o.write`); a retry then goes through the
 * normal attempt phases with the original key and payload. With `dryRun`, the lookup and the rule only.
 */
export async function reconcileOne(
  ctx: CoreContext,
  provider: Provider,
  claimed: Operation,
  o: ReconcileOptions,
): Promise<DecisionJson> {
  const limited = o.limited ?? ((call) => call());
  const plan = await lookUpAndDecide(ctx, provider, claimed, o);
  if (o.dryRun) return decisionJson(plan.op.id, plan.ruling);
  const applied = o.write
    ? await o.write(plan)
    : (await applyDecisions(ctx, [o.note ? { ...plan, note: o.note() } : plan], o.owner))[0];
  if (!applied.ok) throw applied.error;
  if (plan.ruling.decision !== 'retry') return applied.json;
  // The attempt the decision authorised: the original key and payload, through the normal attempt phases.
  return limited(async () => {
    const r = await submitOperation(ctx, provider, plan.op.id, {
      from: 'outcome_unknown',
      rule: applied.json.rule,
      detail: { explanation: applied.json.explanation },
      owner: o.owner,
      heldLease: o.owner,
    });
    return { ...applied.json, state: r.operation.state, attempt: r.attempt };
  });
}

/**
 * The lookup and the rule for one operation, nothing of the decision written: what reconcileOne
 * writes, `recon lookup` records and `recon retry --dry-run` prints. A `submitting` left by a crashed
 * worker (its lease expired) is judged as outcome_unknown (SPEC §3); claimed (`o.owner`, not a dry
 * run), it is first recorded so (writeLeaseExpired), under our lease. The history (unless the caller
 * read it) is read while the provider answers: the store round trips need not add to the lookup's,
 * and the lookup's own observation, written only afterwards, is not in it.
 */
export async function lookUpAndDecide(
  ctx: CoreContext,
  provider: Provider,
  claimed: Operation,
  o: Pick<ReconcileOptions, 'dryRun' | 'history' | 'limited'> & { owner?: string } = {},
): Promise<PlannedDecision> {
  const { owner } = o;
  const op =
    o.dryRun || !owner || judgedState(claimed.state) === claimed.state
      ? claimed
      : await ctx.db.transaction((tx) =>
          // The crashed worker's lease, not ours: claimForRun/claimOne return both.
          writeLeaseExpired(tx, claimed, (claimed as ClaimedOperation).previous_lease_expires_at, {
            actor: ctx.actor,
            auditKey: ctx.auditKey,
            now: ctx.now(),
            leaseOwner: owner,
            keepLease: { owner, expiresAt: claimed.lease_expires_at! },
          }),
        );
  const limited = o.limited ?? ((call) => call());
  const [lookup, history] = await Promise.all([
    limited(() => safeLookup(provider, op)),
    o.history ?? historiesOf(ctx.db, [op]).then((h) => h.get(op.id)!),
  ]);
  return planDecision(ctx, provider, op, lookup, history);
}

/** The lookup, never throwing for provider trouble: an adapter that throws is `unavailable`. */
export async function safeLookup(provider: Provider, op: Operation): Promise<LookupResult> {
  try {
    return await provider.lookup(lookupQueryFor(op));
  } catch (err) {
    // A refused key (exit 2) is a configuration error for the whole command, not an observation.
    if (exitCodeOf(err) === 2) throw err;
    return unavailableLookup(err instanceof Error ? err.message : String(err));
  }
}

export function lookupQueryFor(op: Operation) {
  return {
    operation_id: op.id,
    idempotency_key: op.idempotency_key,
    client_reference: op.client_reference ?? undefined,
    payload: op.payload,
    recorded_at: op.created_at,
  };
}

/**
 * One reconciliation step for one operation, now (`recon retry ID`, the agent's `check_action`):
 * claims it under the provider's lease and reconciles it as `recon run` would. null when it is not
 * claimable: another worker holds it, or it is not unresolved (needs_review is left to people).
 */
export async function reconcileById(
  ctx: CoreContext,
  provider: Provider,
  id: string,
  o: Pick<ReconcileOptions, 'note'> = {},
): Promise<DecisionJson | null> {
  const owner = newOwnerToken(ctx.actor);
  const claimed = await claimOne(ctx.db, id, { owner, leaseMs: provider.capabilities.leaseMs, now: ctx.now() });
  if (!claimed) return null;
  try {
    return await reconcileOne(ctx, provider, claimed, { owner, note: o.note });
  } catch (err) {
    await releaseLease(ctx.db, id, owner).catch(() => undefined);
    throw err;
  }
}
