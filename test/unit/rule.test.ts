import { describe, expect, it } from 'vitest';
import { RULES, decide } from '../../src/core/reconcile/rule.js';
import { RefusedError } from '../../src/errors.js';
import type { Decision, ObservationResult, State } from '../../src/types.js';
import { HOUR, MIN, NOT_FOUND, T0, at, found, input, txn, type InputOverrides } from './rule-fixtures.js';

interface Case {
  name: string;
  given: InputOverrides;
  decision: Decision['decision'];
  rule: string;
  state: State;
  reason?: string;
  links?: string[];
  explanation?: string;
}

const nf = (ms: number, result: ObservationResult = 'not_found') => ({ observed_at: at(ms), result });
/** Not found continuously since T0 + 1m, i.e. for `now − (T0 + 1m)`. */
const streakFromT0 = [nf(1 * MIN), nf(5 * MIN)];
const now = (ms: number) => at(ms);

const cases: Case[] = [
  // A single clean match resolves the operation.
  {
    name: 'a refund committed before the connection dropped is found and confirmed, not repeated',
    given: { lookup: found(txn()) },
    decision: 'confirm',
    rule: RULES.confirmed,
    state: 'confirmed',
    links: ['re_1'],
    explanation: 'found re_1 (succeeded): confirmed',
  },
  {
    name: 'a match still pending at the provider moves the operation to pending',
    given: { lookup: found(txn({ state: 'pending', status: 'pending' })) },
    decision: 'pending',
    rule: RULES.pending,
    state: 'pending',
    links: ['re_1'],
    explanation: 'found re_1 (pending): pending at the provider',
  },
  {
    name: 'a match that failed at the provider fails the operation',
    given: { lookup: found(txn({ state: 'failed', status: 'failed' })) },
    decision: 'fail',
    rule: RULES.failed,
    state: 'failed',
    links: ['re_1'],
  },
  {
    name: 'a pending operation whose refund succeeded is confirmed',
    given: { operation: { state: 'pending' }, lookup: found(txn()) },
    decision: 'confirm',
    rule: RULES.confirmed,
    state: 'confirmed',
    links: ['re_1'],
  },
  {
    name: 'the same refund reported twice by the adapter is one match, not a duplicate',
    given: { lookup: found(txn(), txn()) },
    decision: 'confirm',
    rule: RULES.confirmed,
    state: 'confirmed',
    links: ['re_1'],
  },
  {
    name: 'currency case does not make a mismatch',
    given: { lookup: found(txn({ currency: 'EUR' })) },
    decision: 'confirm',
    rule: RULES.confirmed,
    state: 'confirmed',
    links: ['re_1'],
  },
  {
    name: 'a provider that reports no amount cannot contradict the operation',
    given: { lookup: found(txn({ amount: null, currency: null, client_reference: null, operation_id: null })) },
    decision: 'confirm',
    rule: RULES.confirmed,
    state: 'confirmed',
    links: ['re_1'],
  },
  {
    name: 'an operation without amount (a shipment) confirms on identity alone',
    given: { operation: { amount: null, currency: null }, lookup: found(txn({ amount: 5 })) },
    decision: 'confirm',
    rule: RULES.confirmed,
    state: 'confirmed',
    links: ['re_1'],
  },
  // Conflicts go to humans.
  {
    name: 'two refunds carrying one operation are a duplicate, both linked',
    given: { lookup: found(txn(), txn({ provider_id: 're_2' })) },
    decision: 'review',
    rule: RULES.duplicate,
    state: 'needs_review',
    reason: 'duplicate',
    links: ['re_1', 're_2'],
    explanation: '2 provider transactions carry this operation (re_1, re_2): needs review',
  },
  {
    // Campaign defect 6: a webhook linked re_2 while the attempt was in flight; the lookup shows re_1 only.
    name: 'one match while another live refund is linked already is a duplicate, never confirmed',
    given: { lookup: found(txn()), linked: [{ provider_id: 're_2', state: 'confirmed' }] },
    decision: 'review',
    rule: RULES.duplicate,
    state: 'needs_review',
    reason: 'duplicate',
    links: ['re_1'],
    explanation: 're_1 carries this operation, and re_2 is linked to it already: needs review',
  },
  {
    name: 'one match with only itself and a failed refund linked is confirmed',
    given: {
      lookup: found(txn()),
      linked: [
        { provider_id: 're_1', state: 'confirmed' },
        { provider_id: 're_0', state: 'failed' },
      ],
    },
    decision: 'confirm',
    rule: RULES.confirmed,
    state: 'confirmed',
    links: ['re_1'],
  },
  {
    name: 'a refund for another amount is a mismatch, linked',
    given: { lookup: found(txn({ amount: 900 })) },
    decision: 'review',
    rule: RULES.mismatch,
    state: 'needs_review',
    reason: 'mismatch',
    links: ['re_1'],
    explanation: 're_1 disagrees on amount (9.00 EUR vs 10.00 EUR): needs review',
  },
  {
    name: 'a refund in another currency is a mismatch',
    given: { lookup: found(txn({ currency: 'usd' })) },
    decision: 'review',
    rule: RULES.mismatch,
    state: 'needs_review',
    reason: 'mismatch',
    links: ['re_1'],
  },
  {
    name: 'a match that names another operation is a mismatch',
    given: { lookup: found(txn({ operation_id: 'op_2' })) },
    decision: 'review',
    rule: RULES.mismatch,
    state: 'needs_review',
    reason: 'mismatch',
    links: ['re_1'],
  },
  {
    name: 'a match with another client reference is a mismatch',
    given: { lookup: found(txn({ client_reference: 'order-2' })) },
    decision: 'review',
    rule: RULES.mismatch,
    state: 'needs_review',
    reason: 'mismatch',
    links: ['re_1'],
  },
  {
    name: 'a look-alike refund without recon metadata is ambiguous: never linked, never retried',
    given: {
      now: now(1 * HOUR),
      history: streakFromT0,
      lookup: { result: 'ambiguous', matches: [], candidates: [txn({ operation_id: null, provider_id: 're_9' })] },
    },
    decision: 'review',
    rule: RULES.ambiguous,
    state: 'needs_review',
    reason: 'ambiguous',
    explanation: 'no transaction carries this operation, but 1 look alike (re_9): needs review',
  },
  {
    name: 'candidates make a not_found ambiguous too',
    given: { history: streakFromT0, lookup: { ...NOT_FOUND, candidates: [txn({ operation_id: null })] } },
    decision: 'review',
    rule: RULES.ambiguous,
    state: 'needs_review',
    reason: 'ambiguous',
  },
  // The provider cannot be asked.
  {
    name: 'an unavailable provider leaves the operation unresolved',
    given: { lookup: { result: 'unavailable', matches: [], candidates: [], error: 'http_503' } },
    decision: 'unavailable',
    rule: RULES.unavailable,
    state: 'outcome_unknown',
    explanation: 'provider unavailable (http_503): staying outcome_unknown',
  },
  {
    name: 'a partial listing that failed is not trusted, even with a match in it',
    given: { lookup: { result: 'unavailable', matches: [txn()], candidates: [] } },
    decision: 'unavailable',
    rule: RULES.unavailable,
    state: 'outcome_unknown',
  },
  {
    name: 'an unavailable provider leaves a pending operation pending',
    given: { operation: { state: 'pending' }, lookup: { result: 'unavailable', matches: [], candidates: [] } },
    decision: 'unavailable',
    rule: RULES.unavailable,
    state: 'pending',
  },
  {
    name: 'a lookup that says found without a transaction never leads to a retry',
    given: { history: streakFromT0, lookup: { result: 'found', matches: [], candidates: [] } },
    decision: 'unavailable',
    rule: RULES.inconsistent,
    state: 'outcome_unknown',
    explanation: 'lookup said found with 0 matching transactions: staying outcome_unknown',
  },
  {
    name: 'a lookup that says not_found but carries a failed refund neither fails nor retries',
    given: { history: streakFromT0, lookup: { ...NOT_FOUND, matches: [txn({ state: 'failed' })] } },
    decision: 'unavailable',
    rule: RULES.inconsistent,
    state: 'outcome_unknown',
  },
  {
    name: 'a contradictory lookup on a stale operation escalates',
    given: { lookup: { ...NOT_FOUND, matches: [txn()] }, now: now(100 * HOUR) },
    decision: 'review',
    rule: RULES.stale,
    state: 'needs_review',
    reason: 'stale',
  },
  // Nothing found: the uncertainty window.
  {
    name: 'the first not_found starts the window: wait',
    given: {},
    decision: 'wait',
    rule: RULES.window,
    state: 'outcome_unknown',
    explanation: 'not found for 0s, window 10m: waiting',
  },
  {
    name: 'not found for 3m12s inside a 10m window: wait',
    given: { history: [nf(1 * MIN)], now: now(1 * MIN + 192_000) },
    decision: 'wait',
    rule: RULES.window,
    state: 'outcome_unknown',
    explanation: 'not found for 3m, window 10m: waiting',
  },
  {
    name: 'one millisecond before the window ends: still wait',
    given: { history: streakFromT0, now: now(11 * MIN - 1) },
    decision: 'wait',
    rule: RULES.window,
    state: 'outcome_unknown',
  },
  {
    name: 'exactly at the end of the window: retry with the original key',
    given: { history: streakFromT0, now: now(11 * MIN) },
    decision: 'retry',
    rule: RULES.retry,
    state: 'submitting',
    explanation: 'not found for 10m, window 10m: retrying with the original key, attempt 2 of 3',
  },
  {
    name: 'an unavailable lookup breaks the streak, so the window starts again',
    given: { history: [nf(1 * MIN), nf(20 * MIN, 'unavailable'), nf(25 * MIN)], now: now(30 * MIN) },
    decision: 'wait',
    rule: RULES.window,
    state: 'outcome_unknown',
    explanation: 'not found for 5m, window 10m: waiting',
  },
  {
    name: 'the streak is read in time order even when history arrives unsorted',
    given: { history: [nf(25 * MIN), nf(20 * MIN, 'unavailable'), nf(1 * MIN)], now: now(30 * MIN) },
    decision: 'wait',
    rule: RULES.window,
    state: 'outcome_unknown',
    explanation: 'not found for 5m, window 10m: waiting',
  },
  {
    name: 'not_found observations from before the latest attempt do not count for it',
    given: {
      operation: { attempt_count: 2 },
      history: [nf(1 * MIN), nf(20 * MIN)],
      lastAttemptAt: at(30 * MIN),
      now: now(35 * MIN),
    },
    decision: 'wait',
    rule: RULES.window,
    state: 'outcome_unknown',
    explanation: 'not found for 0s, window 10m: waiting',
  },
  {
    name: 'a not_found stamped in the future by a skewed clock only makes the wait longer',
    given: { history: [nf(2 * HOUR)], now: now(1 * HOUR) },
    decision: 'wait',
    rule: RULES.window,
    state: 'outcome_unknown',
  },
  // Past the window: the retry conditions.
  {
    name: 'attempts = max − 1: the last attempt is allowed',
    given: { operation: { attempt_count: 2 }, history: streakFromT0 },
    decision: 'retry',
    rule: RULES.retry,
    state: 'submitting',
    explanation: 'not found for 59m, window 10m: retrying with the original key, attempt 3 of 3',
  },
  {
    name: 'attempts = max: needs review',
    given: { operation: { attempt_count: 3 }, history: streakFromT0 },
    decision: 'review',
    rule: RULES.maxAttempts,
    state: 'needs_review',
    reason: 'max_attempts',
    explanation: 'not found for 59m after 3 of 3 attempts: needs review',
  },
  {
    name: 'a changed payload is never sent as a retry',
    given: { history: streakFromT0, retryPayloadHash: 'f'.repeat(64) },
    decision: 'review',
    rule: RULES.payloadChanged,
    state: 'needs_review',
    reason: 'payload_changed',
  },
  {
    name: 'one millisecond inside key retention less its 10% margin: retry',
    given: { history: streakFromT0, now: now(24 * HOUR - 2.4 * HOUR - 1) },
    decision: 'retry',
    rule: RULES.retry,
    state: 'submitting',
  },
  {
    name: 'exactly at key retention less its margin with a non-authoritative lookup: needs review',
    given: { history: streakFromT0, now: now(24 * HOUR - 2.4 * HOUR) },
    decision: 'review',
    rule: RULES.keyRetention,
    state: 'needs_review',
    reason: 'key_retention',
    explanation:
      'not found for 21h 35m, but the key is 21h 36m old (retention 1d, margin 2h 24m) and the lookup is not authoritative: needs review',
  },
  {
    name: "the provider's clock ahead within the margin: the key's age on its clock (non-authoritative: review)",
    given: { history: streakFromT0, now: now(20 * HOUR), providerNow: now(22 * HOUR) },
    decision: 'review',
    rule: RULES.keyRetention,
    state: 'needs_review',
    reason: 'key_retention',
  },
  {
    name: "the provider's clock ahead within the margin, recon's young enough on both: retry",
    given: { history: streakFromT0, now: now(10 * HOUR), providerNow: now(12 * HOUR) },
    decision: 'retry',
    rule: RULES.retry,
    state: 'submitting',
  },
  {
    name: "the provider's clock 25 h ahead, authoritative lookup: needs review naming both clocks",
    given: {
      history: streakFromT0,
      now: now(2 * HOUR),
      providerNow: now(27 * HOUR),
      capabilities: { lookupAuthoritative: true },
    },
    decision: 'review',
    rule: RULES.keyRetention,
    state: 'needs_review',
    reason: 'key_retention',
    explanation: `not found for 1h 59m, but the provider's clock (${now(27 * HOUR).toISOString()}) and recon's (${now(2 * HOUR).toISOString()}) disagree by more than 2h 24m: whether the provider still holds the key is unknown: needs review`,
  },
  {
    name: 'past key retention with an authoritative lookup: retry',
    given: { history: streakFromT0, now: now(30 * HOUR), capabilities: { lookupAuthoritative: true } },
    decision: 'retry',
    rule: RULES.retry,
    state: 'submitting',
  },
  {
    name: 'never attempted: the key has no age, so an old record may still be retried',
    given: {
      operation: { attempt_count: 0, first_attempt_at: null, created_at: at(-30 * HOUR) },
      history: [nf(-29 * HOUR)],
    },
    decision: 'retry',
    rule: RULES.retry,
    state: 'submitting',
  },
  {
    name: 'a pending operation not found inside the window: wait, still pending',
    given: { operation: { state: 'pending' }, history: [nf(55 * MIN)] },
    decision: 'wait',
    rule: RULES.window,
    state: 'pending',
  },
  {
    name: 'a pending operation that vanished from the provider is never retried: needs review',
    given: { operation: { state: 'pending' }, history: streakFromT0 },
    decision: 'review',
    rule: RULES.pendingNotFound,
    state: 'needs_review',
    reason: 'pending_not_found',
  },
  // Staleness.
  {
    name: 'one millisecond before escalateAfter: the ordinary rules apply',
    given: { history: streakFromT0, now: now(72 * HOUR - 1), capabilities: { lookupAuthoritative: true } },
    decision: 'retry',
    rule: RULES.retry,
    state: 'submitting',
  },
  {
    name: 'exactly at escalateAfter and still not found: stale',
    given: { history: streakFromT0, now: now(72 * HOUR), capabilities: { lookupAuthoritative: true } },
    decision: 'review',
    rule: RULES.stale,
    state: 'needs_review',
    reason: 'stale',
    explanation: 'unresolved for 3d (escalate after 3d): needs review',
  },
  {
    name: 'stale is measured from creation when never attempted',
    given: { operation: { first_attempt_at: null, attempt_count: 0, created_at: at(-72 * HOUR) }, now: now(0) },
    decision: 'review',
    rule: RULES.stale,
    state: 'needs_review',
    reason: 'stale',
  },
  {
    name: 'stale inside a fresh window still escalates',
    given: { now: now(100 * HOUR) },
    decision: 'review',
    rule: RULES.stale,
    state: 'needs_review',
    reason: 'stale',
  },
  {
    name: 'stale but found and succeeded: the found refund wins, confirmed',
    given: { lookup: found(txn()), now: now(100 * HOUR) },
    decision: 'confirm',
    rule: RULES.confirmed,
    state: 'confirmed',
    links: ['re_1'],
  },
  {
    name: 'stale but found failed: failed',
    given: { lookup: found(txn({ state: 'failed', status: 'canceled' })), now: now(100 * HOUR) },
    decision: 'fail',
    rule: RULES.failed,
    state: 'failed',
    links: ['re_1'],
  },
  {
    name: 'stale and still pending at the provider: stale, with the match linked',
    given: { operation: { state: 'pending' }, lookup: found(txn({ state: 'pending' })), now: now(100 * HOUR) },
    decision: 'review',
    rule: RULES.stale,
    state: 'needs_review',
    reason: 'stale',
    links: ['re_1'],
  },
  {
    name: 'stale and duplicated: duplicate is the more precise reason',
    given: { lookup: found(txn(), txn({ provider_id: 're_2' })), now: now(100 * HOUR) },
    decision: 'review',
    rule: RULES.duplicate,
    state: 'needs_review',
    reason: 'duplicate',
    links: ['re_1', 're_2'],
  },
  {
    name: 'stale and mismatched: mismatch',
    given: { lookup: found(txn({ amount: 1 })), now: now(100 * HOUR) },
    decision: 'review',
    rule: RULES.mismatch,
    state: 'needs_review',
    reason: 'mismatch',
    links: ['re_1'],
  },
  {
    name: 'stale and the provider unavailable: stale',
    given: { lookup: { result: 'unavailable', matches: [], candidates: [] }, now: now(100 * HOUR) },
    decision: 'review',
    rule: RULES.stale,
    state: 'needs_review',
    reason: 'stale',
  },
  {
    name: 'stale with look-alikes: stale, nothing linked',
    given: { lookup: { result: 'ambiguous', matches: [], candidates: [txn()] }, now: now(100 * HOUR) },
    decision: 'review',
    rule: RULES.stale,
    state: 'needs_review',
    reason: 'stale',
  },
  // Bad dates deny rather than grant.
  {
    name: 'an invalid first-attempt date never authorises a retry',
    given: { operation: { first_attempt_at: new Date(NaN) }, history: streakFromT0 },
    decision: 'wait',
    rule: RULES.window,
    state: 'outcome_unknown',
  },
  {
    name: 'an invalid first-attempt date with a known last attempt: key age unknown, needs review',
    given: { operation: { first_attempt_at: new Date(NaN) }, history: streakFromT0, lastAttemptAt: T0 },
    decision: 'review',
    rule: RULES.keyRetention,
    state: 'needs_review',
    reason: 'key_retention',
  },
];

describe('decide()', () => {
  it.each(cases)('$name', (c) => {
    const d = decide(input(c.given));
    expect({ decision: d.decision, rule: d.rule, state: d.state }).toEqual({
      decision: c.decision,
      rule: c.rule,
      state: c.state,
    });
    expect(d.review_reason).toBe(c.reason);
    expect(d.link?.map((t) => t.provider_id)).toEqual(c.links);
    if (c.explanation !== undefined) expect(d.explanation).toBe(c.explanation);
    expect(d.explanation).not.toMatch(/\n/);
  });

  it.each(['proposed', 'approved', 'submitting', 'needs_review', 'confirmed', 'failed', 'cancelled'] as const)(
    'refuses to decide for an operation in %s (exit 4, naming the rule)',
    (state) => {
      let caught: unknown;
      try {
        decide(input({ operation: { state }, lookup: found(txn()) }));
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(RefusedError);
      expect((caught as RefusedError).rule).toBe(RULES.notReconcilable);
      expect((caught as RefusedError).message).toBe(
        `operation op_1 is ${state}; only pending and outcome_unknown operations are reconciled`,
      );
    },
  );

  it('does not mutate its input', () => {
    const history = [nf(25 * MIN), nf(1 * MIN)];
    const given = input({ history, now: now(30 * MIN) });
    const before = structuredClone(given);
    decide(given);
    expect(given).toEqual(before);
    expect(history.map((o) => o.observed_at.getTime())).toEqual([at(25 * MIN).getTime(), at(1 * MIN).getTime()]);
  });
});
