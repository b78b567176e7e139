/**
 * The three defects the fault campaign (npm run campaign, issue 10) found after its first fixes,
 * each played alone and deterministically against the Stripe sandbox, asserting on its ledger and
 * on the operation's state and audit trail.
 */
import { expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import type { StripeWorld } from '../support/stripe-world.js';
import { claimAttempt } from '../../src/core/attempt/claims.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { getOperation, transactionsOf } from '../../src/core/journal/operations.js';
import { runPass } from '../../src/core/reconcile/run.js';
import { finishAttempt, submitOperation, submitRequest } from '../../src/core/attempt/submit.js';
import { ingestWebhook } from '../../src/core/found/webhooks.js';
import { RefusedError } from '../../src/errors.js';
import type { Provider } from '../../src/types.js';
import { signedEvent } from './integrity-support.js';

describeWorld('campaign defects', (suite) => {
  /** Delivers a signed event for a refund in the sandbox ledger, twice (a redelivery). */
  async function deliver(w: StripeWorld, type: string, refundId: string) {
    const { body, signature } = signedEvent(w.sandbox, type, refundId);
    const first = await ingestWebhook(w.ctx, w.stripe, body, signature);
    const again = await ingestWebhook(w.ctx, w.stripe, body, signature);
    return { first, again };
  }

  it('a refund made outside recon for an approved operation goes to review, and the first submit sends nothing', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:outside_1', amount: 900 }]);
    const outside = w.sandbox.seedRefund({
      payment_intent: pi,
      amount: 900,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:outside_1' },
    });

    const { first, again } = await deliver(w, 'refund.created', outside.id);
    expect(first).toMatchObject({ effect: 'transitioned', state: 'needs_review' });
    expect(again).toMatchObject({ duplicate: true });
    expect(await getOperation(w.db, 'refund:outside_1')).toMatchObject({
      state: 'needs_review',
      review_reason: 'duplicate',
    });
    expect((await transactionsOf(w.db, 'refund:outside_1')).map((t) => t.provider_id)).toEqual([outside.id]);

    const submit = await submitOperation(w.ctx, w.stripe, 'refund:outside_1').catch((e) => e);
    expect(submit).toBeInstanceOf(RefusedError);
    expect(submit.message).toMatch(/is needs_review \(duplicate\); nothing was sent/);
    // The provider's ledger: the refund made outside recon, and no second one.
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });

  it('a refund of another amount carrying an approved operation is linked as evidence (mismatch), never a 500', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:outside_2', amount: 900 }]);
    const other = w.sandbox.seedRefund({
      payment_intent: pi,
      amount: 950,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:outside_2' },
    });

    const { first } = await deliver(w, 'refund.created', other.id);
    expect(first).toMatchObject({ effect: 'transitioned', state: 'needs_review' });
    expect(await getOperation(w.db, 'refund:outside_2')).toMatchObject({
      state: 'needs_review',
      review_reason: 'mismatch',
    });
    expect((await transactionsOf(w.db, 'refund:outside_2')).map((t) => t.provider_id)).toEqual([other.id]);
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });

  it('a live refund announced for a failed operation puts the contradiction in review, on the first delivery', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:failed_1', amount: 400 }]);
    w.sandbox.faults.inject({ kind: 'initial_status', status: 'failed' }, { times: 1 });
    const submitted = await submitOperation(w.ctx, w.stripe, 'refund:failed_1');
    expect(submitted.operation.state).toBe('failed');
    const live = w.sandbox.seedRefund({
      payment_intent: pi,
      amount: 400,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:failed_1' },
    });

    const { first, again } = await deliver(w, 'refund.created', live.id);
    expect(first).toMatchObject({ effect: 'transitioned', state: 'needs_review' });
    expect(again).toMatchObject({ duplicate: true });
    expect(await getOperation(w.db, 'refund:failed_1')).toMatchObject({
      state: 'needs_review',
      review_reason: 'duplicate',
    });
    expect((await transactionsOf(w.db, 'refund:failed_1')).map((t) => t.provider_id)).toContain(live.id);
    expect((await eventsOf(w.db, 'refund:failed_1')).at(-1)).toMatchObject({
      kind: 'webhook.applied',
      from_state: 'failed',
      to_state: 'needs_review',
    });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(2);
  });

  it('a submit that confirms while another live refund is already linked goes to review (duplicate), not confirmed', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:linked_1', amount: 600 }]);
    const claim = await claimAttempt(w.ctx, 'refund:linked_1', {
      owner: 'A',
      leaseMs: 60_000,
      from: 'approved',
      rule: 'submit.first_attempt',
    });
    // While the attempt is in flight, a webhook links another refund carrying the operation.
    const other = w.sandbox.seedRefund({
      payment_intent: pi,
      amount: 600,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:linked_1' },
    });
    const { first } = await deliver(w, 'refund.created', other.id);
    expect(first).toMatchObject({ effect: 'noted', state: 'submitting' });

    const result = await w.stripe.submit(submitRequest(claim.op));
    expect(result.outcome).toBe('confirmed');
    const op = await finishAttempt(w.ctx, w.stripe, claim, result);
    expect(op).toMatchObject({ state: 'needs_review', review_reason: 'duplicate' });
    expect((await transactionsOf(w.db, op.id)).map((t) => t.provider_id).sort()).toEqual(
      [other.id, result.txn!.provider_id].sort(),
    );
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(2);
  });

  it('a submit whose own lease ran out before the answer reports the late answer it recorded, not "result not written"', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:slow_1', amount: 300 }]);
    let clock = Date.now();
    const ctx: CoreContext = { ...w.ctx, now: () => new Date(clock) };
    // The answer comes back after the lease (4 s): a loaded machine.
    const slow = slower(w.stripe, 'submit', () => (clock += 10_000));

    const r = await submitOperation(ctx, slow, 'refund:slow_1');
    expect(r).toMatchObject({ late_response: true, operation: { state: 'confirmed' } });
    expect(await getOperation(w.db, 'refund:slow_1')).toMatchObject({ state: 'confirmed' });
    expect((await eventsOf(w.db, 'refund:slow_1')).map((e) => e.kind)).toEqual([
      'recorded',
      'attempt.started',
      'lease.expired',
      'late_response.applied',
    ]);
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });

  it('a run pass that outlasts its own lease reports the operation as left for the next pass, not as an error', async () => {
    const w = await suite.stripeWorld();
    await w.recordRefunds([{ id: 'refund:longpass_1', amount: 300 }]);
    w.sandbox.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
    expect((await submitOperation(w.ctx, w.stripe, 'refund:longpass_1')).operation.state).toBe('outcome_unknown');
    let clock = Date.now();
    const ctx: CoreContext = { ...w.ctx, now: () => new Date(clock) };
    const slow = slower(w.stripe, 'lookup', () => (clock += 10_000));

    const pass = await runPass(ctx, async () => slow);
    expect(pass.errors).toEqual([]);
    expect(pass.lease_expired).toEqual(['refund:longpass_1']);
    // Nothing was written: the next pass decides it.
    expect(await getOperation(w.db, 'refund:longpass_1')).toMatchObject({ state: 'outcome_unknown' });
    const next = await runPass(w.ctx, async () => w.stripe);
    expect(next.decisions).toEqual([expect.objectContaining({ id: 'refund:longpass_1', state: 'confirmed' })]);
  });
});

/** The provider, with `method` calling `after` once the real answer is in (the clock moves on). */
function slower(provider: Provider, method: 'submit' | 'lookup', after: () => void): Provider {
  const p = Object.create(provider) as Provider;
  const real = (provider[method] as (...a: unknown[]) => Promise<unknown>).bind(provider);
  (p as unknown as Record<string, unknown>)[method] = async (...args: unknown[]) => {
    const r = await real(...args);
    after();
    return r;
  };
  return p;
}
