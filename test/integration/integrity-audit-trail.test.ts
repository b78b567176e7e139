/**
 * Issue 23, "An audit trail the database role cannot forge": a state changed through SQL cannot be
 * laundered by a note (a read-only MCP `get_action` wrote an `mcp.call` event copying the row's
 * state, and `audit verify` then said ok), and each event starts where the previous one ended.
 */
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { backends, removeTempStores } from '../support/backends.js';
import type { World } from '../support/world.js';
import { expectExit, recordOk, refundOp, show, SLOW_STORE_TIMEOUT_MS } from './incidents-support.js';
import { httpAgent, startInProcessHttpServer, startMcpWorld, type InProcessHttpServer } from './mcp-support.js';

afterAll(() => removeTempStores());
vi.setConfig({ testTimeout: SLOW_STORE_TIMEOUT_MS });

describe.each(backends)('a state changed behind recon stays visible to audit verify, store on $name', (backend) => {
  let world: World | undefined;
  let server: InProcessHttpServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await world?.close();
    world = undefined;
  });

  it('UPDATE … SET state = cancelled, then a read-only get_action: verify still reports the mismatch, and the mcp.call event holds the chain’s state', async () => {
    world = await startMcpWorld(backend);
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_23', pi.payment_intent, 1000)]);
    await (await world.db()).query(`UPDATE recon.operations SET state = 'cancelled' WHERE id = 'refund:ord_23'`);
    const before = expectExit(await world.recon(['audit', 'verify', '--json']), 4).json;
    expect(before.broken).toEqual([
      expect.objectContaining({ operation_id: 'refund:ord_23', problem: 'state_mismatch', expected: 'cancelled' }),
    ]);

    server = await startInProcessHttpServer(world);
    const agent = await httpAgent(server, 'support-bot');
    try {
      const got = await agent.call('get_action', { operation_id: 'refund:ord_23' });
      expect(got.isError).toBeFalsy();
    } finally {
      await agent.close();
    }
    const events = (await show(world, 'refund:ord_23')).events;
    expect(events.map((e) => [e.kind, e.from_state, e.to_state])).toEqual([
      ['recorded', null, 'approved'],
      ['mcp.call', 'approved', 'approved'],
    ]);

    const after = expectExit(await world.recon(['audit', 'verify', '--json']), 4).json;
    expect(after.ok).toBe(false);
    expect(after.broken).toEqual([
      expect.objectContaining({
        operation_id: 'refund:ord_23',
        seq: 2,
        problem: 'state_mismatch',
        expected: 'cancelled',
        found: 'approved',
      }),
    ]);
    expect(world.stripe.refunds()).toHaveLength(0);
  });

  it('a move that starts from a state changed behind recon is a state_gap, even once the chain ends in the row’s state', async () => {
    world = await startMcpWorld(backend);
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_24', pi.payment_intent, 1000, { approval: undefined })]);
    expectExit(await world.recon(['ops', 'approve', 'refund:ord_24', '--ref', 'FIN-1', '--actor', 'alice']), 0);
    // Back to proposed behind recon's back, then approved again through recon: the chain now ends in
    // the row's state, and only the step from approved to "proposed → approved" shows the change.
    await (await world.db()).query(`UPDATE recon.operations SET state = 'proposed' WHERE id = 'refund:ord_24'`);
    expectExit(await world.recon(['ops', 'approve', 'refund:ord_24', '--ref', 'FIN-2', '--actor', 'alice']), 0);
    const verify = expectExit(await world.recon(['audit', 'verify', '--json']), 4).json;
    expect(verify.broken).toEqual([
      {
        operation_id: 'refund:ord_24',
        seq: 3,
        problem: 'state_gap',
        expected: 'approved',
        found: 'proposed',
      },
    ]);
    const human = expectExit(await world.recon(['audit', 'verify']), 4);
    expect(human.stdout).toMatch(/refund:ord_24\s+3\s+state_gap\s+approved\s+proposed/);
  });
});
