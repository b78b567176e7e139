import type { Queryable } from '../../store/db.js';
import type { LinkedVia, LookupResult, Operation, Provider, ProviderTxn, State } from '../../types.js';
import type { AuditKey } from '../../lib/keyed-hash.js';
import { lookupDetail } from '../journal/decision-json.js';
import type { CoreContext } from '../journal/context.js';
import { classifyFound } from './classify.js';
import { lockOperation, transactionsOf } from '../journal/operations.js';
import { canTransition, isInFlight, isTerminal, judgedState } from '../journal/states.js';
import { linkTransaction } from '../journal/links.js';
import { note } from '../journal/note.js';
import { recordObservation } from '../journal/observations.js';
import { transition } from '../journal/transition.js';
import { writeLeaseExpired } from '../journal/lease.js';

/** Where a transaction was found outside the rule's own decisions. */
export type FoundSource = 'webhook' | 'late_response' | 'lookup';

export interface FoundEffect {
  /** `transitioned` (the operation moved) or `noted` (linked and/or recorded as evidence only). */
  effect: 'transitioned' | 'noted';
  state: State;
  linked: boolean;
}

/**
 * What a provider transaction found outside a decision of the rule — a webhook, a late submit
 * response — does to its operation (SPEC §3), in the caller's transaction, under the row lock:
 *
 * - it is linked (unless another operation holds it) and recorded as an audit event, always;
 * - an operation in `needs_review` never moves: only a person leaves it (it is evidence);
 * - a second live transaction (not `failed`) for an operation that has one already is a duplicate
 *   side effect: `needs_review`, reason `duplicate`, even from `confirmed`;
 * - a transaction that disagrees with the operation (amount, currency, metadata): `needs_review`,
 *   reason `mismatch`, never confirmed;
 * - otherwise an unresolved operation follows the transaction's state; an attempt in flight owns
 *   its operation until it finishes, and a terminal one stays where it is.
 */
export async function applyFoundTransaction(
  tx: Queryable,
  locked: Operation,
  provider: string,
  txn: ProviderTxn,
  o: {
    source: FoundSource;
    via: LinkedVia;
    actor: string;
    auditKey?: AuditKey | null;
    now: Date;
    detail?: Record<string, unknown>;
  },
): Promise<FoundEffect> {
  const before = await transactionsOf(tx, locked.id);
  const link = await linkTransaction(tx, provider, locked.id, txn, { via: o.via, by: o.actor, at: o.now });
  const detail = {
    ...(o.detail ?? {}),
    provider_id: txn.provider_id,
    provider_status: txn.status,
    linked: link.linked,
    ...(link.linked ? {} : { linked_to: link.existingOperation }),
  };
  const move = link.linked ? decideFound(locked, txn, before, o.now) : null;
  if (!move) {
    await note(tx, locked.id, {
      actor: o.actor,
      auditKey: o.auditKey,
      now: o.now,
      kind: `${o.source}.received`,
      rule: null,
      detail,
    });
    return { effect: 'noted', state: locked.state, linked: link.linked };
  }
  if (locked.state === 'submitting') {
    await writeLeaseExpired(tx, locked, locked.lease_expires_at, { actor: o.actor, auditKey: o.auditKey, now: o.now });
  }
  await transition(tx, locked.id, move.to, {
    actor: o.actor,
    auditKey: o.auditKey,
    now: o.now,
    kind: `${o.source}.applied`,
    rule: `${o.source}.${move.rule}`,
    review_reason: move.review_reason,
    detail: move.problems.length ? { ...detail, problems: move.problems } : detail,
  });
  return { effect: 'transitioned', state: move.to, linked: true };
}

/** The move a found (and linked) transaction makes, or null for evidence only. */
function decideFound(
  op: Operation,
  txn: ProviderTxn,
  linkedBefore: { provider_id: string; state: string }[],
  now: Date,
): { to: State; rule: string; review_reason: string | null; problems: string[] } | null {
  if (op.state === 'needs_review') return null;
  if (isInFlight(op, now)) return null;
  // Which reason wins, and which new transaction counts for a resolved operation: classifyFound.
  const found = classifyFound(op, [txn], linkedBefore)!;
  const reason = found.review_reason;
  if (reason) {
    // The state machine (states.ts) says which states a job may move to review, and for which reason.
    if (!canTransition(op.state, 'needs_review', { review_reason: reason })) return null;
    return { to: 'needs_review', rule: reason, review_reason: reason, problems: found.problems };
  }
  if (isTerminal(op.state) || op.state === 'approved') return null;
  const from = judgedState(op.state);
  if (from === txn.state || !canTransition(from, txn.state)) return null;
  return { to: txn.state, rule: txn.state, review_reason: null, problems: [] };
}

/**
 * `recon lookup ID` for an operation the rule does not decide (SPEC §7: lookup works in any state):
 * records the observation, and each transaction found that carries the operation and is not linked
 * yet goes through applyFoundTransaction: evidence for one in needs_review, a duplicate for a
 * confirmed one (SPEC §3). Returns the state after.
 */
export async function applyLookupFindings(
  ctx: CoreContext,
  provider: Provider,
  op: Operation,
  lookup: LookupResult,
): Promise<State> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    let locked = await lockOperation(tx, op.id);
    await recordObservation(tx, op.id, { at: now, result: lookup.result, detail: lookupDetail(lookup) });
    await note(tx, op.id, {
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      kind: 'lookup',
      rule: null,
      detail: lookupDetail(lookup),
    });
    // An unavailable lookup proves nothing, not even its partial matches.
    if (lookup.result === 'unavailable') return locked.state;
    const linked = new Set((await transactionsOf(tx, op.id)).map((t) => t.provider_id));
    for (const txn of lookup.matches) {
      if (linked.has(txn.provider_id)) continue;
      linked.add(txn.provider_id);
      await applyFoundTransaction(tx, locked, provider.name, txn, {
        source: 'lookup',
        via: 'lookup',
        actor: ctx.actor,
        auditKey: ctx.auditKey,
        now,
      });
      locked = await lockOperation(tx, op.id);
    }
    return locked.state;
  });
}
