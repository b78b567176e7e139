/**
 * Issue 10 / SPEC §3 and §7: `recon lookup ID` works for an operation in any state. For one in
 * needs_review it links what it found as evidence and never moves it; a second transaction found
 * for a confirmed operation moves it to needs_review (duplicate), so the human queue and `run`'s
 * exit 8 show it. The built CLI against the Stripe sandbox.
 */
import { expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { expectExit, recordOk, refundOp, run, show, submit } from './incidents-support.js';

describeWorld('recon lookup of operations the rule does not reconcile', (suite) => {
  it('a second refund found for a confirmed operation → needs_review (duplicate); a lookup in review only adds evidence', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:lk_1', pi.payment_intent, 1500)]);
    expect((await submit(world, 'refund:lk_1')).state).toBe('confirmed');

    const quiet = expectExit(await world.recon(['lookup', 'refund:lk_1', '--json']), 0).json;
    expect(quiet.state).toBe('confirmed');

    const second = world.stripe.seedRefund({
      payment_intent: pi.payment_intent,
      amount: 1500,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:lk_1' },
    });
    const found = expectExit(await world.recon(['lookup', 'refund:lk_1', '--json']), 0).json;
    expect(found.state).toBe('needs_review');
    const detail = await show(world, 'refund:lk_1');
    expect(detail.operation).toMatchObject({ state: 'needs_review', review_reason: 'duplicate' });
    expect(detail.provider_transactions.map((t) => t.provider_id)).toContain(second.id);
    expect((await run(world)).code).toBe(8);

    // In review: a third refund is linked as evidence; the state does not move.
    const third = world.stripe.seedRefund({
      payment_intent: pi.payment_intent,
      amount: 1500,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:lk_1' },
    });
    expect(expectExit(await world.recon(['lookup', 'refund:lk_1', '--json']), 0).json.state).toBe('needs_review');
    const after = await show(world, 'refund:lk_1');
    expect(after.operation.state).toBe('needs_review');
    expect(after.provider_transactions.map((t) => t.provider_id)).toContain(third.id);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(3);
  });
});
