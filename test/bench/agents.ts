/**
 * Agents: `recon mcp --http` (the built CLI, a child process, on PostgreSQL) with 20 concurrent MCP
 * clients (the SDK's Client over StreamableHTTPClientTransport, no Origin header) each doing
 * propose_action → execute_action → check_action on operations of its own, against the Stripe
 * sandbox answering after 20 ms. Rows: p50 and p99 of each tool call, and recon's own part of
 * execute and check: the call's time less that of the bare stripe-node call it makes (refunds.create,
 * refunds.list by payment intent), measured in the same run from this process with the same
 * concurrency. Then the server's RSS (/proc) after many calls and after many sessions opened and
 * ended (DELETE, by the SDK's terminateSession; never more than 20 live): flat, ≤ 1.1× the figure
 * after the first 100.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startStripeSandbox } from '../../src/sandbox/stripe/server.js';
import { cleanEnv } from '../support/cli.js';
import {
  ROOT,
  freshPgStore,
  mkdir,
  round,
  writeStripeConfig,
  type BenchContext,
  type Benchmark,
  type BenchRow,
} from './lib.js';

const TOKEN = 'bench-mcp-token-0123456789abcdef0123';
const CLIENTS = 20;
const LATENCY_MS = 20;
const AMOUNT = 1000;

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function connect(url: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
  });
  const client = new Client({ name: 'bench-agent', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** Ends the session as a well-behaved client does: DELETE, then close. */
async function end(s: { client: Client; transport: StreamableHTTPClientTransport }): Promise<void> {
  await s.transport.terminateSession();
  await s.client.close();
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content).slice(0, 500)}`);
  return (r.structuredContent ?? {}) as Record<string, unknown>;
}

export const agentsBench: Benchmark = {
  name: 'agents',
  async run(ctx: BenchContext): Promise<BenchRow[]> {
    const rounds = ctx.quick ? 10 : 170; // per client; 3 calls a round: 600 / 10,200 calls
    const sessions = ctx.quick ? 300 : 1_000;
    const ops = CLIENTS * rounds;
    const dir = mkdir(ctx, 'agents');
    const sandbox = await startStripeSandbox({ latencyMs: LATENCY_MS });
    const store = await freshPgStore(ctx);
    await store.db.close();
    for (let i = 0; i < ops + CLIENTS * 20; i++)
      sandbox.seedPaymentIntent({ amount: AMOUNT, currency: 'usd', id: `pi_ag_${i}` });
    const config = writeStripeConfig(dir, {
      db: store.url,
      apiBase: sandbox.url,
      apiKey: sandbox.apiKey,
      provider: { rateLimit: 1_000_000, autoApprove: { maxAmount: 5000, currencies: ['usd'] } },
    });
    const child = spawn(process.execPath, [`${ROOT}/bin/recon`, 'mcp', '--http', '--port', '0', '--config', config], {
      cwd: dir,
      env: cleanEnv({ RECON_MCP_TOKEN: TOKEN }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    try {
      let err = '';
      const url = await new Promise<string>((resolve, reject) => {
        child.stderr.on('data', (d: Buffer) => {
          err = (err + d.toString()).slice(-8000);
          const m = /serving (http:\/\/\S+\/mcp)/.exec(err);
          if (m) resolve(m[1]);
        });
        child.once('exit', (code) => reject(new Error(`recon mcp --http exited ${code}: ${err}`)));
      });
      const pid = child.pid!;
      const times: Record<string, number[]> = { propose_action: [], execute_action: [], check_action: [] };
      const timed = async (client: Client, name: string, args: Record<string, unknown>) => {
        const t = performance.now();
        const out = await call(client, name, args);
        times[name].push(performance.now() - t);
        return out;
      };
      // The calls, 20 clients at once, each on operations of its own.
      const clients = await Promise.all(Array.from({ length: CLIENTS }, () => connect(url)));
      let rssAfterFirst = 0;
      let done = 0;
      const notConfirmed: string[] = [];
      await Promise.all(
        clients.map(async ({ client }, c) => {
          for (let r = 0; r < rounds; r++) {
            const i = c * rounds + r;
            const id = `refund:ag_${i}`;
            await timed(client, 'propose_action', {
              provider: 'stripe',
              action: 'refund',
              operation_id: id,
              payload: { payment_intent: `pi_ag_${i}`, amount: AMOUNT, currency: 'usd' },
            });
            await timed(client, 'execute_action', { operation_id: id });
            const checked = await timed(client, 'check_action', { operation_id: id });
            if (checked.state !== 'confirmed') notConfirmed.push(`${id}: ${String(checked.state)}`);
            if (++done === Math.min(100, ops)) rssAfterFirst = rssMb(pid);
          }
        }),
      );
      const rssAfterCalls = rssMb(pid);
      await Promise.all(clients.map(end));
      // Sessions: opened, one call, ended; 20 at a time.
      let opened = 0;
      let rssAfter100Sessions = 0;
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          while (opened < sessions) {
            opened++;
            const s = await connect(url);
            await s.client.listTools();
            await end(s);
            if (opened === 100) rssAfter100Sessions = rssMb(pid);
          }
        }),
      );
      const rssAfterSessions = rssMb(pid);
      // The floor: the bare stripe-node calls recon makes, from here, at the same concurrency.
      const Stripe = createRequire(`${ROOT}/package.json`)('stripe') as new (
        key: string,
        o: Record<string, unknown>,
      ) => {
        refunds: {
          create(p: Record<string, unknown>, o?: Record<string, unknown>): Promise<unknown>;
          list(p: Record<string, unknown>): Promise<unknown>;
        };
      };
      const api = new URL(sandbox.url);
      const stripe = new Stripe(sandbox.apiKey, {
        host: api.hostname,
        port: Number(api.port),
        protocol: api.protocol.replace(':', ''),
        maxNetworkRetries: 0,
      });
      const bareCreate: number[] = [];
      const bareList: number[] = [];
      const bareOps = Math.min(ops, CLIENTS * 20);
      let b = 0;
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          while (b < bareOps) {
            const i = ops + b++;
            let t = performance.now();
            await stripe.refunds.create(
              { payment_intent: `pi_ag_${i}`, amount: AMOUNT, metadata: { recon_operation_id: `bare_${i}` } },
              { idempotencyKey: `bare_${i}` },
            );
            bareCreate.push(performance.now() - t);
            t = performance.now();
            await stripe.refunds.list({ payment_intent: `pi_ag_${i}`, limit: 100 });
            bareList.push(performance.now() - t);
          }
        }),
      );
      ctx.log(
        `  ${ops * 3} calls by ${CLIENTS} clients, ${sessions} sessions; RSS ${round(rssAfterFirst, 1)} → ${round(rssAfterCalls, 1)} MB (calls), ` +
          `${round(rssAfter100Sessions, 1)} → ${round(rssAfterSessions, 1)} MB (sessions); ${notConfirmed.length} not confirmed`,
      );
      if (notConfirmed.length) throw new Error(`check_action did not confirm: ${notConfirmed.slice(0, 5).join(', ')}`);
      const rows: BenchRow[] = [];
      const p = (xs: number[], q: number) => round(percentile(xs, q), 1);
      for (const [tool, bare] of [
        ['propose_action', null],
        ['execute_action', bareCreate],
        ['check_action', bareList],
      ] as const) {
        const xs = times[tool];
        const over50 = bare ? p(xs, 50) - p(bare, 50) : p(xs, 50);
        const over99 = bare ? p(xs, 99) - p(bare, 99) : p(xs, 99);
        const what = bare ? (tool === 'execute_action' ? 'refunds.create' : 'refunds.list') : 'no provider call';
        rows.push(
          {
            bench: 'agents',
            name: `mcp --http ${tool}: recon's p50 over the bare call (${CLIENTS} clients; call p50 ${p(xs, 50)} ms)`,
            value: round(over50, 1),
            unit: 'ms',
            target: '≤ 10 ms',
            baseline: bare ? p(bare, 50) : null,
            baseline_of: bare ? `bare stripe-node ${what} p50` : undefined,
            ratio: bare ? round(p(xs, 50) / p(bare, 50), 2) : null,
            pass: over50 <= 10,
          },
          {
            bench: 'agents',
            name: `mcp --http ${tool}: recon's p99 over the bare call (call p99 ${p(xs, 99)} ms)`,
            value: round(over99, 1),
            unit: 'ms',
            target: '≤ 40 ms',
            baseline: bare ? p(bare, 99) : null,
            baseline_of: bare ? `bare stripe-node ${what} p99` : undefined,
            ratio: bare ? round(p(xs, 99) / p(bare, 99), 2) : null,
            pass: over99 <= 40,
          },
        );
      }
      rows.push(
        {
          bench: 'agents',
          name: `mcp --http RSS after ${(ops * 3).toLocaleString('en')} tool calls`,
          value: round(rssAfterCalls, 1),
          unit: 'MB',
          target: '≤ 1.1× after the first 100 rounds',
          baseline: round(rssAfterFirst, 1),
          baseline_of: 'after 100 rounds (300 calls)',
          pass: rssAfterCalls <= 1.1 * rssAfterFirst,
        },
        {
          bench: 'agents',
          name: `mcp --http RSS after ${sessions.toLocaleString('en')} sessions opened and ended`,
          value: round(rssAfterSessions, 1),
          unit: 'MB',
          target: '≤ 1.1× after the first 100',
          baseline: round(rssAfter100Sessions, 1),
          baseline_of: 'after 100 sessions',
          pass: rssAfterSessions <= 1.1 * rssAfter100Sessions,
        },
      );
      return rows;
    } finally {
      child.kill('SIGTERM');
      await sandbox.close();
    }
  },
};
