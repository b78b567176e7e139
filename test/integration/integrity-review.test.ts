/**
 * Issue 10, "`review resolve`": a person's decision gets the same checks as `attach` (SPEC §7).
 * `--outcome confirmed --txn` with a transaction that disagrees, and `--outcome failed|cancelled`
 * while the provider holds a transaction for the operation, are refused (exit 4) unless
 * `--force --reason TEXT`. The built CLI against the Stripe sandbox.
 */
import { expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { expectExit, recordOk, refundOp, run, show, submit } from './incidents-support.js';

describeWorld('review resolve checks like attach', (suite) => {
  it('a 2400 refund is not confirmed for a 2500 operation, nor the operation failed while its refund exists, without --force --reason', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:rv_1', pi.payment_intent, 2500)]);
    world.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expect((await submit(world, 'refund:rv_1')).state).toBe('outcome_unknown');
    const wrong = world.stripe.seedRefund({
      payment_intent: pi.payment_intent,
      amount: 2400,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:rv_1' },
    });
    const pass = await run(world);
    expect(pass.code).toBe(8);
    expect(pass.summary.decisions[0]).toMatchObject({ state: 'needs_review', review_reason: 'mismatch' });

    const resolve = (args: string[]) =>
      world.recon(['review', 'resolve', 'refund:rv_1', '--note', 'checked the dashboard', '--json', ...args]);
    const confirmWrong = expectExit(await resolve(['--outcome', 'confirmed', '--txn', wrong.id]), 4);
    expect(confirmWrong.json.error.message).toMatch(/amount \(24.00 USD vs 25.00 USD\)/);
    const failWhileHeld = expectExit(await resolve(['--outcome', 'failed']), 4);
    expect(failWhileHeld.json.error.message).toContain(wrong.id);
    expectExit(await resolve(['--outcome', 'cancelled']), 4);
    expect((await show(world, 'refund:rv_1')).operation.state).toBe('needs_review');

    // --force needs --reason; with both, the person's decision is recorded with the problems.
    expectExit(await resolve(['--outcome', 'confirmed', '--txn', wrong.id, '--force']), 2);
    const forced = expectExit(
      await resolve([
        '--outcome',
        'confirmed',
        '--txn',
        wrong.id,
        '--force',
        '--reason',
        'partial refund agreed, FIN-9',
      ]),
      0,
    );
    expect(forced.json).toMatchObject({ state: 'confirmed' });
    const detail = await show(world, 'refund:rv_1');
    expect(detail.events.at(-1)).toMatchObject({ kind: 'review.resolved', rule: 'human.review.forced' });
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });

  it('a person is never refused on a stale copy: the linked refund is failed at the provider, pending in recon: resolve failed without --force', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:rv_stale', pi.payment_intent, 2500)]);
    world.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expect((await submit(world, 'refund:rv_stale')).state).toBe('outcome_unknown');
    const wrong = world.stripe.seedRefund({
      payment_intent: pi.payment_intent,
      amount: 2400,
      currency: 'usd',
      status: 'pending',
      metadata: { recon_operation_id: 'refund:rv_stale' },
    });
    const pass = await run(world);
    expect(pass.summary.decisions[0]).toMatchObject({ state: 'needs_review', review_reason: 'mismatch' });
    expect((await show(world, 'refund:rv_stale')).provider_transactions).toMatchObject([
      { provider_id: wrong.id, status: 'pending' },
    ]);
    // The refund failed at the provider; recon's stored copy still says pending.
    world.stripe.setRefundStatus(wrong.id, 'failed');

    const resolved = expectExit(
      await world.recon([
        'review',
        'resolve',
        'refund:rv_stale',
        '--outcome',
        'failed',
        '--note',
        'refund failed at Stripe',
        '--json',
      ]),
      0,
    );
    expect(resolved.json).toMatchObject({ state: 'failed' });
    const detail = await show(world, 'refund:rv_stale');
    const event = detail.events.at(-1) as unknown as { kind: string; rule: string; detail: Record<string, unknown> };
    expect(event).toMatchObject({ kind: 'review.resolved', rule: 'human.review' });
    // What the person's decision was judged on: the provider's answer, not the stored copy.
    expect(event.detail.provider_seen).toEqual([expect.objectContaining({ provider_id: wrong.id, status: 'failed' })]);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });
});
