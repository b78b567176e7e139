/**
 * `recon mcp --http`: Streamable HTTP at /mcp behind a bearer token, driven by the SDK's real
 * Client. Without the token nothing is recorded; a malformed body gets a JSON-RPC error and the
 * server keeps serving; two agents executing one operation at once make one attempt, one refund.
 *
 * What the server does with requests runs against recon's HTTP server in this process, on the
 * world's open store (mcp-support.ts `startInProcessHttpServer`: no PGlite boot per test). The
 * built binary runs as a child process where the process is the point: SIGTERM, its exit code and
 * the store it frees, and two servers on one PostgreSQL store.
 */
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { backends, removeTempStores } from '../support/backends.js';
import type { World } from '../support/world.js';
import { expectExit, show, SLOW_STORE_TIMEOUT_MS } from './incidents-support.js';
import {
  expectAction,
  httpAgent,
  playSeedIncident,
  refund,
  refundRequests,
  startHttpServer,
  startInProcessHttpServer,
  startMcpWorld,
  stdioAgent,
  TOKEN,
  type Agent,
  type HttpServer,
  type HttpServerProcess,
  type InProcessHttpServer,
} from './mcp-support.js';

afterAll(() => removeTempStores());
vi.setConfig({ testTimeout: SLOW_STORE_TIMEOUT_MS });

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'curl', version: '1' } },
};

function post(server: HttpServer, body: string, headers: Record<string, string> = {}) {
  return fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });
}

describe.each(backends)('recon mcp --http, store on $name', (backend) => {
  let world: World | undefined;
  let server: InProcessHttpServer | undefined;
  let child: HttpServerProcess | undefined;
  const agents: Agent[] = [];
  afterEach(async () => {
    for (const a of agents.splice(0)) await a.close().catch(() => undefined);
    await server?.close();
    server = undefined;
    await child?.stop();
    child = undefined;
    await world?.close();
    world = undefined;
  });

  it('refuses to start without RECON_MCP_TOKEN (exit 2, naming the variable)', async () => {
    world = await startMcpWorld(backend);
    const r = expectExit(await world.recon(['mcp', '--http', '--port', '8765']), 2);
    expect(r.stderr).toMatch(/RECON_MCP_TOKEN/);
  });

  it('the seed incident over HTTP: outcome_unknown, the second execute sends nothing, check_action confirms; one refund', async () => {
    world = await startMcpWorld(backend);
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    server = await startInProcessHttpServer(world);
    const agent = await httpAgent(server, 'support-bot');
    agents.push(agent);
    const ledger = await playSeedIncident(world, agent, 'refund:ord_8000', pi.payment_intent);
    expect(ledger).toHaveLength(1);
    expect(world.stripe.refunds()).toHaveLength(1);
  });

  it('no token or a wrong token → 401 and nothing is recorded or sent', async () => {
    world = await startMcpWorld(backend);
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    server = await startInProcessHttpServer(world);
    const call = {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'propose_action', arguments: refund('refund:ord_8001', pi.payment_intent, 1000) },
    };
    for (const headers of [{}, { authorization: 'Bearer wrong-token' }, { authorization: TOKEN }] as Record<
      string,
      string
    >[]) {
      for (const body of [initialize, call]) {
        const res = await post(server, JSON.stringify(body), headers);
        expect(res.status).toBe(401);
        expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
        expect((await res.json()).error.message).toMatch(/Unauthorized/);
      }
    }
    // The SDK client with a wrong token cannot connect at all.
    await expect(httpAgent(server, 'intruder', 'wrong-token')).rejects.toThrow();

    const agent = await httpAgent(server);
    agents.push(agent);
    const got = await agent.call('get_action', { operation_id: 'refund:ord_8001' });
    expect(got.isError).toBe(true);
    expectAction(got, null);
    expect(refundRequests(world)).toBe(0);
    expect(world.stripe.refunds()).toHaveLength(0);
  });

  it('a malformed JSON-RPC body gets a JSON-RPC error, and the server keeps serving', async () => {
    world = await startMcpWorld(backend);
    server = await startInProcessHttpServer(world);
    const auth = { authorization: `Bearer ${TOKEN}` };
    const notJson = await post(server, '{"jsonrpc": "2.0", "method": ', auth);
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32700 }, id: null });

    const notRpc = await post(server, JSON.stringify({ hello: 'world' }), auth);
    expect(notRpc.status).toBe(400);
    expect((await notRpc.json()).error.code).toEqual(expect.any(Number));

    const agent = await httpAgent(server);
    agents.push(agent);
    // Inside a session, too: a broken message is answered with an error and the session goes on.
    const sessionId = (agent.client.transport as unknown as { sessionId: string }).sessionId;
    const inSession = await post(server, '[{"jsonrpc": "2.0", "id": 9, "method"', {
      ...auth,
      'mcp-session-id': sessionId,
    });
    expect(inSession.status).toBe(400);
    expect((await inSession.json()).error.code).toBe(-32700);
    const list = await agent.call('list_open_actions', {});
    expect(list.structuredContent).toMatchObject({ actions: [], total: 0 });
  });

  it('two agents call execute_action for one operation at once: one attempt, one refund', async () => {
    // A slow provider, so the second call arrives while the first request is in flight.
    world = await startMcpWorld(backend, { latencyMs: 400 });
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    server = await startInProcessHttpServer(world);
    const a = await httpAgent(server, 'agent-a');
    const b = await httpAgent(server, 'agent-b');
    agents.push(a, b);
    const id = 'refund:ord_8002';
    expectAction(await a.call('propose_action', refund(id, pi.payment_intent, 2500)), 'approved');
    const results = await Promise.all([
      a.call('execute_action', { operation_id: id }),
      b.call('execute_action', { operation_id: id }),
    ]);
    const sent = results.map((r) => r.structuredContent.sent);
    expect(sent.sort()).toEqual([false, true]);
    for (const r of results) expect(r.isError).toBeFalsy();
    expect(refundRequests(world)).toBe(1);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
    const got = expectAction(await b.call('get_action', { operation_id: id }), 'confirmed');
    expect(got.attempts).toHaveLength(1);

    await server.close();
    server = undefined;
    const detail = await show(world, id);
    expect(detail.attempts).toHaveLength(1);
    const actors = new Set((detail.events as unknown as { actor: string }[]).map((e) => e.actor));
    expect([...actors].sort()).toEqual(['mcp:agent-a', 'mcp:agent-b']);
    expect(expectExit(await world.recon(['audit', 'verify', '--json']), 0).json.ok).toBe(true);
  });

  it.runIf(backend.name === 'postgres')(
    'two recon mcp servers on one PostgreSQL store, one execute_action each at once: one attempt, one refund',
    async () => {
      world = await startMcpWorld(backend, { latencyMs: 400 });
      const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      const a = await stdioAgent(world, 'agent-a');
      const b = await stdioAgent(world, 'agent-b');
      agents.push(a, b);
      const id = 'refund:ord_8003';
      expectAction(await a.call('propose_action', refund(id, pi.payment_intent, 2500)), 'approved');
      const results = await Promise.all([
        a.call('execute_action', { operation_id: id }),
        b.call('execute_action', { operation_id: id }),
      ]);
      expect(results.map((r) => r.structuredContent.sent).sort()).toEqual([false, true]);
      expect(refundRequests(world)).toBe(1);
      expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
      expect((await show(world, id)).attempts).toHaveLength(1);
    },
  );

  it('SIGTERM stops the server cleanly (exit 0) and frees the store', async () => {
    world = await startMcpWorld(backend);
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    child = await startHttpServer(world);
    const agent = await httpAgent(child);
    agents.push(agent);
    // The process serves a refund end to end (store, provider) before it is stopped.
    const id = 'refund:ord_8004';
    expectAction(await agent.call('propose_action', refund(id, pi.payment_intent, 2500)), 'approved');
    expect(expectAction(await agent.call('execute_action', { operation_id: id }), 'confirmed')).toMatchObject({
      sent: true,
      attempt: 1,
    });
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
    expect(await child.stop()).toBe(0);
    child = undefined;
    const list = expectExit(await world.recon(['ops', 'list', '--json']), 0);
    expect((list.json.operations as { id: string; state: string }[]).map((o) => [o.id, o.state])).toEqual([
      [id, 'confirmed'],
    ]);
  });
});
