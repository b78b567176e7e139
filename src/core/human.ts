import { NotFoundError, ProviderUnavailableError, RefusedError, UsageError } from '../errors.js';
import type { Operation, Provider, ProviderTxn, State } from '../types.js';
import type { CoreContext } from './context.js';
import { getOperation, lockOperation, rowToOperation, transactionsOf, type OperationRow } from './operations.js';
import { txnMismatches } from './match.js';
import { lookupQueryFor } from './reconcile.js';
import { canTransition, isInFlight, judgedState } from './states.js';
import { linkTransaction } from './links.js';
import { note } from './note.js';
import { transition } from './transition.js';

/** What a human may see before attaching: the transaction and how it disagrees with the operation. */
export interface AttachCheck {
  operation: Operation;
  txn: ProviderTxn;
  problems: string[];
  to: State;
}

/** `--force --reason TEXT`: a decision made although recon's checks disagree, and why. */
export interface Force {
  force?: boolean;
  reason?: string;
}

/** A forced decision without its reason is a usage error: the reason goes into the audit trail. */
export function checkForce(o: Force): Force {
  if (o.force && !o.reason) throw new UsageError('--reason: required with --force (it goes into the audit trail)');
  return o;
}

/**
 * Fetches TXN from the provider and checks amount, currency and `recon_operation_id` (SPEC §7):
 * a transaction that disagrees is refused (exit 4) unless forced, before anyone is asked to confirm.
 */
export async function checkAttach(
  ctx: CoreContext,
  provider: Provider,
  id: string,
  txnId: string,
  o: Force = {},
): Promise<AttachCheck> {
  const operation = await getOperation(ctx.db, id);
  const txn = await provider.get(txnId);
  if (!txn) throw new NotFoundError(`transaction ${txnId} not found at provider ${provider.name}`);
  const problems = txnMismatches(operation, txn);
  const to: State = txn.state;
  if (!canTransition(operation.state, to, { by: 'person' })) {
    throw new RefusedError(
      `operation ${id} is ${operation.state}; attaching a ${txn.status} transaction would make it ${to}, which is not allowed`,
      'state_machine',
    );
  }
  refuseAttachUnlessForced(problems, txn, operation, o);
  return { operation, txn, problems, to };
}

function refuseAttachUnlessForced(problems: string[], txn: ProviderTxn, op: Operation, o: Force): void {
  refuseUnlessForced(problems, o, `${txn.provider_id} does not match ${op.id}`, 'attach', 'attach.mismatch');
}

export async function attach(ctx: CoreContext, provider: Provider, check: AttachCheck, o: Force): Promise<Operation> {
  refuseAttachUnlessForced(check.problems, check.txn, check.operation, o);
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const r = await linkTransaction(tx, provider.name, check.operation.id, check.txn, {
      via: 'attach',
      by: ctx.actor,
      at: now,
    });
    if (!r.linked)
      throw new RefusedError(
        `${check.txn.provider_id} is already linked to operation ${r.existingOperation}`,
        'attach.linked_elsewhere',
      );
    const { op } = await transition(tx, check.operation.id, check.to, {
      actor: ctx.actor,
      now,
      by: 'person',
      kind: 'attached',
      rule: check.problems.length ? 'human.attach.forced' : 'human.attach',
      detail: {
        provider_id: check.txn.provider_id,
        provider_status: check.txn.status,
        problems: check.problems,
        reason: o.reason ?? null,
      },
    });
    return op;
  });
}

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
    const judged = judgedState(current.state);
    if (judged !== current.state) {
      await transition(tx, id, judged, {
        actor: ctx.actor,
        now,
        kind: 'lease.expired',
        rule: 'lease.expired',
        detail: {},
      });
    }
    const { op } = await transition(tx, id, 'needs_review', {
      actor: ctx.actor,
      now,
      kind: 'escalated',
      rule: 'human.escalate',
      review_reason: o.reason,
      assignee: o.assignee ?? null,
      detail: { reason: o.reason, assignee: o.assignee ?? null },
    });
    return op;
  });
}

export type ReviewOutcome = 'confirmed' | 'failed' | 'cancelled';

/** What a person is shown before resolving a review, and why recon would refuse it. */
export interface ResolveCheck {
  operation: Operation;
  outcome: ReviewOutcome;
  /** `--txn`, fetched from the provider. */
  txn: ProviderTxn | null;
  /** Disagreements that refuse the decision unless forced (`--force --reason`). */
  problems: string[];
}

/**
 * The checks of `review resolve` (SPEC §7), the same as `attach`'s: `--outcome confirmed --txn`
 * fetches the transaction and compares amount, currency and operation metadata; `failed` or
 * `cancelled` asks the provider whether it holds a transaction for the operation (a refund that
 * exists did happen). Read-only at the provider.
 */
export async function checkResolve(
  ctx: CoreContext,
  provider: Provider,
  id: string,
  o: { outcome: ReviewOutcome; txnId?: string },
): Promise<ResolveCheck> {
  const operation = await getOperation(ctx.db, id);
  const problems: string[] = [];
  let txn: ProviderTxn | null = null;
  if (o.txnId) {
    txn = await provider.get(o.txnId);
    if (!txn) throw new NotFoundError(`transaction ${o.txnId} not found at provider ${provider.name}`);
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
    const linked = await transactionsOf(ctx.db, id);
    const held = new Map<string, string>();
    for (const t of [...lookup.matches, ...linked]) if (t.state !== 'failed') held.set(t.provider_id, t.status);
    if (held.size)
      problems.push(
        `the provider holds ${[...held].map(([pid, status]) => `${pid} (${status})`).join(', ')} for this operation`,
      );
  }
  return { operation, outcome: o.outcome, txn, problems };
}

/** Refuses (exit 4) when there are problems, unless forced with a reason for the audit trail. */
function refuseUnlessForced(problems: string[], o: Force, what: string, doIt: string, rule: string): void {
  checkForce(o);
  if (problems.length && !o.force)
    throw new RefusedError(`${what}: ${problems.join('; ')}; use --force --reason TEXT to ${doIt} anyway`, rule);
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
      now,
      by: 'person',
      kind: 'review.resolved',
      rule: check.problems.length ? 'human.review.forced' : 'human.review',
      detail: {
        note: o.note,
        outcome: check.outcome,
        provider_id: check.txn?.provider_id ?? null,
        review_reason: current.review_reason,
        ...(check.problems.length ? { problems: check.problems, reason: o.reason ?? null } : {}),
      },
    });
    return op;
  });
}
