/**
 * Issue 14: `recon retry` refused operations it does not retry with "only outcome_unknown
 * operations are retried" while it retried pending and submitting ones too. The one check is the
 * core's (src/core/reconcile/retry.ts): a refusal names the states it does work on, and nothing reaches
 * the provider. In-process against the Stripe sandbox, asserting on its ledger.
 */
import { expect, it } from 'vitest';
import { escalate } from '../../src/core/review/escalate.js';
import { getOperation } from '../../src/core/journal/operations.js';
import { retryNow } from '../../src/core/reconcile/retry.js';
import { transition } from '../../src/core/journal/transition.js';
import { RefusedError } from '../../src/errors.js';
import { claimAttempt } from '../../src/core/attempt/claims.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import { lookupOperation } from '../../src/core/reconcile/lookup.js';
import { describeWorld } from '../support/describe-world.js';

describeWorld('what retry refuses', (suite) => {
  it('an approved or a needs_review operation is refused with the states retry works on; nothing is sent', async () => {
    const w = await suite.stripeWorld();
    await w.recordRefunds([
      { id: 'refund:rt_approved', amount: 1500 },
      { id: 'refund:rt_review', amount: 1500 },
    ]);
    // Sent once, outcome unknown, then handed to a person.
    await w.db.transaction(async (tx) => {
      for (const to of ['submitting', 'outcome_unknown'] as const)
        await transition(tx, 'refund:rt_review', to, { actor: 't', now: w.ctx.now(), kind: 'k', rule: 'r' });
    });
    await escalate(w.ctx, 'refund:rt_review', { reason: 'customer called' });

    for (const [id, state] of [
      ['refund:rt_approved', 'approved'],
      ['refund:rt_review', 'needs_review'],
    ] as const) {
      for (const dryRun of [true, false]) {
        const err: unknown = await retryNow(w.ctx, w.stripe, await getOperation(w.db, id), { dryRun }).catch(
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(RefusedError);
        expect((err as RefusedError).message).toBe(
          `operation ${id} is ${state}; only submitting, pending, outcome_unknown operations are retried`,
        );
        expect((err as RefusedError).rule).toBe('state_machine');
      }
      expect((await getOperation(w.db, id)).state).toBe(state);
    }
    expect(w.sandbox.refunds()).toEqual([]);
  });

  it('a crashed submit looked up is lease.expired first, then decided; a retry the rule allows is recorded, never sent, by lookup and retry --dry-run', async () => {
    const w = await suite.stripeWorld();
    const id = 'refund:rt_crashed';
    await w.recordRefunds([{ id, amount: 1500 }]);
    const T0 = Date.now();
    const at = (ms: number) => ({ ...w.ctx, now: () => new Date(T0 + ms) });
    // The worker claimed the attempt and died before sending it: its lease ends at T0 + 1 s.
    await claimAttempt(at(0), id, { owner: 'A', leaseMs: 1000, from: 'approved', rule: 'submit.first_attempt' });
    const first = await lookupOperation(at(5000), w.stripe, id);
    expect(first).toMatchObject({ before: 'submitting', wrote: 'decision', decision: { decision: 'wait' } });
    expect(first.operation.state).toBe('outcome_unknown');
    const kinds = (await eventsOf(w.db, id)).map((e) => [e.kind, e.from_state, e.to_state]);
    expect(kinds.slice(-2)).toEqual([
      ['lease.expired', 'submitting', 'outcome_unknown'],
      [expect.any(String), 'outcome_unknown', 'outcome_unknown'],
    ]);
    // Past the uncertainty window (1 s from the first not_found): the rule allows a retry.
    const second = await lookupOperation(at(7000), w.stripe, id);
    expect(second).toMatchObject({
      wrote: 'decision',
      decision: { id, decision: 'retry', state: 'outcome_unknown' },
      note: expect.stringContaining(`recon retry ${id}`),
    });
    const last = (await eventsOf(w.db, id)).at(-1)!;
    expect(last).toMatchObject({ kind: 'lookup', detail: expect.objectContaining({ would: second.decision!.rule }) });
    const events = (await eventsOf(w.db, id)).length;
    const dry = await retryNow(at(7000), w.stripe, await getOperation(w.db, id), { dryRun: true });
    expect(dry).toMatchObject({ id, decision: 'retry', dry_run: true });
    expect((await eventsOf(w.db, id)).length).toBe(events);
    expect(await getOperation(w.db, id)).toMatchObject({ state: 'outcome_unknown', attempt_count: 1 });
    // The provider's ledger: nothing was sent.
    expect(w.sandbox.refunds()).toEqual([]);
  });
});
