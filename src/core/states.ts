import { RefusedError } from '../errors.js';
import { STATES, type State, TERMINAL_STATES, UNRESOLVED_STATES } from '../types.js';

/**
 * The state machine of SPEC §3, in one place. Every state change in recon goes through
 * `assertTransition` (called by `transition()`), so an illegal move is an error, never applied.
 *
 * One addition to the SPEC's table: `submitting → needs_review`. SPEC §3 classifies a 400
 * `idempotency_error` on submit as `needs_review`, which the table's `submitting` row omits.
 */
const NEXT: Record<State, readonly State[]> = {
  proposed: ['approved', 'cancelled'],
  approved: ['submitting', 'cancelled'],
  submitting: ['confirmed', 'failed', 'pending', 'outcome_unknown', 'needs_review'],
  pending: ['confirmed', 'failed', 'outcome_unknown', 'needs_review'],
  outcome_unknown: ['confirmed', 'failed', 'pending', 'submitting', 'needs_review'],
  needs_review: ['confirmed', 'failed', 'cancelled'],
  confirmed: [],
  failed: [],
  cancelled: [],
};

export function canTransition(from: State, to: State): boolean {
  return NEXT[from].includes(to);
}

export function assertTransition(id: string, from: State, to: State): void {
  if (!canTransition(from, to)) {
    const allowed = NEXT[from].length ? NEXT[from].join(', ') : 'nothing (terminal)';
    throw new RefusedError(
      `operation ${id} is ${from}; it cannot become ${to} (from ${from}: ${allowed})`,
      'state_machine',
    );
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
