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
});
