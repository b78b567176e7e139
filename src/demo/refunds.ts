/**
 * The Stripe incidents of SPEC §8 the demo plays: 1 (committed, then the connection dropped),
 * 2 (the second click), 6 (a webhook delivered twice) and 9 (an old duplicate from before recon).
 */
import { findDuplicates, scanLedger } from '../core/audit/duplicates.js';
import { getOperation } from '../core/journal/operations.js';
import { ingestWebhook } from '../core/found/webhooks.js';
import { RefusedError } from '../errors.js';
import { formatAmount } from '../lib/money.js';
import { decisionOf, describeOutcome, type Scene, type Stage } from './stage.js';

function refund(id: string, paymentIntent: string, amount: number, approval: string) {
  const order = id.split(':')[1];
  return {
    id,
    provider: 'stripe',
    action: 'refund',
    payload: { payment_intent: paymentIntent, amount, currency: 'usd', reason: 'requested_by_customer' },
    client_reference: order,
    subject: { order },
    approval,
  };
}

export function commitThenDrop(stage: Stage): Scene {
  const id = 'refund:ord_1001';
  const { stripe } = stage.world;
  return {
    stage,
    // The refund's first request, dropped: the SDK pauses before it sends it again.
    waiting: stage.world.stripeRequestArrives('POST /v1/refunds', id),
    async setup() {
      await stage.heading();
      const { payment_intent } = stripe.seedPaymentIntent({ amount: 5000, currency: 'usd', id: 'pi_demo_1001' });
      await stage.record(refund(id, payment_intent, 1500, 'DEMO-1'));
      await stage.say(`recorded ${id}: refund ${formatAmount(1500, 'usd')} of ${payment_intent}, approved`);
      // Twice: stripe-node retries a closed connection once, with the same key, even with maxNetworkRetries 0.
      stripe.faults.inject({ kind: 'commit_then_drop' }, { idempotencyKey: id, times: 2 });
      await stage.say(
        'the provider will commit the refund, then drop the connection before answering (twice: the SDK retries once)',
      );
      const r = await stage.submit(id);
      await stage.say(`ops submit → ${describeOutcome(r)}: a timeout is an unknown outcome, never a failure`);
      await stage.check('submit ends in outcome_unknown', 'outcome_unknown', r.operation.state);
      await stage.check(
        'the refund was committed at the provider all the same',
        1,
        stripe.refunds({ payment_intent }).length,
      );
    },
    async afterRun(pass, summary) {
      if (pass !== 1) return;
      const d = decisionOf(summary, id);
      await stage.say(`run 1 → ${d?.decision} [${d?.rule}]: ${d?.explanation}`);
      await stage.check(
        'run finds the refund and confirms it',
        { decision: 'confirm', state: 'confirmed' },
        { decision: d?.decision, state: d?.state },
      );
    },
    async finish() {
      const op = await getOperation(stage.world.ctx.db, id);
      await stage.say(`${id} is ${op.state} after ${op.attempt_count} attempt: found by lookup, not sent again`);
      await stage.check(
        'confirmed without a second attempt',
        { state: 'confirmed', attempt_count: 1 },
        { state: op.state, attempt_count: op.attempt_count },
      );
      await stage.ledger('refunds', 1, stripe.refunds({ payment_intent: 'pi_demo_1001' }).length);
    },
  };
}

export function secondClick(stage: Stage): Scene {
  const id = 'refund:ord_1002';
  const { stripe, ctx } = stage.world;
  return {
    stage,
    async setup() {
      await stage.heading();
      const { payment_intent } = stripe.seedPaymentIntent({ amount: 5000, currency: 'usd', id: 'pi_demo_1002' });
      const first = await stage.record(refund(id, payment_intent, 2000, 'DEMO-2'));
      const r = await stage.submit(id);
      await stage.say(`recorded ${id} (${formatAmount(2000, 'usd')}) and submitted it → ${describeOutcome(r)}`);
      await stage.check('first record creates the operation', true, first.created);
      await stage.check('first submit confirms', 'confirmed', r.operation.state);
      const again = await stage.record(refund(id, payment_intent, 2000, 'DEMO-2'));
      await stage.say(
        `the agent records it again, same payload → created: ${again.created}, state ${again.state}: the existing operation, unchanged`,
      );
      await stage.check(
        'same id, same payload is the existing operation',
        { created: false, state: 'confirmed' },
        { created: again.created, state: again.state },
      );
      const before = await getOperation(ctx.db, id);
      let refused: RefusedError | null = null;
      try {
        await stage.record(refund(id, payment_intent, 2500, 'DEMO-2'));
      } catch (err) {
        if (!(err instanceof RefusedError)) throw err;
        refused = err;
      }
      await stage.say(
        `and again with amount 2500 → ${refused ? `refused [${refused.rule}]: a changed amount is a new action` : 'accepted (wrong!)'}`,
      );
      await stage.check('same id, changed amount is refused', 'payload_frozen', refused?.rule ?? null);
      const after = await getOperation(ctx.db, id);
      await stage.check(
        'nothing was written',
        { amount: before.amount, payload_hash: before.payload_hash },
        { amount: after.amount, payload_hash: after.payload_hash },
      );
      let resubmit = 'accepted (wrong!)';
      try {
        await stage.submit(id);
      } catch (err) {
        if (!(err instanceof RefusedError)) throw err;
        resubmit = `refused [${err.rule}]`;
      }
      await stage.say(`a second ops submit → ${resubmit}: a confirmed operation is never sent again`);
      await stage.check('a second submit is refused', 'refused [state_machine]', resubmit);
      await stage.ledger('refunds', 1, stripe.refunds({ payment_intent }).length);
    },
  };
}

export function webhookTwice(stage: Stage): Scene {
  const id = 'refund:ord_1006';
  const { stripe, ctx } = stage.world;
  return {
    stage,
    async setup() {
      await stage.heading();
      const { payment_intent } = stripe.seedPaymentIntent({ amount: 5000, currency: 'usd', id: 'pi_demo_1006' });
      await stage.record(refund(id, payment_intent, 3000, 'DEMO-6'));
      stripe.faults.inject({ kind: 'initial_status', status: 'pending' }, { idempotencyKey: id, times: 1 });
      const r = await stage.submit(id);
      await stage.say(
        `recorded and submitted ${id} → ${describeOutcome(r)} (the provider has not settled the refund yet)`,
      );
      await stage.check('submit ends in pending', 'pending', r.operation.state);
      const refundId = stripe.refunds({ payment_intent })[0]?.id ?? '';
      const settled = stripe.setRefundStatus(refundId, 'succeeded');
      const event = stripe.eventFor('refund.updated', settled);
      const body = JSON.stringify(event);
      const provider = await stage.world.provider('stripe');
      // Stripe signs each delivery afresh; the event id is what makes it the same event.
      const first = await ingestWebhook(ctx, provider, body, stripe.signPayload(body));
      await stage.say(`${event.type} ${event.id} (${refundId} succeeded) delivered → ${first.effect}, ${first.state}`);
      const second = await ingestWebhook(ctx, provider, body, stripe.signPayload(body));
      await stage.say(`the same event delivered again → ${second.effect}: recorded as seen, nothing changed`);
      await stage.check(
        'first delivery moves the operation',
        { effect: 'transitioned', state: 'confirmed' },
        { effect: first.effect, state: first.state },
      );
      await stage.check(
        'second delivery is a duplicate',
        { duplicate: true, effect: 'duplicate' },
        { duplicate: second.duplicate, effect: second.effect },
      );
      const applied = await ctx.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM recon.audit_events WHERE operation_id = $1 AND kind = 'webhook.applied'`,
        [id],
      );
      await stage.check('one transition in the audit trail', 1, Number(applied.rows[0]?.n));
      const seen = await ctx.db.query<{ duplicate_count: number }>(
        'SELECT duplicate_count FROM recon.webhook_events WHERE provider = $1 AND event_id = $2',
        ['stripe', event.id],
      );
      await stage.check('one duplicate delivery recorded', 1, Number(seen.rows[0]?.duplicate_count));
      await stage.ledger('refunds', 1, stripe.refunds({ payment_intent }).length);
    },
  };
}

export function oldDuplicate(stage: Stage): Scene {
  const { stripe, ctx } = stage.world;
  const paymentIntent = 'pi_demo_1009';
  let seeded: string[] = [];
  return {
    stage,
    async setup() {
      await stage.heading();
      stripe.seedPaymentIntent({ amount: 5000, currency: 'usd', id: paymentIntent });
      // Thirty days ago, a minute apart, no recon metadata: a double click from before recon existed.
      const created = Math.floor(ctx.now().getTime() / 1000) - 30 * 86_400;
      seeded = [
        stripe.seedRefund({ payment_intent: paymentIntent, amount: 4200, currency: 'usd', created }).id,
        stripe.seedRefund({ payment_intent: paymentIntent, amount: 4200, currency: 'usd', created: created + 60 }).id,
      ];
      await stage.say(
        `the provider already holds two refunds of ${formatAmount(4200, 'usd')} each on ${paymentIntent} from 30 days ago (${seeded.join(', ')})`,
      );
    },
    async finish() {
      const provider = await stage.world.provider('stripe');
      const scan = await scanLedger(ctx, provider, { full: true });
      const duplicates = await findDuplicates(ctx.db, { provider: 'stripe' });
      await stage.say(
        `audit duplicates read ${scan.transactions} refund(s) in ${scan.pages} page(s) → ${duplicates.length} duplicate group(s)`,
      );
      await stage.table({ kind: 'duplicates', title: 'recon audit duplicates', duplicates });
      const found = duplicates.find((d) => d.transactions.some((t) => seeded.includes(t.provider_id)));
      await stage.check(
        'the old duplicate is listed with both refund ids',
        [...seeded].sort(),
        found?.transactions.map((t) => t.provider_id).sort() ?? [],
      );
      await stage.check("recon's own refunds are not reported as duplicates", 1, duplicates.length);
      await stage.ledger('refunds', 2, stripe.refunds({ payment_intent: paymentIntent }).length);
    },
  };
}
