import { RefusedError } from '../../errors.js';
import { STATES, type State, TERMINAL_STATES, UNRESOLVED_STATES } from '../../types.js';

/**
 * The state machine of SPEC §3, in one place. Every state change in recon goes through
 * `assertTransition` (called by `transition()`), so an illegal move is an error, never applied.
 *
 * The SPEC's table, with what §3's prose and §5 add (all of them moves into `needs_review`):
 * - `→ needs_review` from any state but `cancelled`, reason `escalated`, by a person only (`recon
 *   escalate`, SPEC §3): so also `proposed` and `submitting → needs_review`, which the table's rows
 *   leave out. "The customer reports two refunds" on a confirmed operation is exactly when.
 * - `submitting → needs_review`: SPEC §3 classifies a 400 `idempotency_error` on submit as
 *   `needs_review` (reason `idempotency_conflict`), which the table's `submitting` row omits; a
 *   response naming a transaction that contradicts the operation (`mismatch`) or a second one
 *   (`duplicate`) goes there too.
 * - `approved → needs_review` not only escalated: reason `payload_tampered`, the payload no longer
 *   matches its stored hash when the attempt is claimed (SPEC §5), nothing is sent; reason
 *   `duplicate` or `mismatch`, a live provider transaction carrying the operation's id was found
 *   before its first submit (a side effect made outside recon): the submit must not make a second.
 * - `confirmed → needs_review` (the table's "except"): reason `duplicate`, a second provider
 *   transaction found, or `escalated`.
 * - `failed → needs_review` (the table's "except"): reason `duplicate` or `mismatch`, a live
 *   provider transaction found for an operation recon holds as failed contradicts it (before this
 *   move existed the webhook that found it answered 500 on every redelivery: campaign), or
 *   `escalated`. These are the only ways out of `confirmed` and `failed`; `cancelled` has none.
 * test/unit/states.test.ts holds the whole table, every move with every reason and mover.
 *
 * Who moves matters: the exits of `needs_review` are a person's (`review resolve`, `attach`).
 * A webhook, a lookup or a late response found 18 operations in review and confirmed them, which
 * emptied the human queue of exactly the cases it exists for (issue 10).
 */
/**
 * How a person may resolve a review (`recon review resolve --outcome`): the exits of needs_review,
 * the one list the state machine, `resolveReview` and the command's choices read (issue 25).
 */
export const REVIEW_OUTCOMES = ['confirmed', 'failed', 'cancelled'] as const satisfies readonly State[];
export type ReviewOutcome = (typeof REVIEW_OUTCOMES)[number];

export function isReviewOutcome(value: string): value is ReviewOutcome {
  return (REVIEW_OUTCOMES as readonly string[]).includes(value);
}

const NEXT: Record<State, readonly State[]> = {
  proposed: ['approved', 'cancelled', 'needs_review'],
  approved: ['submitting', 'cancelled', 'needs_review'],
  submitting: ['confirmed', 'failed', 'pending', 'outcome_unknown', 'needs_review'],
  pending: ['confirmed', 'failed', 'outcome_unknown', 'needs_review'],
  outcome_unknown: ['confirmed', 'failed', 'pending', 'submitting', 'needs_review'],
  needs_review: REVIEW_OUTCOMES,
  confirmed: ['needs_review'],
  failed: ['needs_review'],
  cancelled: [],
};

/** Moves allowed for some review reasons only. */
const ONLY_FOR_REASON: Partial<Record<`${State}>${State}`, readonly string[]>> = {
  'proposed>needs_review': ['escalated'],
  'approved>needs_review': ['payload_tampered', 'duplicate', 'mismatch', 'escalated'],
  'confirmed>needs_review': ['duplicate', 'escalated'],
  'failed>needs_review': ['duplicate', 'mismatch', 'escalated'],
};

/** Review reasons only a person gives: `escalated` is `recon escalate`'s. */
const PERSON_ONLY_REASONS: readonly string[] = ['escalated'];

/** States only a person leaves. */
const PERSON_ONLY_EXITS: readonly State[] = ['needs_review'];

/** Who makes a move, and why (the review reason, for moves into needs_review). */
export interface Mover {
  /** `person`: `review resolve`, `attach`. Default `system`: submit results, run, lookups, webhooks. */
  by?: 'person' | 'system';
  review_reason?: string | null;
}

export function canTransition(from: State, to: State, m: Mover = {}): boolean {
  return refusal(from, to, m) === null;
}

function refusal(from: State, to: State, m: Mover): string | null {
  if (!NEXT[from].includes(to)) {
    const allowed = NEXT[from].filter((s) => !ONLY_FOR_REASON[`${from}>${s}`]);
    return `from ${from}: ${allowed.length ? allowed.join(', ') : 'nothing (terminal)'}`;
  }
  const reasons = ONLY_FOR_REASON[`${from}>${to}`];
  if (reasons && !reasons.includes(m.review_reason ?? ''))
    return `${from} → ${to} is only for review reason ${reasons.join(' or ')}`;
  if (to === 'needs_review' && PERSON_ONLY_REASONS.includes(m.review_reason ?? '') && m.by !== 'person')
    return `review reason ${m.review_reason} is given by a person (recon escalate)`;
  if (PERSON_ONLY_EXITS.includes(from) && m.by !== 'person')
    return `only a person leaves ${from} (recon review resolve, recon attach)`;
  return null;
}

export function assertTransition(id: string, from: State, to: State, m: Mover = {}): void {
  const why = refusal(from, to, m);
  if (why !== null) {
    throw new RefusedError(`operation ${id} is ${from}; it cannot become ${to} (${why})`, 'state_machine');
  }
}

export function isTerminal(state: State): boolean {
  return TERMINAL_STATES.includes(state);
}

export function isUnresolved(state: State): boolean {
  return UNRESOLVED_STATES.includes(state);
}

export function isState(value: string): value is State {
  return (STATES as readonly string[]).includes(value);
}

/**
 * The unresolved states as an SQL list, `state IN ${UNRESOLVED_SQL}`: the one spelling of
 * UNRESOLVED_STATES in queries (it must match the predicate of operations_unresolved_idx,
 * src/store/schema.sql, for the planner to use that index).
 */
export const UNRESOLVED_SQL = sqlList(UNRESOLVED_STATES);

function sqlList(states: readonly State[]): string {
  return `(${states.map((s) => `'${s}'`).join(', ')})`;
}

/** A `submitting` operation whose worker still holds its lease: its request may be on the wire. */
export function isInFlight(op: { state: State; lease_expires_at: Date | null }, now: Date): boolean {
  return op.state === 'submitting' && op.lease_expires_at !== null && op.lease_expires_at > now;
}

/**
 * The states reconciliation works on (`run`, `retry`, `lookup`, the agent's `check_action`): the
 * unresolved ones a rule may still move, i.e. all but needs_review, which only a person leaves.
 */
export const RECONCILABLE_STATES: readonly State[] = UNRESOLVED_STATES.filter((s) => !PERSON_ONLY_EXITS.includes(s));

/** RECONCILABLE_STATES as an SQL list, `state IN ${RECONCILABLE_SQL}`. */
export const RECONCILABLE_SQL = sqlList(RECONCILABLE_STATES);

export function isReconcilable(state: State): boolean {
  return RECONCILABLE_STATES.includes(state);
}

/**
 * The states the rule decides on (src/core/reconcile/rule.ts `decide`): the reconcilable ones as
 * judgedState sees them, a `submitting` whose lease expired being judged `outcome_unknown` first.
 */
export function isDecidable(state: State): boolean {
  return isReconcilable(state) && state !== 'submitting';
}

/**
 * The state an operation is judged in (SPEC §3): a `submitting` whose worker is gone (its lease
 * expired, or the caller holds it now) is the `outcome_unknown` it is, never `failed`.
 */
export function judgedState(state: State): State {
  return state === 'submitting' ? 'outcome_unknown' : state;
}
