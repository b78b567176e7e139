/**
 * SPEC §8 incidents 1, 2, 4, 5 and 8, end to end: the built CLI against the sandboxes, asserting
 * on the provider's ledger (one refund or shipment per operation, or none) and on `ops show --json`.
 */
import { expect, it } from 'vitest';
import { collect } from '../support/cli.js';
import { describeWorld } from '../support/describe-world.js';
import {
  expectExit,
  PAST_WINDOW_MS,
  recordOk,
  refundOp,
  run,
  shipmentOp,
  show,
  sleep,
  submit,
} from './incidents-support.js';

describeWorld('incidents at submit time', (suite) => {
  it('1. a refund committed before the connection dropped (the SDK retry dropped too) is found by lookup, not repeated', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_1', pi.payment_intent, 1500)]);
    world.stripe.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });

    const submitted = await submit(world, 'refund:ord_1');
    expect(submitted.state).toBe('outcome_unknown');
    expect(submitted.result.outcome).toBe('unknown');
    // Both the first request and stripe-node's own same-key retry met a dropped connection.
    expect(world.stripe.faults.pending()).toBe(0);
    const ledger = world.stripe.refunds({ payment_intent: pi.payment_intent });
    expect(ledger).toHaveLength(1);

    const { code, summary } = await run(world);
    expect(code).toBe(0);
    expect(summary.decisions).toEqual([
      expect.objectContaining({ id: 'refund:ord_1', decision: 'confirm', rule: 'found.confirmed', state: 'confirmed' }),
    ]);

    const detail = await show(world, 'refund:ord_1');
    expect(detail.operation.state).toBe('confirmed');
    expect(detail.attempts).toHaveLength(1);
    expect(detail.provider_transactions).toEqual([
      expect.objectContaining({ provider_id: ledger[0].id, linked_via: 'lookup' }),
    ]);
    expect(detail.observations.map((o) => o.result)).toEqual(['found']);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });

  it('2. the second click: the same operation again is a no-op, a changed amount is refused and writes nothing', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const op = refundOp('refund:ord_2', pi.payment_intent, 2000);
    const first = await recordOk(world, [op]);
    expect(first.json.operations).toEqual([{ id: 'refund:ord_2', state: 'approved', created: true }]);

    const again = await recordOk(world, [op]);
    expect(again.json.operations).toEqual([{ id: 'refund:ord_2', state: 'approved', created: false }]);

    const before = await show(world, 'refund:ord_2');
    const changed = await world.record([{ ...op, payload: { ...op.payload, amount: 2500 } }]);
    expectExit(changed, 4);
    expect(changed.stderr).toMatch(/payload/);
    const after = await show(world, 'refund:ord_2');
    expect(after).toEqual(before);
    expect(after.events).toHaveLength(1);

    expect((await submit(world, 'refund:ord_2')).state).toBe('confirmed');
    // After the submit, the click again is still the existing (now confirmed) operation, and a
    // second submit is refused by the state machine: the provider holds one refund.
    const late = await recordOk(world, [op]);
    expect(late.json.operations).toEqual([{ id: 'refund:ord_2', state: 'confirmed', created: false }]);
    expectExit(await world.recon(['ops', 'submit', 'refund:ord_2', '--json']), 4);
    const ledger = world.stripe.refunds({ payment_intent: pi.payment_intent });
    expect(ledger).toHaveLength(1);
    expect(ledger[0].amount).toBe(2000);
  });

  it('4. a request that never arrived is retried after the window with the original key: one refund', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_4', pi.payment_intent, 1200)]);
    world.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });

    expect((await submit(world, 'refund:ord_4')).state).toBe('outcome_unknown');
    expect(world.stripe.faults.pending()).toBe(0);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(0);

    const early = await run(world);
    expect(early.code).toBe(0);
    expect(early.summary.decisions).toEqual([
      expect.objectContaining({
        id: 'refund:ord_4',
        decision: 'wait',
        rule: 'not_found.window',
        state: 'outcome_unknown',
      }),
    ]);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(0);

    world.advance(PAST_WINDOW_MS);
    const late = await run(world);
    expect(late.code).toBe(0);
    expect(late.summary.decisions).toEqual([
      expect.objectContaining({ id: 'refund:ord_4', decision: 'retry', rule: 'not_found.retry', state: 'confirmed' }),
    ]);

    const ledger = world.stripe.refunds({ payment_intent: pi.payment_intent });
    expect(ledger).toHaveLength(1);
    const detail = await show(world, 'refund:ord_4');
    expect(detail.operation.state).toBe('confirmed');
    expect(detail.attempts.map((a) => a.idempotency_key)).toEqual(['refund:ord_4', 'refund:ord_4']);
    expect(detail.attempts.map((a) => a.outcome)).toEqual(['unknown', 'confirmed']);
    expect(detail.provider_transactions).toEqual([expect.objectContaining({ provider_id: ledger[0].id })]);
    expect(detail.events.filter((e) => e.kind === 'retry.authorised').map((e) => e.rule)).toEqual(['not_found.retry']);
  });

  it('5. past key retention with a lookup that is not authoritative, nothing found → needs_review, no retry', async () => {
    const world = await suite.world({
      warehouse: true,
      warehouseConfig: { keyRetention: '1s', uncertaintyWindow: '1s' },
    });
    const warehouse = world.warehouse!;
    await recordOk(world, [shipmentOp('ship:ord_5', 'ord_5')]);
    warehouse.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });

    expect((await submit(world, 'ship:ord_5')).state).toBe('outcome_unknown');
    warehouse.faults.clear();
    expect(warehouse.shipments()).toHaveLength(0);

    const early = await run(world);
    expect(early.code).toBe(0);
    expect(early.summary.decisions).toEqual([expect.objectContaining({ id: 'ship:ord_5', decision: 'wait' })]);

    world.advance(PAST_WINDOW_MS);
    const late = await run(world);
    expect(late.code).toBe(8);
    expect(late.summary.decisions).toEqual([
      expect.objectContaining({
        id: 'ship:ord_5',
        decision: 'review',
        rule: 'not_found.key_retention',
        state: 'needs_review',
        review_reason: 'key_retention',
      }),
    ]);
    // A human retry through the CLI is refused too: the rule, not the operator, owns retry permission.
    expectExit(await world.recon(['retry', 'ship:ord_5', '--json']), 4);

    expect(warehouse.shipments()).toHaveLength(0);
    const detail = await show(world, 'ship:ord_5');
    expect(detail.operation.state).toBe('needs_review');
    expect(detail.operation.review_reason).toBe('key_retention');
    expect(detail.attempts).toHaveLength(1);
    expect(detail.events.some((e) => e.kind === 'retry.authorised')).toBe(false);
  });

  it('8. a worker SIGKILLed after the provider committed and before the local write is recovered through lookup', async () => {
    const world = await suite.world({ stripeConfig: { lease: '2s', timeout: '1s' } });
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_8', pi.payment_intent, 999)]);
    world.stripe.faults.inject({ kind: 'hold' });

    // A real process, to be killed: the embedded store must be free for it.
    await world.release();
    const child = world.spawn(['ops', 'submit', 'refund:ord_8', '--json']);
    const exited = collect(child);
    // The sandbox commits, then holds the answer: wait until the refund is in the ledger.
    for (let i = 0; i < 2000 && world.stripe.faults.held() === 0; i++) await sleep(25);
    expect(world.stripe.faults.held()).toBe(1);
    // The claim (and its 2s lease) was taken before the request was sent, so before this moment.
    const leaseOver = Date.now() + 2_000 + 100;
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
    child.kill('SIGKILL');
    expect((await exited).signal).toBe('SIGKILL');
    world.stripe.faults.release();

    const crashed = await show(world, 'refund:ord_8');
    expect(crashed.operation.state).toBe('submitting');
    expect(crashed.attempts).toEqual([expect.objectContaining({ number: 1, outcome: null })]);

    world.advance(Math.max(0, leaseOver - Date.now()));
    const recovered = await run(world);
    expect(recovered.code).toBe(0);
    expect(recovered.summary.decisions).toEqual([
      expect.objectContaining({ id: 'refund:ord_8', decision: 'confirm', rule: 'found.confirmed', state: 'confirmed' }),
    ]);

    const detail = await show(world, 'refund:ord_8');
    expect(detail.operation.state).toBe('confirmed');
    const expired = detail.events.find((e) => e.kind === 'lease.expired');
    expect(expired).toMatchObject({ from_state: 'submitting', to_state: 'outcome_unknown' });
    expect(detail.provider_transactions).toEqual([expect.objectContaining({ linked_via: 'lookup' })]);
    expect(detail.events.some((e) => e.to_state === 'failed')).toBe(false);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });
});
