/**
 * What recon tells an agent must never lead it to the duplicate recon exists to prevent (issue 24,
 * SPEC §9), tried with the SDK's real Client against recon's MCP server (the one `recon mcp`
 * serves), in this process on the world's store (mcp-support.ts `inProcessAgent`: each message
 * crosses as JSON text; the built binary over stdio is mcp-stdio.test.ts's): a changed amount on
 * a refund that is done says so and offers no new operation_id; a re-planned id for the same
 * payment is held for a person; what waits for a person is listed; input recon refuses is a tool
 * result naming the field, and nothing is recorded.
 */
import fs from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { expectExit, show } from './incidents-support.js';
import { expectAction, inProcessAgent, refund, refundRequests, mcpWorld, type Agent } from './mcp-support.js';

describeWorld('recon mcp answers', (suite) => {
  let agent: Agent | undefined;
  // Before the world closes (describeWorld's afterEach runs after this one).
  afterEach(async () => {
    await agent?.close();
    agent = undefined;
  });

  it('a changed amount on a confirmed refund says it is already refunded, never a new operation_id; the re-planned id waits for a person; one refund at Stripe', async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 10000, currency: 'usd' });
    agent = await inProcessAgent(world, 'support-bot');
    const id = 'refund:ord_2001';
    expectAction(await agent.call('propose_action', refund(id, pi.payment_intent, 2500)), 'approved');
    const done = expectAction(await agent.call('execute_action', { operation_id: id }), 'confirmed');
    const [re] = done.provider_txn_ids as string[];

    // The changed amount, as a model would try it.
    const changed = await agent.call('propose_action', refund(id, pi.payment_intent, 2600));
    expect(changed.isError).toBe(true);
    const c = expectAction(changed, 'confirmed');
    expect(c.refused.rule).toBe('payload_frozen');
    expect(c.message).toContain(`Already refunded 25.00 USD to this customer (confirmed, ${re})`);
    expect(c.message).toContain('Do not refund again.');
    expect(c.message).not.toMatch(/new operation_id|propose it/i);
    expect(c.next).toBe('none');
    expect(c).toMatchObject({ amount: 2500, currency: 'usd' });

    // The re-planned id: same payment, new id, within autoApprove. Held for a person, naming the first.
    const replanned = 'refund:ord_2001-b';
    const held = expectAction(
      await agent.call('propose_action', {
        ...refund(replanned, pi.payment_intent, 2600),
        client_reference: 'ord_2001',
      }),
      'proposed',
    );
    expect(held).toMatchObject({ created: true, approval: null, held_by: { operation_id: id, state: 'confirmed' } });
    expect(held.message).toContain(`${id} (confirmed)`);
    expect(held.message).toContain('Do not refund again');
    const refusedExec = await agent.call('execute_action', { operation_id: replanned });
    expect(expectAction(refusedExec, 'proposed').refused.rule).toBe('approval_required');
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);

    // What waits for a person is listed, and the order's first refund is found in any state.
    const open = (await agent.call('list_open_actions', {})).structuredContent;
    expect(open.actions).toEqual([
      expect.objectContaining({ operation_id: replanned, state: 'proposed', waits_for_person: true }),
    ]);
    expect(open.message).toMatch(/wait\(s\) for a person/);
    const all = (await agent.call('list_open_actions', { client_reference: 'ord_2001', include_resolved: true }))
      .structuredContent;
    expect(all.actions.map((a: { operation_id: string; state: string }) => [a.operation_id, a.state])).toEqual([
      [replanned, 'proposed'],
      [id, 'confirmed'],
    ]);

    if (process.env.RECON_MCP_TRANSCRIPT)
      fs.writeFileSync(process.env.RECON_MCP_TRANSCRIPT, JSON.stringify(agent.transcript, null, 2));
    await agent.close();
    agent = undefined;

    // The execute_action call is audited in the attempt's claim, before the request was sent and
    // before its outcome: a crash between the two could not lose who asked.
    const events = (await show(world, id)).events as unknown as {
      kind: string;
      to_state: string;
      detail: { tool?: string };
    }[];
    const call = events.findIndex((ev) => ev.kind === 'mcp.call' && ev.detail.tool === 'execute_action');
    expect(events[call - 1]).toMatchObject({ to_state: 'submitting' });
    expect(events.findIndex((ev) => ev.to_state === 'confirmed')).toBeGreaterThan(call);

    // A person sees why it waits, and can still approve a second, deliberate refund.
    const proposed = expectExit(await world.recon(['ops', 'list', '--state', 'proposed', '--json']), 0);
    expect(proposed.json.operations ?? proposed.json).toEqual([
      expect.objectContaining({ id: replanned, review_reason: `held: same target as ${id} (confirmed)` }),
    ]);
    const review = expectExit(await world.recon(['review', 'list', '--json']), 0);
    expect(review.json.operations.map((o: { id: string }) => o.id)).toEqual([replanned]);
    expectExit(await world.recon(['ops', 'approve', replanned, '--ref', 'FIN-7', '--actor', 'alice']), 0);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
    expect(refundRequests(world)).toBe(1);
  });

  it('input recon refuses is a tool result naming the field (invalid_input), and nothing is recorded', async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 10000, currency: 'usd' });
    agent = await inProcessAgent(world);
    const refusedFor = async (tool: string, args: Record<string, unknown>, field: RegExp) => {
      const r = await agent!.call(tool, args);
      expect(r.isError, JSON.stringify(r)).toBe(true);
      expect(r.structuredContent, r.content[0].text).toBeDefined();
      expect(r.structuredContent.refused).toMatchObject({ rule: 'invalid_input', field: expect.stringMatching(field) });
      expect(JSON.parse(r.content[0].text)).toEqual(r.structuredContent);
      return r.structuredContent;
    };
    const ok = refund('refund:ord_3001', pi.payment_intent, 1000);
    await refusedFor('propose_action', { ...ok, operation_id: 'bad id!' }, /^operation_id$/);
    await refusedFor('get_action', { operation_id: 'bad id!' }, /^operation_id$/);
    await refusedFor('list_open_actions', { client_reference: '' }, /^client_reference$/);
    await refusedFor('propose_action', { ...ok, reason: 'the customer\u0000 asked' }, /^reason$/);
    // 1,000 deep: the client's own JSON.stringify in a test worker cannot send 5,000 (test/unit/validate has that).
    let deep: Record<string, unknown> = { end: true };
    for (let i = 0; i < 1000; i++) deep = { a: deep };
    await refusedFor('propose_action', { ...ok, payload: { ...ok.payload, deep } }, /^payload/);
    await refusedFor(
      'propose_action',
      { ...ok, payload: { ...ok.payload, metadata: { note: 'half \uD800 a pair' } } },
      /^payload\.metadata\.note$/,
    );
    await refusedFor(
      'propose_action',
      { ...ok, payload: { ...ok.payload, metadata: { recon_client_reference: 'ord_OTHER' } } },
      /^payload\.metadata\.recon_client_reference$/,
    );
    const missing = await agent.call('get_action', { operation_id: 'refund:ord_3001' });
    expect(expectAction(missing, null).refused.rule).toBe('not_found');

    // The same id and payload for another order is not "the existing operation".
    expectAction(await agent.call('propose_action', ok), 'approved');
    const other = await agent.call('propose_action', { ...ok, client_reference: 'ord_OTHER' });
    expect(other.isError).toBe(true);
    expect(expectAction(other, 'approved').refused.rule).toBe('payload_frozen');
    expect(refundRequests(world)).toBe(0);
  });

  it('check_action that must wait says until when (retry_after) and not that recon is checking', async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 10000, currency: 'usd' });
    agent = await inProcessAgent(world);
    const id = 'refund:ord_4001';
    expectAction(await agent.call('propose_action', refund(id, pi.payment_intent, 1000)), 'approved');
    world.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expectAction(await agent.call('execute_action', { operation_id: id }), 'outcome_unknown');
    const checked = expectAction(await agent.call('check_action', { operation_id: id }), 'outcome_unknown');
    expect(checked.decision).toMatchObject({ decision: 'wait' });
    expect(checked.retry_after).toEqual({ at: expect.any(String), seconds: expect.any(Number) });
    expect(Date.parse(checked.retry_after.at)).toBeGreaterThan(0);
    expect(checked.message).toContain(`ask again with check_action ${id} after`);
    expect(checked.message).not.toMatch(/recon is checking/);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(0);
  });
});
