/**
 * The README's library example runs as written (issue 24): its code block is read from README.md
 * and run against a test world (the Stripe sandbox, the world's store and config, found as the CLI
 * finds them through RECON_CONFIG). A second `act` with the same id sends nothing; a changed amount
 * is refused with the MCP tools' own words; the sandbox holds one refund.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openRecon, type Recon } from '../../src/index.js';
import { ROOT } from '../support/cli.js';
import { describeWorld } from '../support/describe-world.js';
import { mcpWorld, refundRequests } from './mcp-support.js';

/** The ```ts block under "## Library API", its import of 'recon' pointed at this checkout. */
function readmeExample(dir: string): string {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Library API'));
  const code = /```ts\n([\s\S]*?)```/.exec(section)![1];
  const imports = code.split('\n').filter((l) => l.startsWith('import '));
  const body = code.split('\n').filter((l) => !l.startsWith('import '));
  const file = path.join(dir, 'readme-example.ts');
  fs.writeFileSync(
    file,
    [
      ...imports.map((l) => l.replace("'recon'", JSON.stringify(path.join(ROOT, 'src/index.ts')))),
      'export default async function example(order: { id: string; paymentIntent: string; refundCents: number }, ticket: string) {',
      ...body,
      '  return r;',
      '}',
    ].join('\n'),
  );
  return file;
}

/** Typed end to end: the compiler checks a Stripe refund's payload (`npm run typecheck`; never called). */
export function typedPayloads(recon: Recon) {
  void recon.act({
    id: 'x',
    provider: 'stripe',
    action: 'refund',
    // @ts-expect-error amount is a number of minor units, not a string
    payload: { payment_intent: 'pi_1', amount: '25.00' },
  });
  void recon.act({
    id: 'x',
    provider: 'stripe',
    action: 'refund',
    // @ts-expect-error a Stripe refund has no field "amount_cents"
    payload: { payment_intent: 'pi_1', amount_cents: 1 },
  });
  // Another provider's action takes its own fields.
  void recon.act({ id: 'x', provider: 'warehouse', action: 'shipment.create', payload: { sku: 'A-1', qty: 2 } });
}

describeWorld('the library facade', (suite) => {
  const saved = { ...process.env };
  afterEach(() => {
    for (const k of ['RECON_CONFIG', 'STRIPE_API_KEY', 'STRIPE_WEBHOOK_SECRET', 'RECON_DB', 'DATABASE_URL'])
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
  });

  it("the README's example refunds once; act again sends nothing; a changed amount is refused as the tools refuse it", async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 10000, currency: 'usd' });
    await world.release(); // the embedded store admits one opener: the example opens it
    Object.assign(process.env, {
      RECON_CONFIG: path.join(world.dir, 'recon.config.json'),
      STRIPE_API_KEY: world.stripe.apiKey,
      STRIPE_WEBHOOK_SECRET: world.stripe.webhookSecret,
    });
    delete process.env.RECON_DB;
    delete process.env.DATABASE_URL;
    const file = readmeExample(world.dir);
    const example = (await import(file)) as {
      default: (order: { id: string; paymentIntent: string; refundCents: number }, ticket: string) => Promise<unknown>;
    };
    const order = { id: 'ord_5001', paymentIntent: pi.payment_intent, refundCents: 2599 };
    const r = await example.default(order, 'FIN-1');
    expect(r).toMatchObject({ operation_id: 'refund:ord_5001', state: 'confirmed', next: 'none', sent: true });
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);

    const recon = await openRecon();
    try {
      const again = await recon.act({
        id: 'refund:ord_5001',
        provider: 'stripe',
        action: 'refund',
        payload: { payment_intent: pi.payment_intent, amount: 2599, currency: 'usd' },
        approval: 'FIN-1',
        client_reference: 'ord_5001',
      });
      expect(again).toMatchObject({ state: 'confirmed', sent: false });
      const changed = await recon.act({
        id: 'refund:ord_5001',
        provider: 'stripe',
        action: 'refund',
        payload: { payment_intent: pi.payment_intent, amount: 2600, currency: 'usd' },
        approval: 'FIN-1',
        client_reference: 'ord_5001',
      });
      expect(changed.refused?.rule).toBe('payload_frozen');
      expect(changed.message).toMatch(/^Refused: Already refunded 25\.99 USD to this customer \(confirmed, re_/);
      expect((await recon.status('refund:ord_5001')).state).toBe('confirmed');
      expect((await recon.check('refund:ord_5001')).state).toBe('confirmed');
    } finally {
      await recon.close();
    }
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
    expect(refundRequests(world)).toBe(1);
  });
});
