/**
 * Issue 10, "Provider payloads validated when recorded": `ops record` asks each provider whether
 * it could send the payload (exit 2, one line naming the field, nothing written), instead of
 * `ops submit` burning attempt 1 as an unknown outcome on a refund of nothing.
 */
import { expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { expectExit, refundOp, shipmentOp } from './incidents-support.js';

describeWorld('ops record validates provider payloads', (suite) => {
  it('a Stripe refund with neither payment_intent nor charge, or a shipment its lookup path cannot find, is refused: exit 2, nothing written', async () => {
    const world = await suite.world({ warehouse: true });
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const good = refundOp('refund:ok_1', pi.payment_intent, 1500);
    const nothingToRefund = { ...good, id: 'refund:bad_1', payload: { amount: 1500, currency: 'usd' } };

    const refused = expectExit(await world.record([good, nothingToRefund]), 2);
    expect(refused.json.error.message).toMatch(/\[1\]: payload\.payment_intent: required/);

    const { client_reference: _ref, ...shipment } = shipmentOp('ship:bad_1', 'ord_9');
    const unfindable = { ...shipment, payload: { sku: 'SKU-1', quantity: 1 } };
    const refusedShipment = expectExit(await world.record([unfindable]), 2);
    expect(refusedShipment.json.error.message).toMatch(/providers\.warehouse\.lookup\.path: \{client_reference\}/);

    const list = expectExit(await world.recon(['ops', 'list', '--json']), 0);
    expect(list.json.operations).toEqual([]);
  });
});
