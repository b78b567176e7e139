/**
 * `recon mcp` over stdio, driven by the SDK's real Client spawning the built `bin/recon mcp` the
 * way an agent host does. The seed incident of SPEC §9: an agent's refund committed at Stripe, the
 * connection dropped, and the agent asking again — the second click must be a status question.
 * What an agent is told when it changes an amount or must wait for a person is tried in this
 * process (mcp-support.ts `inProcessAgent`), as in mcp-answers.test.ts.
 */
import fs from 'node:fs';
import { afterAll, afterEach, expect, it, vi } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { startWorld } from '../support/world.js';
import { collect } from '../support/cli.js';
import type { World } from '../support/world.js';
import { expectExit, show } from './incidents-support.js';
import {
  expectAction,
  inProcessAgent,
  playSeedIncident,
  refund,
  refundRequests,
  mcpWorld,
  stdioAgent,
  type Agent,
} from './mcp-support.js';

const TOOLS = ['check_action', 'execute_action', 'get_action', 'list_open_actions', 'propose_action'];

describeWorld('recon mcp over stdio', (suite) => {
  /*
   * tools/list and the seed incident share one world and one server child (their own operation ids
   * and payment intents; requests and refunds are counted from each test's start): a child on the
   * embedded store boots PGlite, ~1 s of CPU each. A test that needs the store itself on the
   * embedded store stops the child (`stopShared`); the next `sharedAgent()` starts another. A failed
   * test drops the shared world, so the next one starts afresh.
   */
  let shared: World | undefined;
  let sharedServer: Agent | undefined;
  const sharedWorld = async () => (shared ??= await startWorld({ ...mcpWorld(), backend: suite.backend }));
  const sharedAgent = async () => (sharedServer ??= await stdioAgent(await sharedWorld(), 'support-bot'));
  const stopShared = async () => {
    await sharedServer?.close();
    sharedServer = undefined;
  };
  const dropShared = async () => {
    await stopShared().catch(() => undefined);
    await shared?.close();
    shared = undefined;
  };

  let agent: Agent | undefined;
  afterEach(async ({ task }) => {
    await agent?.close();
    agent = undefined;
    if (task.result?.state === 'fail') await dropShared();
  });
  afterAll(dropShared);

  it('tools/list: the five tools, each with its input and output schema and truthful annotations', async () => {
    const { tools } = await (await sharedAgent()).client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
    for (const t of tools) {
      expect(t.inputSchema.type, t.name).toBe('object');
      expect(t.outputSchema?.type, t.name).toBe('object');
      expect(t.description!.length, t.name).toBeGreaterThan(50);
      if (t.name !== 'list_open_actions')
        expect(t.outputSchema!.required, t.name).toEqual(
          expect.arrayContaining(['operation_id', 'state', 'provider_txn_ids', 'message', 'next']),
        );
    }
    const hints = Object.fromEntries(tools.map((t) => [t.name, t.annotations]));
    expect(hints.get_action).toMatchObject({ readOnlyHint: true });
    expect(hints.list_open_actions).toMatchObject({ readOnlyHint: true });
    expect(hints.execute_action).toMatchObject({ readOnlyHint: false, destructiveHint: true, idempotentHint: true });
    expect(hints.propose_action).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: true });
    expect(hints.check_action).toMatchObject({ readOnlyHint: false, idempotentHint: false });
  });

  // What the tools answer, in this process (inProcessAgent: recon's MCP server on the world's store,
  // each message as JSON text): a person's approval needs no server stopped to free the embedded store.
  it('a changed amount under the same operation_id is refused and nothing is sent; above autoApprove waits for a person; execute is refused until recon ops approve', async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 20000, currency: 'usd' });
    agent = await inProcessAgent(world, 'support-bot');
    const requestsBefore = refundRequests(world);
    const refundsBefore = world.stripe.refunds().length;
    const small = 'refund:ord_7002';
    expectAction(await agent.call('propose_action', refund(small, pi.payment_intent, 1200)), 'approved');
    const same = expectAction(await agent.call('propose_action', refund(small, pi.payment_intent, 1200)), 'approved');
    expect(same.created).toBe(false);

    const changed = await agent.call('propose_action', refund(small, pi.payment_intent, 1900));
    expect(changed.isError).toBe(true);
    const c = expectAction(changed, 'approved');
    expect(c.refused.rule).toBe('payload_frozen');
    expect(c).toMatchObject({ amount: 1200, currency: 'usd' });
    // Not sent yet: the recorded amount in major units, and no invitation to a new operation_id.
    expect(c.message).toMatch(/12\.00 USD/);
    expect(c.message).not.toMatch(/new operation_id/);

    const big = 'refund:ord_7003';
    const waiting = expectAction(await agent.call('propose_action', refund(big, pi.payment_intent, 9000)), 'proposed');
    expect(waiting).toMatchObject({ created: true, approval: null, next: 'get_action' });
    expect(waiting.message).toMatch(/person must approve/);

    const refused = await agent.call('execute_action', { operation_id: big });
    expect(refused.isError).toBe(true);
    const r = expectAction(refused, 'proposed');
    expect(r.refused.rule).toBe('approval_required');
    expect(r.message).toMatch(/recon ops approve/);
    expect(refundRequests(world)).toBe(requestsBefore);
    expect(world.stripe.refunds()).toHaveLength(refundsBefore);

    // A person approves.
    expectExit(await world.recon(['ops', 'approve', big, '--ref', 'FIN-42', '--actor', 'alice']), 0);

    const sent = expectAction(await agent.call('execute_action', { operation_id: big }), 'confirmed');
    expect(sent).toMatchObject({ sent: true, attempt: 1 });
    expect(sent.provider_txn_ids).toHaveLength(1);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent }).map((x) => x.amount)).toEqual([9000]);
    expect(refundRequests(world)).toBe(requestsBefore + 1);

    // The confirmed one is settled; the approved, never-sent one is still listed (not waiting for a person).
    const open = (await agent.call('list_open_actions', {})).structuredContent;
    expect(open.actions.map((a: { operation_id: string }) => a.operation_id)).not.toContain(big);
    expect(open.actions).toContainEqual(
      expect.objectContaining({ operation_id: small, state: 'approved', waits_for_person: false }),
    );
  });

  it('the seed incident: committed then dropped → outcome_unknown, do not retry; execute again sends nothing; check_action confirms; one refund', async () => {
    const world = await sharedWorld();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const agent = await sharedAgent();
    const id = 'refund:ord_7001';
    const calledBefore = agent.transcript.length;
    const ledger = await playSeedIncident(world, agent, id, pi.payment_intent);

    if (process.env.RECON_MCP_TRANSCRIPT)
      fs.writeFileSync(
        process.env.RECON_MCP_TRANSCRIPT,
        JSON.stringify({ transcript: agent.transcript.slice(calledBefore), ledger: ledger.map((r) => r.id) }, null, 2),
      );

    // The audit trail: every call an event of mcp:support-bot; the chain verifies.
    await stopShared();
    const detail = await show(world, id);
    const calls = detail.events.filter((ev) => ev.kind === 'mcp.call');
    expect(calls.map((ev) => (ev as unknown as { detail: { tool: string } }).detail.tool)).toEqual([
      'propose_action',
      'execute_action',
      'execute_action',
      'check_action',
      'get_action',
    ]);
    for (const ev of calls) expect(ev.from_state).toBe(ev.to_state);
    const actors = new Set((detail.events as unknown as { actor: string }[]).map((ev) => ev.actor));
    expect([...actors]).toEqual(['mcp:support-bot']);
    expect(detail.events.at(-1)!.to_state).toBe('confirmed');
    const verify = expectExit(await world.recon(['audit', 'verify', '--json']), 0);
    expect(verify.json.ok).toBe(true);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });

  it('stdin closing stops the server cleanly: exit 0, and the store is free for the next command', async () => {
    const world = await suite.world(mcpWorld());
    await world.release(); // the embedded store admits one process (a world may start on an open one)
    const child = world.spawn(['mcp']);
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'closer', version: '1' } },
    };
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stdin!.write(JSON.stringify(init) + '\n');
    await vi.waitFor(() => expect(out).toContain('"serverInfo"'), { timeout: 60_000, interval: 50 });
    const done = collect(child, { timeoutMs: 30_000 });
    const r = await done;
    expect(r.code, r.stderr).toBe(0);
    // Nothing but protocol messages on stdout.
    for (const line of out.trim().split('\n')) expect(JSON.parse(line).jsonrpc).toBe('2.0');
    expectExit(await world.recon(['ops', 'list', '--json']), 0);
  });
});
