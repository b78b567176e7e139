/**
 * Issue 10, "A webhook takes operations out of needs_review": only a person leaves needs_review
 * (SPEC §3). Webhooks and lookups link what they found and add it to the evidence; a second
 * transaction found for a confirmed operation moves it to needs_review (duplicate). Played against
 * the Stripe sandbox, asserting on its ledger and on the operation.
 */
import { expect, it } from 'vitest';
import { eventsOf } from '../../src/core/journal/chain.js';
import { getOperation, transactionsOf } from '../../src/core/journal/operations.js';
import { runPass } from '../../src/core/reconcile/run.js';
import { submitOperation } from '../../src/core/attempt/submit.js';
import { ingestWebhook } from '../../src/core/found/webhooks.js';
import { describeWorld } from '../support/describe-world.js';
import { signedEvent } from './integrity-support.js';

describeWorld('webhooks never leave needs_review', (suite) => {
  it('the issue 10 repro: a duplicate in review stays in review when a signed refund.updated arrives for the first refund', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:dup_1', amount: 512 }]);
    // The response is dropped after commit, and so is stripe-node's own same-key retry.
    w.sandbox.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
    const submitted = await submitOperation(w.ctx, w.stripe, 'refund:dup_1');
    expect(submitted.operation.state).toBe('outcome_unknown');
    const [first] = w.sandbox.refunds({ payment_intent: pi });
    // A second refund at the provider carrying the same recon_operation_id.
    const second = w.sandbox.seedRefund({
      payment_intent: pi,
      amount: 519,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:dup_1' },
    });

    const pass = await runPass(w.ctx, async () => w.stripe);
    expect(pass.decisions).toEqual([expect.objectContaining({ id: 'refund:dup_1', state: 'needs_review' })]);
    expect(pass.needs_review_total).toBe(1); // what makes `recon run` exit 8

    const { body, signature } = signedEvent(w.sandbox, 'refund.updated', first.id);
    const ingested = await ingestWebhook(w.ctx, w.stripe, body, signature);
    expect(ingested.effect).not.toBe('transitioned');

    const op = await getOperation(w.db, 'refund:dup_1');
    expect(op.state).toBe('needs_review');
    expect(op.review_reason).toBe('duplicate');
    expect((await transactionsOf(w.db, op.id)).map((t) => t.provider_id).sort()).toEqual([first.id, second.id].sort());
    const events = await eventsOf(w.db, op.id);
    expect(events.at(-1)).toMatchObject({
      kind: 'webhook.received',
      from_state: 'needs_review',
      to_state: 'needs_review',
    });
    // The provider's ledger: the two refunds, nothing more.
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(2);
    expect((await runPass(w.ctx, async () => w.stripe)).needs_review_total).toBe(1);
  });

  it('a mismatch in review stays in review when a matching refund and its webhook appear later', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:mm_1', amount: 2500 }]);
    w.sandbox.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expect((await submitOperation(w.ctx, w.stripe, 'refund:mm_1')).operation.state).toBe('outcome_unknown');
    w.sandbox.seedRefund({
      payment_intent: pi,
      amount: 2400,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:mm_1' },
    });
    await runPass(w.ctx, async () => w.stripe);
    expect((await getOperation(w.db, 'refund:mm_1')).review_reason).toBe('mismatch');

    const exact = w.sandbox.seedRefund({
      payment_intent: pi,
      amount: 2500,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:mm_1' },
    });
    const { body, signature } = signedEvent(w.sandbox, 'refund.updated', exact.id);
    await ingestWebhook(w.ctx, w.stripe, body, signature);
    expect(await getOperation(w.db, 'refund:mm_1')).toMatchObject({ state: 'needs_review', review_reason: 'mismatch' });
    expect((await transactionsOf(w.db, 'refund:mm_1')).map((t) => t.provider_id)).toContain(exact.id);
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(2);
  });

  it('a second refund announced by webhook for a confirmed operation moves it to needs_review (duplicate)', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:late_1', amount: 700 }]);
    expect((await submitOperation(w.ctx, w.stripe, 'refund:late_1')).operation.state).toBe('confirmed');
    const again = w.sandbox.seedRefund({
      payment_intent: pi,
      amount: 700,
      currency: 'usd',
      metadata: { recon_operation_id: 'refund:late_1' },
    });
    // The confirmed refund's own update changes nothing…
    const [mine] = w.sandbox.refunds({ payment_intent: pi });
    const own = signedEvent(w.sandbox, 'refund.updated', mine.id);
    await ingestWebhook(w.ctx, w.stripe, own.body, own.signature);
    expect((await getOperation(w.db, 'refund:late_1')).state).toBe('confirmed');
    // …a second refund carrying the operation is a duplicate side effect that already happened.
    const dup = signedEvent(w.sandbox, 'refund.created', again.id);
    const r = await ingestWebhook(w.ctx, w.stripe, dup.body, dup.signature);
    expect(r).toMatchObject({ effect: 'transitioned', state: 'needs_review' });
    expect(await getOperation(w.db, 'refund:late_1')).toMatchObject({
      state: 'needs_review',
      review_reason: 'duplicate',
    });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(2);
    expect((await runPass(w.ctx, async () => w.stripe)).needs_review_total).toBe(1);
  });
  it('refunds carrying an approved operation before its first submit: the first one puts it in review before anything is sent, never an error', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([
      { id: 'refund:pre_1', amount: 900 },
      { id: 'refund:pre_2', amount: 900 },
    ]);
    const planted = (id: string) =>
      w.sandbox.seedRefund({ payment_intent: pi, amount: 900, currency: 'usd', metadata: { recon_operation_id: id } });
    const deliver = async (refundId: string) => {
      const { body, signature } = signedEvent(w.sandbox, 'refund.created', refundId);
      return ingestWebhook(w.ctx, w.stripe, body, signature);
    };
    // pre_1: one planted refund carrying a never-sent operation is a side effect made outside recon:
    // review at once, so the first submit sends nothing (campaign defect 5).
    expect(await deliver(planted('refund:pre_1').id)).toMatchObject({ effect: 'transitioned', state: 'needs_review' });
    await expect(submitOperation(w.ctx, w.stripe, 'refund:pre_1')).rejects.toThrow(/needs_review/);
    expect(w.sandbox.refunds({ metadataOperationId: 'refund:pre_1' })).toHaveLength(1);
    // pre_2: two planted refunds before any submit → review (nothing is sent after that).
    expect(await deliver(planted('refund:pre_2').id)).toMatchObject({ effect: 'transitioned', state: 'needs_review' });
    await deliver(planted('refund:pre_2').id);
    expect(await getOperation(w.db, 'refund:pre_2')).toMatchObject({
      state: 'needs_review',
      review_reason: 'duplicate',
    });
    await expect(submitOperation(w.ctx, w.stripe, 'refund:pre_2')).rejects.toThrow(/needs_review/);
    expect(w.sandbox.refunds({ metadataOperationId: 'refund:pre_2' })).toHaveLength(2);
  });
});
