import { keepPlan, type Queryable } from '../../store/db.js';
import type { LinkedVia, LookupResult, Operation, Provider, ProviderTxn, State } from '../../types.js';
import type { AuditKey } from '../../lib/keyed-hash.js';
import { lookupDetail } from '../journal/decision-json.js';
import type { CoreContext } from '../journal/context.js';
import { classifyFound } from './classify.js';
import { lockOperation, transactionsOf } from '../journal/operations.js';
import { canTransition, isInFlight, isTerminal, judgedState } from '../journal/states.js';
import { linkTransactions } from '../journal/links.js';
import { note } from '../journal/note.js';
import { recordObservation } from '../journal/observations.js';
import { transitionMany, type Move } from '../journal/transition.js';
import { leaseExpiredMove } from '../journal/lease.js';
import { chainEvent, headOf, headSql, insertEvents, type ChainHead } from '../journal/chain.js';

/** Where a transaction was found outside the rule's own decisions. */
type FoundSource = 'webhook' | 'late_response' | 'lookup';

export interface FoundEffect {
  /** `transitioned` (the operation moved) or `noted` (linked and/or recorded as evidence only). */
  effect: 'transitioned' | 'noted';
  state: State;
  linked: boolean;
}

/** Who reports a found transaction and when: the audit events' actor, key and time, the links' `via`. */
interface FoundOptions {
  source: FoundSource;
  via: LinkedVia;
  actor: string;
  auditKey?: AuditKey | null;
  now: Date;
}

/**
 * applyFoundTransactions for one transaction (a late submit response, a lookup's match, a webhook
 * event applied alone), in the caller's transaction under its row lock. Its link is made before it
 * is decided: should another operation have linked the transaction meanwhile, it is noted as linked
 * there (a group would fail instead, and be applied one at a time: through here).
 */
export async function applyFoundTransaction(
  tx: Queryable,
  locked: Operation,
  provider: string,
  txn: ProviderTxn,
  o: FoundOptions & { detail?: Record<string, unknown> },
): Promise<FoundEffect> {
  const { detail, ...rest } = o;
  const [effect] = await applyFound(tx, [{ op: locked, provider, txn, detail }], rest, true);
  return effect;
}

/** One transaction found for an operation, for applyFoundTransactions. */
export interface FoundItem {
  /** The operation, locked by the caller for this transaction (row lock, in id order when several). */
  op: Operation;
  provider: string;
  txn: ProviderTxn;
  /** Added to the audit event's detail (e.g. the webhook event id). */
  detail?: Record<string, unknown>;
}

/**
 * What provider transactions found outside a decision of the rule — a webhook, a late submit
 * response, a lookup — do to their operations (SPEC §3), in the caller's transaction, under the row
 * locks (decideFound):
 *
 * - each is linked (unless another operation holds it) and recorded as an audit event, always;
 * - an operation in `needs_review` never moves: only a person leaves it (it is evidence);
 * - a second live transaction (not `failed`) for an operation that has one already is a duplicate
 *   side effect: `needs_review`, reason `duplicate`, even from `confirmed`;
 * - a transaction that disagrees with the operation (amount, currency, metadata): `needs_review`,
 *   reason `mismatch`, never confirmed;
 * - otherwise an unresolved operation follows the transaction's state (a `submitting` one whose
 *   lease expired is `lease.expired` first); an attempt in flight owns its operation until it
 *   finishes, and a terminal one stays where it is.
 *
 * Many at once (`webhook serve`'s groups of deliveries) in a few statements whatever their number:
 * the chain heads and linked transactions read at once, the links made in one statement, then each
 * round of audit events (one event per operation and round) in one statement for the notes and one
 * for the moves. Items apply in order: a second item for an operation sees the state, links and
 * chain the first one left, as though each were applied in a transaction of its own. Throws when a
 * statement fails, or when a transaction was linked to another operation meanwhile: the caller's
 * transaction must then be rolled back (nothing of it is kept) and the items applied one at a time
 * (applyFoundTransaction).
 */
export async function applyFoundTransactions(
  tx: Queryable,
  items: FoundItem[],
  o: FoundOptions,
): Promise<FoundEffect[]> {
  return applyFound(tx, items, o, false);
}

/**
 * The operations' chain heads (chainHeads' read: a row without a provider for each operation in
 * $1), and the links of the operations ($1) and of the transactions found ($2, $3), in one
 * statement: one round trip fewer in every group of `webhook serve`, whose transaction waits for
 * each. It begins after the caller's row locks, as chainHeads requires.
 *
 * Each link is looked up from its own index (operation_id; the primary key), one lookup per value
 * (OFFSET 0 keeps each subquery a lookup the planner cannot turn into a join): written as one WHERE
 * with OR, the transactions' arm was a filter the planner could only apply to every row, and each
 * webhook group read every link in the store (5 ms a group at 20,000 links, and growing;
 * test/integration/webhook-groups.test.ts). Kept (keepPlan): a lookup's plan does not depend on
 * the values, and planning this statement was ~0.4 ms of PostgreSQL's time per group
 * (pg_stat_statements, npm run bench -- --only webhooks); test/integration/kept-plans.test.ts.
 */
const HEADS_AND_LINKS = keepPlan(`
SELECT i.id AS operation_id, NULL::text AS provider, NULL::text AS provider_id, NULL::text AS state, h.seq, h.hash, h.to_state
  FROM unnest($1::text[]) AS i(id) LEFT JOIN LATERAL (${headSql('i.id')}) h ON true
UNION ALL
SELECT operation_id, provider, provider_id, state, NULL::integer, NULL::text, NULL::text FROM (
  SELECT t.* FROM unnest($1::text[]) AS i(id)
   CROSS JOIN LATERAL (SELECT provider, provider_id, operation_id, state FROM recon.provider_transactions
                        WHERE operation_id = i.id OFFSET 0) AS t
  UNION
  SELECT t.* FROM unnest($2::text[], $3::text[]) AS u(provider, provider_id)
   CROSS JOIN LATERAL (SELECT provider, provider_id, operation_id, state FROM recon.provider_transactions
                        WHERE provider = u.provider AND provider_id = u.provider_id OFFSET 0) AS t) AS l`);

type HeadOrLinkRow =
  | {
      operation_id: string;
      provider: null;
      provider_id: null;
      state: null;
      seq: number | null;
      hash: string | null;
      to_state: State | null;
    }
  | {
      operation_id: string;
      provider: string;
      provider_id: string;
      state: string;
      seq: null;
      hash: null;
      to_state: null;
    };

/** What one item writes to its operation's chain, in order: a note, or a move. */
type Step = { note: { kind: string; detail: Record<string, unknown> } } | { move: Move & { from: State } };

/** A transaction's key among the links: (provider, provider id). */
const txnKey = (provider: string, id: string) => `${provider}\u0000${id}`;

/**
 * applyFoundTransactions; with `linkFirst` (one item: applyFoundTransaction), the item's link is made
 * before it is decided, and what the insert says (linked, or held by another operation) is what
 * the item is decided on, so nothing fails when a transaction was linked elsewhere meanwhile.
 */
async function applyFound(
  tx: Queryable,
  items: FoundItem[],
  o: FoundOptions,
  linkFirst: boolean,
): Promise<FoundEffect[]> {
  if (items.length === 0) return [];
  const ops = new Map<string, Operation>(items.map((it) => [it.op.id, { ...it.op }]));
  // The chains' heads; who holds each transaction (null: another operation, unknown), and what each
  // operation has linked: one read for all.
  const read = await tx.query<HeadOrLinkRow>(HEADS_AND_LINKS, [
    [...ops.keys()],
    items.map((it) => it.provider),
    items.map((it) => it.txn.provider_id),
  ]);
  const heads = new Map<string, ChainHead>();
  const owner = new Map<string, string | null>();
  const linkedTo = new Map<string, { provider_id: string; state: string }[]>([...ops.keys()].map((id) => [id, []]));
  for (const r of read.rows) {
    if (r.provider === null) {
      heads.set(r.operation_id, headOf(r.seq, r.hash, r.to_state));
      continue;
    }
    owner.set(txnKey(r.provider, r.provider_id), r.operation_id);
    linkedTo.get(r.operation_id)?.push({ provider_id: r.provider_id, state: r.state });
  }
  const how = { via: o.via, by: o.actor, at: o.now };
  if (linkFirst) {
    // The one item's link, unless the read shows another operation holding it: what the insert says is decided on.
    const [it] = items;
    const k = txnKey(it.provider, it.txn.provider_id);
    if (!owner.has(k) || owner.get(k) === it.op.id) {
      const [made] = await linkTransactions(tx, [{ provider: it.provider, operationId: it.op.id, txn: it.txn }], how);
      if (!made.linked) owner.set(k, made.existingOperation);
    }
  }
  // Each item in order, on the operations as the items before it left them.
  const toLink = new Map<string, { provider: string; operationId: string; txn: ProviderTxn }>();
  const steps = new Map<string, Step[]>([...ops.keys()].map((id) => [id, []]));
  const effects = items.map((it): FoundEffect => {
    const op = ops.get(it.op.id)!;
    const k = txnKey(it.provider, it.txn.provider_id);
    const held = owner.get(k);
    const link = { linked: held === undefined || held === op.id, existingOperation: held ?? null };
    const before = [...linkedTo.get(op.id)!];
    if (link.linked) {
      owner.set(k, op.id);
      // One row per transaction: its first sighting's figures, its latest status (what a row per item leaves).
      const first = toLink.get(k)?.txn ?? it.txn;
      toLink.set(k, {
        provider: it.provider,
        operationId: op.id,
        txn: { ...first, status: it.txn.status, state: it.txn.state },
      });
      const list = linkedTo.get(op.id)!.filter((t) => t.provider_id !== it.txn.provider_id);
      linkedTo.set(op.id, [...list, { provider_id: it.txn.provider_id, state: it.txn.state }]);
    }
    const detail = foundDetail(it.txn, link, it.detail);
    const move = link.linked ? decideFound(op, it.txn, before, o.now) : null;
    const opSteps = steps.get(op.id)!;
    if (!move) {
      opSteps.push({ note: { kind: `${o.source}.received`, detail } });
      return { effect: 'noted', state: op.state, linked: link.linked };
    }
    if (op.state === 'submitting') {
      const expired = leaseExpiredMove(op, op.lease_expires_at);
      opSteps.push({ move: expired });
      Object.assign(op, { state: expired.to, lease_owner: null, lease_expires_at: null });
    }
    opSteps.push({
      move: {
        id: op.id,
        from: op.state,
        to: move.to,
        kind: `${o.source}.applied`,
        rule: `${o.source}.${move.rule}`,
        review_reason: move.review_reason,
        detail: move.problems.length ? { ...detail, problems: move.problems } : detail,
        lease: 'release',
      },
    });
    Object.assign(op, {
      state: move.to,
      lease_owner: null,
      lease_expires_at: null,
      ...(move.to === 'needs_review' && move.review_reason ? { review_reason: move.review_reason } : {}),
    });
    return { effect: 'transitioned', state: move.to, linked: true };
  });
  if (!linkFirst) {
    // The links of an operation whose chain begins with a move are made by the move's statement; the
    // others in one statement first. Either fails when a transaction was linked elsewhere meanwhile.
    const withMove = new Set([...steps].filter(([, s]) => s.length > 0 && 'move' in s[0]).map(([id]) => id));
    for (const l of toLink.values()) {
      if (!withMove.has(l.operationId)) continue;
      const first = steps.get(l.operationId)![0] as { move: Move };
      first.move.links = [...(first.move.links ?? []), { provider: l.provider, txn: l.txn, via: o.via }];
    }
    const alone = [...toLink.values()].filter((l) => !withMove.has(l.operationId));
    const links = await linkTransactions(tx, alone, how);
    if (links.some((l) => !l.linked)) {
      throw new Error('a provider transaction was linked to another operation meanwhile; apply these one at a time');
    }
  }
  // Round r writes the r-th event of each operation's chain, on the head the round before left.
  for (let r = 0; ; r++) {
    const round = [...steps.entries()].filter(([, s]) => s.length > r).map(([id, s]) => ({ id, step: s[r] }));
    if (round.length === 0) break;
    const notes = round.flatMap(({ id, step }) => {
      if (!('note' in step)) return [];
      const head = heads.get(id)!;
      const at = head.to_state ?? null;
      const ev = { operation_id: id, at: o.now, actor: o.actor, rule: null, from_state: at, to_state: at };
      return [chainEvent(head, { ...ev, ...step.note }, o.auditKey)];
    });
    await insertEvents(tx, notes);
    for (const e of notes) heads.set(e.operation_id, { seq: e.seq, hash: e.hash, to_state: e.to_state });
    const moves = round.flatMap(({ id, step }) => ('move' in step ? [{ ...step.move, head: heads.get(id)! }] : []));
    if (moves.length === 0) continue;
    const moved = await transitionMany(tx, moves, { actor: o.actor, auditKey: o.auditKey, now: o.now });
    for (const m of moved) {
      if (!m.ok) throw m.error;
      heads.set(m.event.operation_id, { seq: m.event.seq, hash: m.event.hash, to_state: m.event.to_state });
    }
  }
  return effects;
}

/** The audit detail of a found transaction: what was found, and whether it was linked (or to whom it is). */
function foundDetail(
  txn: ProviderTxn,
  link: { linked: boolean; existingOperation: string | null },
  detail: Record<string, unknown> | undefined,
): Record<string, unknown> {
  return {
    ...(detail ?? {}),
    provider_id: txn.provider_id,
    provider_status: txn.status,
    linked: link.linked,
    ...(link.linked ? {} : { linked_to: link.existingOperation }),
  };
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
