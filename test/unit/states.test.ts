import { describe, expect, it } from 'vitest';
import { assertTransition, canTransition, isState, isTerminal, isUnresolved } from '../../src/core/journal/states.js';
import { RefusedError } from '../../src/errors.js';
import { STATES, type State } from '../../src/types.js';

/**
 * SPEC §3 without a review reason, plus submitting → needs_review (a 400 idempotency_error on
 * submit, documented in states.ts). The moves into needs_review that need a reason (escalated by a
 * person from any state but cancelled; duplicate, mismatch, payload_tampered) are tested below.
 */
const ALLOWED: Record<State, State[]> = {
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

const allowedPairs = STATES.flatMap((from) => ALLOWED[from].map((to) => [from, to] as const));
const illegalPairs = STATES.flatMap((from) =>
  STATES.filter((to) => !ALLOWED[from].includes(to)).map((to) => [from, to] as const),
);

describe('the state machine of SPEC §3', () => {
  // By a person: the exits of needs_review are a person's (states-movers.test.ts).
  it.each(allowedPairs)('%s → %s is allowed', (from, to) => {
    expect(canTransition(from, to, { by: 'person' })).toBe(true);
    expect(() => assertTransition('op_1', from, to, { by: 'person' })).not.toThrow();
  });

  it.each(illegalPairs)('%s → %s is refused with RefusedError', (from, to) => {
    expect(canTransition(from, to)).toBe(false);
    let caught: unknown;
    try {
      assertTransition('op_1', from, to);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(RefusedError);
    expect((caught as RefusedError).rule).toBe('state_machine');
    expect((caught as RefusedError).exitCode).toBe(4);
    expect((caught as Error).message).toContain('op_1');
    expect((caught as Error).message).toContain(to);
  });

  it('covers every pair of states exactly once', () => {
    expect(allowedPairs.length + illegalPairs.length).toBe(STATES.length * STATES.length);
  });

  it('never lets a timeout become failed without a provider answer: no state reaches failed from approved', () => {
    expect(canTransition('approved', 'failed')).toBe(false);
    expect(canTransition('proposed', 'submitting')).toBe(false);
  });

  it('terminal states go nowhere without a review reason, not even to themselves', () => {
    for (const t of ['confirmed', 'failed', 'cancelled'] as const) {
      expect(isTerminal(t)).toBe(true);
      for (const to of STATES) expect(canTransition(t, to)).toBe(false);
    }
    expect(isTerminal('needs_review')).toBe(false);
  });

  it('a person may escalate any state but cancelled to needs_review (reason escalated); the system may not', () => {
    for (const from of STATES.filter((s) => s !== 'needs_review')) {
      const byPerson = canTransition(from, 'needs_review', { by: 'person', review_reason: 'escalated' });
      expect(byPerson, from).toBe(from !== 'cancelled');
      expect(canTransition(from, 'needs_review', { review_reason: 'escalated' }), from).toBe(false);
    }
    // The other reasons keep their own states: a rule never moves a confirmed operation for a mismatch.
    expect(canTransition('confirmed', 'needs_review', { review_reason: 'mismatch' })).toBe(false);
    expect(canTransition('confirmed', 'needs_review', { review_reason: 'duplicate' })).toBe(true);
  });

  it('unresolved is submitting, pending, outcome_unknown, needs_review', () => {
    expect(STATES.filter(isUnresolved)).toEqual(['submitting', 'pending', 'outcome_unknown', 'needs_review']);
  });

  it('isState accepts exactly the state names', () => {
    for (const s of STATES) expect(isState(s)).toBe(true);
    for (const s of ['bogus', 'Confirmed', '', 'unresolved', 'outcome-unknown']) expect(isState(s)).toBe(false);
  });
});
