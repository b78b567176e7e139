import { NotFoundError, RefusedError, UsageError } from '../errors.js';
import type { Operation, Provider, ProviderTxn, State } from '../types.js';
import type { CoreContext } from './context.js';
import { getOperation, lockOperation, transactionsOf } from './repo.js';
import { canTransition } from './states.js';
import { linkTransaction, transition } from './transition.js';

/** What a human may see before attaching: the transaction and how it disagrees with the operation. */
export interface AttachCheck {
  operation: Operation;
  txn: ProviderTxn;
  problems: string[];
  to: State;
}

/** Fetches TXN from the provider and checks amount, currency and `recon_operation_id`. */
export async function checkAttach(
  ctx: CoreContext,
  provider: Provider,
  id: string,
  txnId: string,
): Promise<AttachCheck> {
  const operation = await getOperation(ctx.db, id);
  const txn = await provider.get(txnId);
  if (!txn) throw new NotFoundError(`transaction ${txnId} not found at provider ${provider.name}`);
  const problems: string[] = [];
  if (operation.amount !== null && txn.amount !== null && txn.amount !== operation.amount)
    problems.push(`amount ${txn.amount} ≠ ${operation.amount}`);
  if (operation.currency && txn.currency && txn.currency.toLowerCase() !== operation.currency)
    problems.push(`currency ${txn.currency} ≠ ${operation.currency}`);
  if (txn.operation_id && txn.operation_id !== operation.id)
    problems.push(`its recon_operation_id is ${txn.operation_id}`);
  const to: State = txn.state;
  if (!canTransition(operation.state, to)) {
    throw new RefusedError(
      `operation ${id} is ${operation.state}; attaching a ${txn.status} transaction would make it ${to}, which is not allowed`,
      'state_machine',
    );
  }
  return { operation, txn, problems, to };
}

export async function attach(
  ctx: CoreContext,
  provider: Provider,
  check: AttachCheck,
  o: { force?: boolean; reason?: string },
): Promise<Operation> {
  if (check.problems.length && !o.force) {
    throw new RefusedError(
      `${check.txn.provider_id} does not match ${check.operation.id}: ${check.problems.join('; ')}; use --force --reason TEXT to attach anyway`,
      'attach.mismatch',
    );
  }
  if (o.force && !o.reason) throw new UsageError('--reason: required with --force (it goes into the audit trail)');
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
    if (current.state === 'submitting' && current.lease_expires_at && current.lease_expires_at > now) {
      throw new RefusedError(
        `operation ${id} has an attempt in flight (lease until ${current.lease_expires_at.toISOString()}); escalate it after the attempt ends`,
        'lease_held',
      );
    }
    if (current.state === 'submitting') {
      await transition(tx, id, 'outcome_unknown', {
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

/** A human decision on a needs_review operation: an audit event with the note and the actor. */
export async function resolveReview(
  ctx: CoreContext,
  id: string,
  o: { outcome: ReviewOutcome; note: string; txn?: ProviderTxn; provider?: Provider },
): Promise<Operation> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const current = await lockOperation(tx, id);
    if (current.state !== 'needs_review') {
      throw new RefusedError(
        `operation ${id} is ${current.state}; only needs_review operations are resolved by review`,
        'state_machine',
      );
    }
    if (o.txn && o.provider) {
      const r = await linkTransaction(tx, o.provider.name, id, o.txn, { via: 'attach', by: ctx.actor, at: now });
      if (!r.linked)
        throw new RefusedError(
          `${o.txn.provider_id} is already linked to operation ${r.existingOperation}`,
          'attach.linked_elsewhere',
        );
    }
    if (o.outcome === 'confirmed' && !o.txn && (await transactionsOf(tx, id)).length === 0) {
      throw new UsageError('--txn: required to confirm an operation with no linked provider transaction');
    }
    const { op } = await transition(tx, id, o.outcome, {
      actor: ctx.actor,
      now,
      kind: 'review.resolved',
      rule: 'human.review',
      detail: {
        note: o.note,
        outcome: o.outcome,
        provider_id: o.txn?.provider_id ?? null,
        review_reason: current.review_reason,
      },
    });
    return op;
  });
}
