import { RefusedError } from '../errors.js';
import { STATES, type State, TERMINAL_STATES, UNRESOLVED_STATES } from '../types.js';

/**
 * The state machine of SPEC §3, in one place. Every state change in recon goes through
 * `assertTransition` (called by `transition()`), so an illegal move is an error, never applied.
 *
 * Additions to the SPEC's table:
 * - `submitting → needs_review`: SPEC §3 classifies a 400 `idempotency_error` on submit as
 *   `needs_review`, which the table's `submitting` row omits.
 * - `approved → needs_review`, reason `payload_tampered` only: the payload no longer matches its
 *   stored hash when the attempt is claimed (SPEC §5); nothing is sent.
 * - `confirmed → needs_review`, reason `duplicate` only: a second provider transaction found for a
 *   confirmed operation (SPEC §3), the one way out of a terminal state.
 *
 * Who moves matters: the exits of `needs_review` are a person's (`review resolve`, `attach`).
 * A webhook, a lookup or a late response found 18 operations in review and confirmed them, which
 * emptied the human queue of exactly the cases it exists for (issue 10).
 */
const NEXT: Record<State, readonly State[]> = {
  proposed: ['approved', 'cancelled'],
  approved: ['submitting', 'cancelled', 'needs_review'],
  submitting: ['confirmed', 'failed', 'pending', 'outcome_unknown', 'needs_review'],
  pending: ['confirmed', 'failed', 'outcome_unknown', 'needs_review'],
  outcome_unknown: ['confirmed', 'failed', 'pending', 'submitting', 'needs_review'],
  needs_review: ['confirmed', 'failed', 'cancelled'],
  confirmed: ['needs_review'],
  failed: [],
  cancelled: [],
};

/** Moves allowed for one review reason only. */
const ONLY_FOR_REASON: Partial<Record<`${State}>${State}`, string>> = {
  'approved>needs_review': 'payload_tampered',
  'confirmed>needs_review': 'duplicate',
};

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
  const reason = ONLY_FOR_REASON[`${from}>${to}`];
  if (reason && m.review_reason !== reason) return `${from} → ${to} is only for review reason ${reason}`;
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
