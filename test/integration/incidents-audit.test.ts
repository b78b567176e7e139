/**
 * SPEC §8 incidents 9 and 10, end to end: an old duplicate at the provider found by
 * `recon audit duplicates`, and an audit row edited through SQL — refused by the database, and
 * when changed behind the trigger's back, found by `recon audit verify`.
 */
import { expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { expectExit, recordOk, refundOp, show, submit } from './incidents-support.js';

const DAY = 24 * 3600;

describeWorld('incidents found by audits', (suite) => {
  it('9. an old duplicate at the provider is listed with both transaction ids; look-alikes are not; the next audit reads only what is new', async () => {
    const world = await suite.world();
    const sb = world.stripe;
    const old = Math.floor(Date.now() / 1000) - 3 * DAY;
    // The duplicate from before recon: one order refunded twice, four minutes apart, no recon metadata.
    const order = sb.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
    const dupA = sb.seedRefund({ payment_intent: order.payment_intent, amount: 2500, currency: 'usd', created: old });
    const dupB = sb.seedRefund({
      payment_intent: order.payment_intent,
      amount: 2500,
      currency: 'usd',
      created: old + 240,
    });
    // Look-alikes that are not duplicates: other amounts on one charge; the same amount on another
    // charge; the same amount on one charge days apart; two refunds each carrying its own operation.
    const partial = sb.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
    sb.seedRefund({ payment_intent: partial.payment_intent, amount: 1000, created: old + 60 });
    sb.seedRefund({ payment_intent: partial.payment_intent, amount: 1500, created: old + 120 });
    const other = sb.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
    sb.seedRefund({ payment_intent: other.payment_intent, amount: 2500, created: old + 180 });
    const monthly = sb.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
    sb.seedRefund({ payment_intent: monthly.payment_intent, amount: 500, created: old - 4 * DAY });
    sb.seedRefund({ payment_intent: monthly.payment_intent, amount: 500, created: old });
    const twoOps = sb.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
    sb.seedRefund({
      payment_intent: twoOps.payment_intent,
      amount: 700,
      created: old,
      metadata: { recon_operation_id: 'refund:a' },
    });
    sb.seedRefund({
      payment_intent: twoOps.payment_intent,
      amount: 700,
      created: old + 30,
      metadata: { recon_operation_id: 'refund:b' },
    });
    const seeded = sb.refunds().length;
    expect(seeded).toBe(9);

    const first = expectExit(await world.recon(['audit', 'duplicates', '--json']), 8).json;
    expect(first.duplicates).toHaveLength(1);
    const [dup] = first.duplicates;
    expect(dup).toMatchObject({ provider: 'stripe', kind: 'same_charge_amount', amount_total: 5000, currency: 'usd' });
    expect(dup.transactions.map((t: { provider_id: string }) => t.provider_id).sort()).toEqual(
      [dupA.id, dupB.id].sort(),
    );
    expect(first.scans).toEqual([
      expect.objectContaining({ provider: 'stripe', transactions: seeded, incremental: false }),
    ]);

    // One new refund since: the next audit reads only it, and still reports the old duplicate.
    const fresh = sb.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
    sb.seedRefund({ payment_intent: fresh.payment_intent, amount: 300 });
    const second = expectExit(await world.recon(['audit', 'duplicates', '--json']), 8).json;
    expect(second.scans).toEqual([expect.objectContaining({ provider: 'stripe', transactions: 1, incremental: true })]);
    expect(second.duplicates.map((d: { key: string }) => d.key)).toEqual([dup.key]);
  });

  it('10. an audit row edited through SQL: UPDATE, DELETE and TRUNCATE are refused; a row changed behind the trigger is found by audit verify', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [
      refundOp('refund:ord_10', pi.payment_intent, 1000),
      refundOp('refund:ord_10b', pi.payment_intent, 500),
    ]);
    expect((await submit(world, 'refund:ord_10')).state).toBe('confirmed');
    const events = (await show(world, 'refund:ord_10')).events;
    expect(events.length).toBeGreaterThanOrEqual(3);
    const intact = expectExit(await world.recon(['audit', 'verify', '--json']), 0).json;
    expect(intact).toMatchObject({ ok: true, operations_checked: 2, broken: [] });

    // The world's store, as every command of the world sees it (PGlite: one open instance at a time).
    const db = await world.db();
    try {
      const count = async () =>
        Number((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM recon.audit_events')).rows[0].n);
      const before = await count();
      await expect(
        db.query(
          `UPDATE recon.audit_events SET detail = '{"edited":true}'::jsonb WHERE operation_id = $1 AND seq = 2`,
          ['refund:ord_10'],
        ),
      ).rejects.toThrow(/append-only/);
      await expect(
        db.query('DELETE FROM recon.audit_events WHERE operation_id = $1', ['refund:ord_10']),
      ).rejects.toThrow(/append-only/);
      await expect(db.query('TRUNCATE recon.audit_events')).rejects.toThrow(/append-only/);
      expect(await count()).toBe(before);

      // An owner who switches the triggers off can still change a row; the hash chain shows it.
      await db.query('ALTER TABLE recon.audit_events DISABLE TRIGGER USER');
      await db.query(
        `UPDATE recon.audit_events SET detail = detail || '{"amount":1}'::jsonb WHERE operation_id = $1 AND seq = 2`,
        ['refund:ord_10'],
      );
      await db.query('ALTER TABLE recon.audit_events ENABLE TRIGGER USER');
      await expect(db.query('DELETE FROM recon.audit_events')).rejects.toThrow(/append-only/);
    } finally {
      await world.release();
    }

    const verify = expectExit(await world.recon(['audit', 'verify', '--json']), 4).json;
    expect(verify.ok).toBe(false);
    expect(verify.operations_checked).toBe(2);
    expect(verify.broken).toEqual([
      expect.objectContaining({ operation_id: 'refund:ord_10', seq: 2, problem: 'hash_mismatch' }),
    ]);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });
});
