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
import http from 'node:http';
import net from 'node:net';
import { afterEach, expect, it, vi } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import type { World } from '../support/world.js';
import type { JsonDoc } from '../support/cli.js';
import { expectExit, show } from './incidents-support.js';
import {
  expectAction,
  httpAgent,
  playSeedIncident,
  refund,
  refundRequests,
  startHttpServer,
  startInProcessHttpServer,
  mcpWorld,
  stdioAgent,
  TOKEN,
  type Agent,
  type HttpServer,
  type HttpServerProcess,
  type InProcessHttpServer,
} from './mcp-support.js';

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

const auth = { authorization: `Bearer ${TOKEN}` };

/** A raw session (initialize, then initialized), for requests the SDK's Client never makes; returns its headers. */
async function rawSession(server: HttpServer, headers: Record<string, string> = auth) {
  const res = await post(server, JSON.stringify(initialize), headers);
  expect(res.status).toBe(200);
  const session = {
    ...headers,
    'mcp-session-id': res.headers.get('mcp-session-id')!,
    'mcp-protocol-version': '2025-06-18',
  };
  const initialized = await post(
    server,
    JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    session,
  );
  expect(initialized.status).toBe(202);
  return session;
}

function toolCall(id: number, name: string, args: Record<string, unknown>) {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
}

/** A POST with a Host header of our choosing (fetch sets its own). */
function postWithHost(server: HttpServer, host: string, body: string): Promise<{ status: number; json: JsonDoc }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: {
          host,
          ...auth,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describeWorld('recon mcp --http', (suite) => {
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
    // The world is closed after this (describeWorld).
  });

  it('refuses to start without RECON_MCP_TOKEN (exit 2, naming the variable)', async () => {
    world = await suite.world(mcpWorld());
    const r = expectExit(await world.recon(['mcp', '--http', '--port', '8765']), 2);
    expect(r.stderr).toMatch(/RECON_MCP_TOKEN/);
  });

  it('the seed incident over HTTP: outcome_unknown, the second execute sends nothing, check_action confirms; one refund', async () => {
    world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    server = await startInProcessHttpServer(world);
    const agent = await httpAgent(server, 'support-bot');
    agents.push(agent);
    const ledger = await playSeedIncident(world, agent, 'refund:ord_8000', pi.payment_intent);
    expect(ledger).toHaveLength(1);
    expect(world.stripe.refunds()).toHaveLength(1);
  });

  it('no token or a wrong token → 401 and nothing is recorded or sent', async () => {
    world = await suite.world(mcpWorld());
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
    world = await suite.world(mcpWorld());
    server = await startInProcessHttpServer(world);
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
    world = await suite.world(mcpWorld({ latencyMs: 400 }));
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

  it('an Origin that is not allowed, or on loopback a Host that is not a loopback name, gets 403 and nothing is recorded (DNS rebinding)', async () => {
    world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    server = await startInProcessHttpServer(world, { allowOrigins: ['https://console.example.com'] });
    const propose = toolCall(2, 'propose_action', refund('refund:ord_8010', pi.payment_intent, 1000));
    // A web page on another origin (a rebound name included) cannot initialize or call a tool, even with the token.
    for (const origin of ['https://evil.example', 'null', 'http://127.0.0.1:1']) {
      for (const body of [JSON.stringify(initialize), propose]) {
        const res = await post(server, body, { ...auth, origin });
        expect(res.status).toBe(403);
        expect((await res.json()).error.message).toMatch(/Origin .* is not allowed.*--allow-origin/);
      }
    }
    await expect(httpAgent(server, 'web-page', TOKEN, { Origin: 'https://evil.example' })).rejects.toThrow(
      /Origin .* is not allowed/,
    );
    // DNS rebinding: evil.example now resolves to 127.0.0.1; the browser sends Host: evil.example.
    for (const host of ['evil.example:8765', 'evil.example', '127.0.0.1.evil.example']) {
      const res = await postWithHost(server, host, JSON.stringify(initialize));
      expect(res.status).toBe(403);
      expect(res.json.error.message).toMatch(/Host .* is not a loopback name/);
    }
    expect(world.stripe.refunds()).toHaveLength(0);
    expect(expectExit(await world.recon(['ops', 'list', '--json']), 0).json.operations).toEqual([]);

    // Loopback names with any port (a forwarded port changes it) and no Origin (not a browser) are served.
    for (const host of ['localhost:9999', '127.0.0.1', '[::1]:8765'])
      expect((await postWithHost(server, host, JSON.stringify(initialize))).status).toBe(200);
    const agent = await httpAgent(server);
    agents.push(agent);
    // An allowed origin is served, with the CORS headers a browser needs to read the answer.
    const page = await httpAgent(server, 'console', TOKEN, { Origin: 'https://console.example.com' });
    agents.push(page);
    expectAction(await page.call('propose_action', refund('refund:ord_8010', pi.payment_intent, 1000)), 'approved');
    const preflight = await fetch(server.url, {
      method: 'OPTIONS',
      headers: { origin: 'https://console.example.com', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://console.example.com');
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    const answered = await post(server, JSON.stringify(initialize), { ...auth, origin: 'https://console.example.com' });
    expect(answered.status).toBe(200);
    expect(answered.headers.get('access-control-expose-headers')).toMatch(/Mcp-Session-Id/);
  });

  it('live sessions are capped (503 with a JSON-RPC error beyond --max-sessions); DELETE frees one, an idle one expires', async () => {
    world = await suite.world(mcpWorld());
    server = await startInProcessHttpServer(world, { maxSessions: 2 });
    const a = await httpAgent(server, 'agent-a');
    const b = await httpAgent(server, 'agent-b');
    agents.push(a, b);
    // 20,000 initialize requests once grew the server to 1.13 GB: beyond the cap each is refused, none is kept.
    for (let i = 0; i < 20; i++) {
      const res = await post(server, JSON.stringify({ ...initialize, id: 100 + i }), auth);
      expect(res.status).toBe(503);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(res.headers.get('mcp-session-id')).toBeNull();
      expect(await res.json()).toMatchObject({
        jsonrpc: '2.0',
        id: 100 + i,
        error: { code: -32000, message: expect.stringMatching(/Too many sessions: .* at most 2 \(--max-sessions\)/) },
      });
    }
    await expect(httpAgent(server, 'agent-c')).rejects.toThrow(/Too many sessions/);
    // The sessions in place go on.
    expect((await a.call('list_open_actions', {})).structuredContent).toMatchObject({ total: 0 });

    // Closing a session (DELETE) frees its place.
    const transport = a.client.transport as unknown as { terminateSession(): Promise<void> };
    await transport.terminateSession();
    const c = await httpAgent(server, 'agent-c');
    agents.push(c);
    await expect(httpAgent(server, 'agent-d')).rejects.toThrow(/Too many sessions/);

    // A session without requests for 10 minutes expires (on the agent's clock): its place is free, its id unknown.
    const sessionOf = (x: Agent) => (x.client.transport as unknown as { sessionId: string }).sessionId;
    const idle = sessionOf(b);
    world.advance(5 * 60_000);
    expect((await c.call('list_open_actions', {})).structuredContent).toMatchObject({ total: 0 });
    world.advance(5 * 60_000 + 1000);
    const d = await httpAgent(server, 'agent-d');
    agents.push(d);
    const expired = await post(server, toolCall(5, 'list_open_actions', {}), {
      ...auth,
      'mcp-session-id': idle,
      'mcp-protocol-version': '2025-06-18',
    });
    expect(expired.status).toBe(404);
    // c was active 5 minutes ago: it is still served.
    expect((await c.call('list_open_actions', {})).structuredContent).toMatchObject({ total: 0 });
    await expect(httpAgent(server, 'agent-e')).rejects.toThrow(/Too many sessions/);
  });

  it('a second request with the id of one in flight in the session gets a JSON-RPC error; the first is answered; one refund', async () => {
    // Stripe's answer is held until released: no provider timeout may end the request first.
    world = await suite.world(mcpWorld({}, { timeout: '60s', lease: '120s' }));
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    server = await startInProcessHttpServer(world);
    const id = 'refund:ord_8011';
    const session = await rawSession(server);
    const proposed = await post(server, toolCall(1, 'propose_action', refund(id, pi.payment_intent, 2500)), session);
    expect((await proposed.json()).result.structuredContent.state).toBe('approved');

    // Stripe commits and holds its answer: execute_action (id 7) is in flight.
    const stripe = world.stripe;
    stripe.faults.inject({ kind: 'hold' });
    const first = post(server, toolCall(7, 'execute_action', { operation_id: id }), session);
    await vi.waitFor(() => expect(stripe.faults.held()).toBe(1), { timeout: 60_000, interval: 20 });

    const second = await post(server, toolCall(7, 'get_action', { operation_id: id }), session);
    expect(second.status).toBe(409);
    expect(await second.json()).toMatchObject({
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32600, message: expect.stringMatching(/id 7 is already in use .* not processed/) },
    });
    // Another id is served meanwhile.
    const other = await post(server, toolCall(8, 'get_action', { operation_id: id }), session);
    expect((await other.json()).result.structuredContent.state).toBe('submitting');

    world.stripe.faults.release();
    const answered = await first;
    expect(answered.status).toBe(200);
    const body = await answered.json();
    expect(body.id).toBe(7);
    expect(body.result.structuredContent).toMatchObject({ operation_id: id, state: 'confirmed', sent: true });
    // The id is free again once answered.
    const again = await post(server, toolCall(7, 'get_action', { operation_id: id }), session);
    expect((await again.json()).result.structuredContent.state).toBe('confirmed');
    expect(refundRequests(world)).toBe(1);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });

  it('a tool call not answered in time gets a timeout error telling the agent not to send it again; nothing is sent twice', async () => {
    // Stripe's answer is held until released: recon's request timeout ends the request, not the provider's.
    world = await suite.world(mcpWorld({}, { timeout: '60s', lease: '120s' }));
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    // Long enough for the request to reach Stripe on a loaded machine (waited for below, not assumed);
    // every second of it is waited out, twice (a run per store backend).
    server = await startInProcessHttpServer(world, { requestTimeoutMs: 2000 });
    const agent = await httpAgent(server);
    agents.push(agent);
    const id = 'refund:ord_8012';
    expectAction(await agent.call('propose_action', refund(id, pi.payment_intent, 2500)), 'approved');
    // Stripe commits and never answers until released: the request cannot finish in time.
    world.stripe.faults.inject({ kind: 'hold' });
    const timedOut = await agent.call('execute_action', { operation_id: id }).catch((err: unknown) => err as Error);
    expect(timedOut).toBeInstanceOf(Error);
    expect((timedOut as Error).message).toMatch(
      /-32001.*Request timed out: .*may still complete it\. Do not send it again/,
    );
    expect((timedOut as Error).message).not.toMatch(/fail/i);
    // The request reached Stripe, once (the store's work before it may outlast the timeout on a busy machine).
    const stripe = world.stripe;
    await vi.waitFor(() => expect(stripe.faults.held()).toBe(1), { timeout: 60_000, interval: 20 });

    world.stripe.faults.release();
    await vi.waitFor(
      async () =>
        expect((await agent.call('get_action', { operation_id: id })).structuredContent.state).toBe('confirmed'),
      { timeout: 60_000, interval: 100 },
    );
    expect(refundRequests(world)).toBe(1);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });

  it('accepts the bearer scheme in any case (RFC 7235); failed authentications from one address are limited (429)', async () => {
    world = await suite.world(mcpWorld());
    server = await startInProcessHttpServer(world);
    const lower = await httpAgent(server, 'lower-case', TOKEN, { Authorization: `bearer ${TOKEN}` });
    agents.push(lower);
    expect((await lower.call('list_open_actions', {})).structuredContent).toMatchObject({ total: 0 });
    expect((await post(server, JSON.stringify(initialize), { authorization: `BEARER ${TOKEN}` })).status).toBe(200);

    for (let i = 0; i < 10; i++)
      expect((await post(server, JSON.stringify(initialize), { authorization: `Bearer guess-${i}` })).status).toBe(401);
    // From then on the address is refused for the rest of the minute, the right token included.
    const limited = await post(server, JSON.stringify(initialize), auth);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await limited.json()).error.message).toMatch(/Too many failed authentications/);
    await expect(httpAgent(server, 'late')).rejects.toThrow(/Too many failed authentications/);
    expect(server.stderr()).toMatch(/10 failed authentications from \S+ within 1m/);

    world.advance(61_000);
    const late = await httpAgent(server, 'late');
    agents.push(late);
    expect((await late.call('list_open_actions', {})).structuredContent).toMatchObject({ total: 0 });
  });

  it('a request body that does not arrive in time gets 408 and its connection is closed; the server keeps serving', async () => {
    world = await suite.world(mcpWorld());
    server = await startInProcessHttpServer(world, { bodyTimeoutMs: 500 });
    const url = new URL(server.url);
    // Slow loris: headers announce 1,000 bytes, ten arrive, the rest never does.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () => {
        socket.write(
          `POST /mcp HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${TOKEN}\r\n` +
            'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' +
            'Content-Length: 1000\r\n\r\n{"jsonrpc"',
        );
      });
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString()));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(answer).toMatch(/Connection: close/i);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: { code: -32000, message: expect.stringMatching(/request body did not arrive within 500ms/) },
    });
    const agent = await httpAgent(server);
    agents.push(agent);
    expect((await agent.call('list_open_actions', {})).structuredContent).toMatchObject({ total: 0 });
  });

  it('refuses to serve beyond loopback with a token shorter than 32 characters, or a bad --allow-origin (exit 2, nothing started)', async () => {
    world = await suite.world(mcpWorld());
    const short = expectExit(
      await world.recon(['mcp', '--http', '--port', '0', '--host', '0.0.0.0'], {
        env: { RECON_MCP_TOKEN: 'short-token' },
      }),
      2,
    );
    expect(short.stderr).toMatch(
      /RECON_MCP_TOKEN: 11 characters; serving beyond loopback \(--host 0\.0\.0\.0\) needs at least 32/,
    );
    for (const origin of ['console.example.com', 'https://console.example.com/app', 'ftp://x.example']) {
      const bad = expectExit(
        await world.recon(['mcp', '--http', '--port', '0', '--allow-origin', origin], {
          env: { RECON_MCP_TOKEN: TOKEN },
        }),
        2,
      );
      expect(bad.stderr).toMatch(/--allow-origin: .* is not an origin/);
    }
    const stdio = expectExit(await world.recon(['mcp', '--max-sessions', '5']), 2);
    expect(stdio.stderr).toMatch(/only with --http/);
  });

  it.runIf(suite.backend.name === 'postgres')(
    'two recon mcp servers on one PostgreSQL store, one execute_action each at once: one attempt, one refund',
    async () => {
      world = await suite.world(mcpWorld({ latencyMs: 400 }));
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
    world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    child = await startHttpServer(world, { RECON_MCP_TOKEN: TOKEN }, [
      '--max-sessions',
      '1',
      '--allow-origin',
      'https://console.example.com',
    ]);
    const agent = await httpAgent(child, 'console', TOKEN, { Origin: 'https://console.example.com' });
    agents.push(agent);
    // The flags reach the server: another origin gets 403, a second session 503.
    expect((await post(child, JSON.stringify(initialize), { ...auth, origin: 'https://evil.example' })).status).toBe(
      403,
    );
    expect((await post(child, JSON.stringify(initialize), auth)).status).toBe(503);
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
