/**
 * One answer for a refund found while another live refund is linked (issue 25, found/classify.ts
 * `classifyFound`), whichever path finds it: a submit response, `recon run`'s lookup, a webhook.
 * Each operation has a refund carrying it linked by a webhook while its attempt was in flight (on
 * another payment intent, so its own lookup does not list it); then a second refund carrying it,
 * of another amount, is found. Before, the submit and the rule said `mismatch` and the webhook
 * `duplicate`: the same facts, two review reasons. Against the Stripe sandbox, both store backends.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { claimAttempt } from '../../src/core/attempt/claims.js';
import { finishAttempt, submitRequest } from '../../src/core/attempt/submit.js';
import { ingestWebhook } from '../../src/core/found/webhooks.js';
import { getOperation, transactionsOf } from '../../src/core/journal/operations.js';
import { runPass } from '../../src/core/reconcile/run.js';
import { backends, removeTempStores } from '../support/backends.js';
import { startStripeWorld, type StripeWorld } from '../support/stripe-world.js';
import { signedEvent } from './integrity-support.js';

afterAll(() => removeTempStores());

describe.each(backends)('a second refund of another amount, store on $name', (backend) => {
  let w: StripeWorld | undefined;
  afterEach(async () => {
    await w?.close();
    w = undefined;
  });

  async function deliver(refundId: string) {
    const { body, signature } = signedEvent(w!.sandbox, 'refund.created', refundId);
    return ingestWebhook(w!.ctx, w!.stripe, body, signature);
  }

  /** An approved 9.00 USD refund, claimed; a refund carrying it (elsewhere) linked by a webhook meanwhile. */
  async function linkedWhileInFlight(id: string) {
    const [pi] = await w!.recordRefunds([{ id, amount: 900 }]);
    const claim = await claimAttempt(w!.ctx, id, {
      owner: 'A',
      leaseMs: 60_000,
      from: 'approved',
      rule: 'submit.first_attempt',
    });
    const elsewhere = w!.sandbox.seedPaymentIntent({ amount: 10_000, currency: 'usd' }).payment_intent;
    const first = w!.sandbox.seedRefund({
      payment_intent: elsewhere,
      amount: 900,
      currency: 'usd',
      metadata: { recon_operation_id: id },
    });
    expect(await deliver(first.id)).toMatchObject({ effect: 'noted', state: 'submitting' });
    return { pi, claim, first };
  }

  /** A refund of 9.50 USD carrying `id` on its own payment intent: what its lookup lists. */
  function otherAmount(pi: string, id: string) {
    return w!.sandbox.seedRefund({
      payment_intent: pi,
      amount: 950,
      currency: 'usd',
      metadata: { recon_operation_id: id },
    });
  }

  it('is a duplicate for the submit response, the rule and the webhook alike (duplicate wins over mismatch)', async () => {
    w = await startStripeWorld(backend);

    // 1. The submit's own response names a refund of another amount.
    const s = await linkedWhileInFlight('refund:cf_submit');
    const answer = await w.stripe.submit(submitRequest(s.claim.op));
    expect(answer.outcome).toBe('confirmed');
    await finishAttempt(w.ctx, w.stripe, s.claim, { ...answer, txn: { ...answer.txn!, amount: 950 } });

    // 2. and 3. The attempt timed out (outcome_unknown); the second refund is found by `recon run`'s
    // lookup, or announced by a webhook.
    const r = await linkedWhileInFlight('refund:cf_run');
    const h = await linkedWhileInFlight('refund:cf_webhook');
    for (const { claim } of [r, h]) {
      await finishAttempt(w.ctx, w.stripe, claim, { outcome: 'unknown', error_class: 'timeout', message: 'timed out' });
    }
    const second = { run: otherAmount(r.pi, 'refund:cf_run'), webhook: otherAmount(h.pi, 'refund:cf_webhook') };
    expect(await deliver(second.webhook.id)).toMatchObject({ effect: 'transitioned', state: 'needs_review' });
    const pass = await runPass(w.ctx, async () => w!.stripe);
    expect(pass.errors).toEqual([]);

    const reasons: Record<string, unknown> = {};
    for (const path of ['submit', 'run', 'webhook']) {
      const op = await getOperation(w.db, `refund:cf_${path}`);
      reasons[path] = `${op.state} (${op.review_reason})`;
    }
    expect(reasons).toEqual({
      submit: 'needs_review (duplicate)',
      run: 'needs_review (duplicate)',
      webhook: 'needs_review (duplicate)',
    });
    // Both refunds linked to each, as the evidence a person reads.
    expect((await transactionsOf(w.db, 'refund:cf_run')).map((t) => t.provider_id).sort()).toEqual(
      [r.first.id, second.run.id].sort(),
    );
    expect((await transactionsOf(w.db, 'refund:cf_webhook')).map((t) => t.provider_id).sort()).toEqual(
      [h.first.id, second.webhook.id].sort(),
    );
    // The provider's ledger: two refunds carry each operation, one on its own payment intent.
    expect(w.sandbox.refunds({ payment_intent: s.pi })).toHaveLength(1);
    expect(w.sandbox.refunds({ payment_intent: r.pi })).toHaveLength(1);
    expect(w.sandbox.refunds({ payment_intent: h.pi })).toHaveLength(1);
  });
});
