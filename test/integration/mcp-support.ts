/**
 * Helpers for the `recon mcp` tests: the SDK's real Client connected to the built `bin/recon mcp`
 * over stdio or Streamable HTTP, or to recon's MCP server (src/agent/server.ts) or its Streamable
 * HTTP server (src/agent/http.ts) started in this process on the world's open store, in a test
 * world (sandboxes, config, store), and a transcript of what the client saw.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { mcpAgent } from '../../commands/mcp.js';
import { createDeps } from '../../commands/support/deps.js';
import { serveHttp, type HttpServeOptions } from '../../src/agent/http.js';
import { createAgentServer } from '../../src/agent/server.js';
import { BIN, cleanEnv, ROOT, type JsonDoc } from '../support/cli.js';
import { bufferIO } from '../support/in-process.js';
import type { World, WorldOptions } from '../support/world.js';

export const TOKEN = 'mcp-test-token-0123456789abcdef';

/** A small refund is auto-approved; a larger one waits for a person. */
const AUTO_APPROVE = { maxAmount: 5000, currencies: ['usd'] };

/** The options of an agent's world (describeWorld's `suite.world(mcpWorld())`): a small refund is auto-approved. */
export function mcpWorld(
  stripe: WorldOptions['stripe'] = {},
  stripeConfig: Record<string, unknown> = {},
): Omit<WorldOptions, 'backend'> {
  return { stripe, stripeConfig: { autoApprove: AUTO_APPROVE, ...stripeConfig } };
}

function worldEnv(world: World, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...(cleanEnv({
      STRIPE_API_KEY: world.stripe.apiKey,
      STRIPE_WEBHOOK_SECRET: world.stripe.webhookSecret,
      ...extra,
    }) as Record<string, string>),
  };
}

export interface Agent {
  client: Client;
  /** What the server wrote on stderr. */
  stderr: () => string;
  /** Every tool call and its result, in order, as the client saw them. */
  transcript: { tool: string; args: Record<string, unknown>; result: JsonDoc }[];
  call(tool: string, args: Record<string, unknown>): Promise<JsonDoc>;
  close(): Promise<void>;
}

function agentOf(client: Client, stderr: () => string, close: () => Promise<void>): Agent {
  const transcript: Agent['transcript'] = [];
  return {
    client,
    stderr,
    transcript,
    async call(tool, args) {
      const result = await client.callTool({ name: tool, arguments: args });
      transcript.push({ tool, args, result });
      return result;
    },
    close,
  };
}

/** `recon mcp` over stdio, spawned by the SDK's StdioClientTransport, as an agent host does. */
export async function stdioAgent(world: World, name = 'test-agent'): Promise<Agent> {
  await world.release(); // the embedded store admits one process: the world's in-process commands let go
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp'],
    cwd: world.dir,
    env: worldEnv(world),
    stderr: 'pipe',
  });
  let err = '';
  transport.stderr?.on('data', (d) => (err += d));
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  // listTools caches each tool's outputSchema: from then on callTool validates structuredContent against it.
  await client.listTools();
  return agentOf(
    client,
    () => err,
    () => client.close(),
  );
}

/** A `recon mcp --http` server, in a child process or in this one. */
export interface HttpServer {
  url: string;
  /** What the server wrote for its operator (stderr). */
  stderr: () => string;
}

export interface HttpServerProcess extends HttpServer {
  child: ChildProcess;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

export interface InProcessHttpServer extends HttpServer {
  /** Closes the server and its sessions (what `recon mcp --http` does on SIGTERM); the world's store stays open. */
  close(): Promise<void>;
}

/**
 * `recon mcp --http --port 0` (a port the system chooses, so none is chosen here and then taken by
 * another process before the server binds it), started once its "serving URL" line is on stderr.
 */
export async function startHttpServer(
  world: World,
  env: Record<string, string> = { RECON_MCP_TOKEN: TOKEN },
  args: string[] = [],
): Promise<HttpServerProcess> {
  await world.release(); // the embedded store admits one process: the world's in-process commands let go
  const child = world.spawn(['mcp', '--http', '--port', '0', ...args], { env });
  let err = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`recon mcp --http did not start: ${err}`)), 60_000);
    child.stderr!.on('data', (d) => {
      err += d;
      const serving = /serving (http:\/\/\S+\/mcp)/.exec(err);
      if (serving) {
        clearTimeout(timer);
        resolve(serving[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`recon mcp --http exited ${code}: ${err}`));
    });
  });
  return {
    url,
    child,
    stderr: () => err,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/**
 * recon's Streamable HTTP server (src/agent/http.ts `serveHttp`, the one `recon mcp --http` runs)
 * in this process: the tools on the world's open store (no PGlite boot, no lock to hand over) with
 * the world's config, providers and clock, put together as commands/mcp.ts `runMcp` does, on a port
 * the system chooses. For what the server does with requests; `startHttpServer` for what the
 * process does (the command's checks, its "serving" line, SIGTERM, exit code, the store's lock).
 */
export async function startInProcessHttpServer(
  world: World,
  options: Partial<HttpServeOptions> = {},
): Promise<InProcessHttpServer> {
  const { agent, io, close } = await inProcessAgentContext(world);
  const server = await serveHttp(agent, {
    port: 0,
    host: '127.0.0.1',
    token: TOKEN,
    version: packageVersion(),
    ...options,
  });
  return {
    url: server.url,
    stderr: () => io.err.text,
    async close() {
      await server.close();
      await close();
    },
  };
}

/**
 * The SDK's real Client connected to recon's MCP server (src/agent/server.ts, the one `recon mcp`
 * serves over stdio) in this process, on the world's open store, config and clock: each message
 * crosses as JSON text, as on stdio, without a child process booting the store's runtime. For what
 * the tools answer; stdioAgent for what the process and its stdio do (mcp-stdio.test.ts).
 */
export async function inProcessAgent(world: World, name = 'test-agent'): Promise<Agent> {
  const { agent, io, close } = await inProcessAgentContext(world);
  const server = createAgentServer(agent, packageVersion());
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  for (const side of [clientSide, serverSide]) {
    const send = side.send.bind(side);
    side.send = (message, options) => send(JSON.parse(JSON.stringify(message)) as typeof message, options);
  }
  await server.connect(serverSide);
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(clientSide);
  await client.listTools();
  return agentOf(
    client,
    () => io.err.text,
    async () => {
      await client.close();
      await server.close();
      await close();
    },
  );
}

/** What `recon mcp` gives its tools (commands/mcp.ts `mcpAgent`), on the world's open store and clock. */
async function inProcessAgentContext(world: World) {
  const io = bufferIO();
  const deps = createDeps(
    io,
    { json: false, color: false, yes: false, quiet: false },
    cleanEnv({ STRIPE_API_KEY: world.stripe.apiKey, STRIPE_WEBHOOK_SECRET: world.stripe.webhookSecret }),
    world.dir,
    'mcp',
  );
  const agent = await mcpAgent(deps, await world.db(), () => world.now());
  // The providers deps created; the store is the world's (deps never opened one).
  return { agent, io, close: () => deps.close() };
}

function packageVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The SDK's real Client over Streamable HTTP; `headers` replace the default `Authorization: Bearer TOKEN` or add to it. */
export async function httpAgent(
  server: HttpServer,
  name = 'http-agent',
  token = TOKEN,
  headers: Record<string, string> = {},
): Promise<Agent> {
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } },
  });
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  await client.listTools();
  return agentOf(client, server.stderr, () => client.close());
}

/** The sandbox's count of refund-creating requests: what reached the provider, dropped or not. */
export function refundRequests(world: World): number {
  return world.stripe.stats.byRoute['POST /v1/refunds'] ?? 0;
}

/** Checks the contract every single-operation result carries (SPEC §9). */
export function expectAction(result: JsonDoc, state: string | null): JsonDoc {
  const s = result.structuredContent;
  expect(s, JSON.stringify(result)).toBeDefined();
  expect(s).toEqual(
    expect.objectContaining({
      operation_id: expect.any(String),
      state,
      provider_txn_ids: expect.any(Array),
      message: expect.any(String),
      next: expect.any(String),
    }),
  );
  // The text content is the same document.
  expect(JSON.parse(result.content[0].text)).toEqual(s);
  // A model that reads "failed" clicks again: only a failed operation may say it.
  if (state !== 'failed') expect(result.content[0].text).not.toMatch(/fail/i);
  return s;
}

export function refund(id: string, paymentIntent: string, amount: number) {
  return {
    provider: 'stripe',
    action: 'refund',
    operation_id: id,
    payload: { payment_intent: paymentIntent, amount, currency: 'usd', reason: 'requested_by_customer' },
    client_reference: id.replace(/^refund:/, ''),
    reason: 'the customer returned the order',
  };
}

/**
 * The seed incident of SPEC §9 as an agent plays it: propose (auto-approved), execute into a refund
 * Stripe commits before the connection drops (twice: stripe-node retries once with the same key),
 * told not to retry; execute again sends nothing; check_action finds the refund. Returns the ledger.
 */
export async function playSeedIncident(world: World, agent: Agent, id: string, paymentIntent: string) {
  const pi = { payment_intent: paymentIntent };
  // Requests are counted from here: the world may have served other operations before.
  const requestsBefore = refundRequests(world);

  const proposed = expectAction(await agent.call('propose_action', refund(id, pi.payment_intent, 1500)), 'approved');
  expect(proposed).toMatchObject({ created: true, approval: 'policy:autoApprove', next: 'execute_action' });

  // Stripe commits the refund, then the connection drops; stripe-node's own same-key retry meets the same.
  world.stripe.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
  const executed = await agent.call('execute_action', { operation_id: id });
  expect(executed.isError).toBeFalsy();
  const e = expectAction(executed, 'outcome_unknown');
  expect(e).toMatchObject({ sent: true, attempt: 1, next: 'check_action', provider_txn_ids: [] });
  expect(e.message).toMatch(/may have done it/);
  expect(e.message).toMatch(/Do not try again/);
  expect(e.message).toMatch(/check_action/);
  expect(world.stripe.faults.pending()).toBe(0);
  const requestsAfterExecute = refundRequests(world);
  expect(requestsAfterExecute - requestsBefore).toBe(2); // the attempt and the SDK's retry, both with the operation's key
  expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);

  // The second click: a status question, nothing reaches the provider.
  const again = expectAction(await agent.call('execute_action', { operation_id: id }), 'outcome_unknown');
  expect(again).toMatchObject({ sent: false, attempt_count: 1, next: 'check_action' });
  expect(refundRequests(world)).toBe(requestsAfterExecute);

  const checked = expectAction(await agent.call('check_action', { operation_id: id }), 'confirmed');
  const ledger = world.stripe.refunds({ payment_intent: pi.payment_intent });
  expect(ledger).toHaveLength(1);
  expect(checked).toMatchObject({
    checked: true,
    next: 'none',
    provider_txn_ids: [ledger[0].id],
    decision: { decision: 'confirm', rule: 'found.confirmed' },
  });
  expect(refundRequests(world)).toBe(requestsAfterExecute);

  const got = expectAction(await agent.call('get_action', { operation_id: id }), 'confirmed');
  expect(got.attempts).toHaveLength(1);
  expect(got.attempts[0]).toMatchObject({ number: 1, outcome: 'unknown' });

  return ledger;
}
