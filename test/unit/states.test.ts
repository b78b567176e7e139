import { describe, expect, it } from 'vitest';
import {
  assertTransition,
  canTransition,
  isState,
  isTerminal,
  isUnresolved,
  type Mover,
} from '../../src/core/journal/states.js';
import { RefusedError } from '../../src/errors.js';
import { STATES, type State } from '../../src/types.js';

/** Every review reason recon writes (the rule, submit, the claim, found transactions, escalate). */
const REASONS = [
  'duplicate',
  'mismatch',
  'payload_tampered',
  'idempotency_conflict',
  'escalated',
  'stale',
  'ambiguous',
  'max_attempts',
  'payload_changed',
  'pending_not_found',
  'key_retention',
] as const;
type Reason = (typeof REASONS)[number];
/** `null`: a move made without a review reason. */
const WITH_OR_WITHOUT: readonly (Reason | null)[] = [null, ...REASONS];
/** Every reason but `escalated` (a person's: `recon escalate`), and none. */
const ANY_BUT_ESCALATED = WITH_OR_WITHOUT.filter((r) => r !== 'escalated');

/** `undefined`: the default mover, the system (submit results, run, lookups, webhooks). */
const MOVERS = [undefined, 'system', 'person'] as const;

/**
 * SPEC §3, written out: every move recon may make, who may make it (`anyone`: the system or a
 * person; `person`: `recon escalate`, `review resolve`, `attach` by a person) and with which review
 * reasons (`any`: with any reason or none). A (from, to, reason, mover) that no row allows is refused.
 *
 * The table's rows, plus what §3's prose and the classification of submit responses add:
 * - `recon escalate` moves any state but cancelled to needs_review, reason escalated, by a person
 *   (so also proposed and submitting → needs_review, which the table's rows leave out);
 * - submitting → needs_review: a 400 idempotency_error on submit, or a response naming a transaction
 *   that contradicts the operation (mismatch) or a second one (duplicate);
 * - approved → needs_review also without a person: the payload changed in the store after recording
 *   (payload_tampered, §5), or a live transaction made outside recon before the first submit.
 */
const MOVES: readonly [
  from: State,
  to: State,
  who: 'anyone' | 'person',
  reasons: 'any' | readonly (Reason | null)[],
][] = [
  ['proposed', 'approved', 'anyone', 'any'],
  ['proposed', 'cancelled', 'anyone', 'any'],
  ['proposed', 'needs_review', 'person', ['escalated']],

  ['approved', 'submitting', 'anyone', 'any'],
  ['approved', 'cancelled', 'anyone', 'any'],
  ['approved', 'needs_review', 'anyone', ['payload_tampered', 'duplicate', 'mismatch']],
  ['approved', 'needs_review', 'person', ['escalated']],

  ['submitting', 'confirmed', 'anyone', 'any'],
  ['submitting', 'failed', 'anyone', 'any'],
  ['submitting', 'pending', 'anyone', 'any'],
  ['submitting', 'outcome_unknown', 'anyone', 'any'],
  ['submitting', 'needs_review', 'anyone', ANY_BUT_ESCALATED],
  ['submitting', 'needs_review', 'person', ['escalated']],

  ['pending', 'confirmed', 'anyone', 'any'],
  ['pending', 'failed', 'anyone', 'any'],
  ['pending', 'outcome_unknown', 'anyone', 'any'],
  ['pending', 'needs_review', 'anyone', ANY_BUT_ESCALATED],
  ['pending', 'needs_review', 'person', ['escalated']],

  ['outcome_unknown', 'confirmed', 'anyone', 'any'],
  ['outcome_unknown', 'failed', 'anyone', 'any'],
  ['outcome_unknown', 'pending', 'anyone', 'any'],
  ['outcome_unknown', 'submitting', 'anyone', 'any'],
  ['outcome_unknown', 'needs_review', 'anyone', ANY_BUT_ESCALATED],
  ['outcome_unknown', 'needs_review', 'person', ['escalated']],

  // Only a person leaves needs_review (review resolve, attach).
  ['needs_review', 'confirmed', 'person', 'any'],
  ['needs_review', 'failed', 'person', 'any'],
  ['needs_review', 'cancelled', 'person', 'any'],

  // Terminal, except → needs_review: a duplicate found, or escalated by a person.
  ['confirmed', 'needs_review', 'anyone', ['duplicate']],
  ['confirmed', 'needs_review', 'person', ['escalated']],

  // Terminal, except → needs_review: a transaction found after all, or escalated by a person.
  ['failed', 'needs_review', 'anyone', ['duplicate', 'mismatch']],
  ['failed', 'needs_review', 'person', ['escalated']],

  // cancelled: terminal, no row.
];

function allowedByTable(from: State, to: State, reason: Reason | null, by: Mover['by']): boolean {
  return MOVES.some(
    ([f, t, who, reasons]) =>
      f === from &&
      t === to &&
      (who === 'anyone' || by === 'person') &&
      (reasons === 'any' || reasons.includes(reason)),
  );
}

const label = (reason: Reason | null, by: Mover['by']) =>
  `${reason ? `reason ${reason}` : 'no reason'}, by ${by ?? 'default (system)'}`;

const everyPair = STATES.flatMap((from) => STATES.map((to) => [from, to] as const));

describe('the state machine of SPEC §3', () => {
  it.each(everyPair)('%s → %s: allowed exactly for the movers and review reasons of the table', (from, to) => {
    for (const reason of WITH_OR_WITHOUT) {
      for (const by of MOVERS) {
        const m: Mover = { by, review_reason: reason };
        const expected = allowedByTable(from, to, reason, by);
        const what = `${from} → ${to}, ${label(reason, by)}`;
        expect(canTransition(from, to, m), what).toBe(expected);
        let caught: unknown;
        try {
          assertTransition('op_1', from, to, m);
        } catch (err) {
          caught = err;
        }
        if (expected) {
          expect(caught, what).toBeUndefined();
        } else {
          expect(caught, what).toBeInstanceOf(RefusedError);
          expect((caught as RefusedError).rule, what).toBe('state_machine');
          expect((caught as RefusedError).exitCode, what).toBe(4);
          expect((caught as Error).message, what).toContain('op_1');
          expect((caught as Error).message, what).toContain(to);
        }
      }
    }
  });

  it('the table names states that exist, and no row twice', () => {
    for (const [from, to] of MOVES) {
      expect(isState(from), from).toBe(true);
      expect(isState(to), to).toBe(true);
    }
    const rows = MOVES.map(([from, to, who]) => `${from}>${to}>${who}`);
    expect(new Set(rows).size).toBe(rows.length);
  });

  it('never lets a timeout become failed without a provider answer: no state reaches failed from approved', () => {
    for (const reason of WITH_OR_WITHOUT) {
      for (const by of MOVERS) {
        expect(canTransition('approved', 'failed', { by, review_reason: reason })).toBe(false);
        expect(canTransition('proposed', 'submitting', { by, review_reason: reason })).toBe(false);
      }
    }
  });

  it('terminal states: cancelled goes nowhere; confirmed and failed only to needs_review, for a found transaction or a person', () => {
    // What the code allows out of each terminal state, over every target, reason and mover.
    const exits = (from: State) =>
      STATES.flatMap((to) =>
        WITH_OR_WITHOUT.flatMap((reason) =>
          (['system', 'person'] as const)
            .filter((by) => canTransition(from, to, { by, review_reason: reason }))
            .map((by) => `${to} ${reason ?? '-'} ${by}`),
        ),
      );
    for (const t of ['confirmed', 'failed', 'cancelled'] as const) expect(isTerminal(t), t).toBe(true);
    expect(isTerminal('needs_review')).toBe(false);
    expect(exits('cancelled')).toEqual([]);
    expect(exits('confirmed')).toEqual([
      'needs_review duplicate system',
      'needs_review duplicate person',
      'needs_review escalated person',
    ]);
    expect(exits('failed')).toEqual([
      'needs_review duplicate system',
      'needs_review duplicate person',
      'needs_review mismatch system',
      'needs_review mismatch person',
      'needs_review escalated person',
    ]);
  });

  it('a person may escalate any state but cancelled (and needs_review itself) to needs_review; the system may not', () => {
    for (const from of STATES) {
      const byPerson = canTransition(from, 'needs_review', { by: 'person', review_reason: 'escalated' });
      expect(byPerson, from).toBe(from !== 'cancelled' && from !== 'needs_review');
      expect(canTransition(from, 'needs_review', { review_reason: 'escalated' }), from).toBe(false);
      expect(canTransition(from, 'needs_review', { by: 'system', review_reason: 'escalated' }), from).toBe(false);
    }
  });

  it('unresolved is submitting, pending, outcome_unknown, needs_review', () => {
    expect(STATES.filter(isUnresolved)).toEqual(['submitting', 'pending', 'outcome_unknown', 'needs_review']);
  });

  it('isState accepts exactly the state names', () => {
    for (const s of STATES) expect(isState(s)).toBe(true);
    for (const s of ['bogus', 'Confirmed', '', 'unresolved', 'outcome-unknown']) expect(isState(s)).toBe(false);
  });
});
