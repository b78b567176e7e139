/**
 * Which review reason wins when transactions carrying an operation are found (issue 25): one answer,
 * src/core/found/classify.ts `classifyFound`, for the rule's lookup, a submit response and a
 * webhook. Before it, the rule said `mismatch` for a refund of another amount found while another
 * live refund was linked (a webhook said `duplicate`), and `duplicate` for a lookup listing a failed
 * refund next to the succeeded one (it said `confirmed` when the failed one had been linked first).
 * Each case is asked of classifyFound and, for the operations the rule decides, of the rule itself.
 * The same cases through the real submit, webhook and run paths: test/integration/classify-found.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { classifyFound } from '../../src/core/found/classify.js';
import { decide } from '../../src/core/reconcile/rule.js';
import { isDecidable } from '../../src/core/journal/states.js';
import type { ProviderTxn, State } from '../../src/types.js';
import { found, input, txn } from './rule-fixtures.js';

interface Case {
  name: string;
  state?: State;
  txns: ProviderTxn[];
  linked?: { provider_id: string; state: string }[];
  reason: 'duplicate' | 'mismatch' | null;
  /** The state a clean set shows (review_reason null). */
  shows?: 'confirmed' | 'pending' | 'failed';
  link?: string[];
  problems?: number;
}

const re2 = (o: Partial<ProviderTxn> = {}) => txn({ provider_id: 're_2', ...o });
const otherAmount = { amount: 900 };
const failedTxn = { state: 'failed' as const, status: 'failed' };

const cases: Case[] = [
  { name: 'one clean refund confirms', txns: [txn()], reason: null, shows: 'confirmed', link: ['re_1'] },
  { name: 'the same refund reported twice is one', txns: [txn(), txn()], reason: null, shows: 'confirmed' },
  {
    name: 'two live refunds are a duplicate, both linked',
    txns: [txn(), re2()],
    reason: 'duplicate',
    link: ['re_1', 're_2'],
  },
  {
    name: 'a refund of another amount while another live refund is linked: duplicate wins over mismatch',
    txns: [txn(otherAmount)],
    linked: [{ provider_id: 're_2', state: 'confirmed' }],
    reason: 'duplicate',
    link: ['re_1'],
    problems: 1,
  },
  {
    name: 'two live refunds, one of another amount: duplicate, the disagreement kept',
    txns: [txn(), re2(otherAmount)],
    reason: 'duplicate',
    problems: 1,
  },
  { name: 'one refund of another amount is a mismatch', txns: [txn(otherAmount)], reason: 'mismatch', problems: 1 },
  {
    name: 'a failed refund next to the succeeded one is one refund, not a duplicate (both linked)',
    txns: [txn(failedTxn), re2()],
    reason: null,
    shows: 'confirmed',
    link: ['re_1', 're_2'],
  },
  {
    name: 'the succeeded refund with a failed one linked already confirms (the same as listing both)',
    txns: [re2()],
    linked: [{ provider_id: 're_1', state: 'failed' }],
    reason: null,
    shows: 'confirmed',
  },
  {
    name: 'an unresolved operation with two live refunds linked already is a duplicate, even for one seen before',
    state: 'pending',
    txns: [txn()],
    linked: [
      { provider_id: 're_1', state: 'pending' },
      { provider_id: 're_2', state: 'confirmed' },
    ],
    reason: 'duplicate',
  },
  {
    name: 'two failed refunds fail the operation',
    txns: [txn(failedTxn), re2(failedTxn)],
    reason: null,
    shows: 'failed',
  },
  {
    name: 'a pending refund shows pending',
    txns: [txn({ state: 'pending', status: 'pending' })],
    reason: null,
    shows: 'pending',
  },
  // Operations the rule does not decide (a webhook, a late response, `recon lookup`).
  {
    name: 'a confirmed operation: a redelivered refund a person has judged stays evidence',
    state: 'confirmed',
    txns: [txn()],
    linked: [
      { provider_id: 're_1', state: 'confirmed' },
      { provider_id: 're_2', state: 'confirmed' },
    ],
    reason: null,
  },
  {
    name: 'a confirmed operation: a second live refund is a duplicate',
    state: 'confirmed',
    txns: [re2(otherAmount)],
    linked: [{ provider_id: 're_1', state: 'confirmed' }],
    reason: 'duplicate',
    problems: 1,
  },
  {
    name: 'a confirmed operation: a failed refund of another amount is evidence only',
    state: 'confirmed',
    txns: [re2({ ...otherAmount, ...failedTxn })],
    linked: [{ provider_id: 're_1', state: 'confirmed' }],
    reason: null,
  },
  {
    name: 'an approved operation: a live refund made outside recon',
    state: 'approved',
    txns: [txn()],
    reason: 'duplicate',
  },
  {
    name: 'an approved operation: a live refund of another amount made outside recon',
    state: 'approved',
    txns: [txn(otherAmount)],
    reason: 'mismatch',
    problems: 1,
  },
  { name: 'a failed operation: a live refund contradicts it', state: 'failed', txns: [txn()], reason: 'duplicate' },
];

describe('classifyFound: which review reason wins, one answer for the rule, a submit response and a webhook', () => {
  it.each(cases)('$name', (c) => {
    const state = c.state ?? 'outcome_unknown';
    const op = { ...input().operation, state };
    const got = classifyFound(op, c.txns, c.linked ?? [])!;
    expect(got.review_reason).toBe(c.reason);
    if (c.shows) expect(got.state).toBe(c.shows);
    if (c.link) expect(got.link.map((t) => t.provider_id)).toEqual(c.link);
    expect(got.problems).toHaveLength(c.problems ?? 0);

    if (!isDecidable(state)) return;
    // The rule's decision for the same operation, lookup and links.
    const d = decide(input({ operation: { state }, lookup: found(...c.txns), linked: c.linked }));
    expect({ state: d.state, review_reason: d.review_reason ?? null }).toEqual({
      state: c.reason ? 'needs_review' : c.shows,
      review_reason: c.reason,
    });
    expect(d.link?.map((t) => t.provider_id)).toEqual(got.link.map((t) => t.provider_id));
  });

  it('finds nothing to classify in an empty set', () => {
    expect(classifyFound(input().operation, [], [])).toBeNull();
  });
});
