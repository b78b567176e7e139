/**
 * Agents: `recon mcp --http` (the built CLI, a child process, on PostgreSQL) with 20 concurrent MCP
 * clients (the SDK's Client over StreamableHTTPClientTransport, no Origin header) each doing
 * propose_action → execute_action → check_action on operations of its own, against the Stripe
 * sandbox answering after 20 ms. Rows:
 *
 * - p50 and p99 of each tool call under the 20 clients, each calling again PACE_MS after its last
 *   call was due, less that of the bare stripe-node call it makes (refunds.create for execute,
 *   refunds.list by payment intent for check), measured in the same run from this process by 20
 *   clients at the same pace: the target's rows. The same under 20 clients in a closed loop (each
 *   calling again the moment it is answered), for information: saturation, not an agent's wait. check_action is measured over nothing
 *   when it asked the provider nothing (the sandbox's refunds succeed at once: execute_action has
 *   confirmed them), and says so.
 * - The same, one client making one call at a time (and the bare calls one at a time): recon's own
 *   time per call without queueing behind the other clients. The 20 clients are a closed loop on 2
 *   cores shared by the server, PostgreSQL, the sandbox and the clients themselves: a call waits
 *   about 20 × (CPU per call, all processes) / 2, which the row "CPU per tool call" states.
 * - The server's CPU per call of each tool (/proc, over a batch of that tool alone) and the
 *   statements it sends to PostgreSQL per call (counted in the server by count-queries.ts,
 *   preloaded): figures a busy machine does not move, for information.
 * - The server's RSS (/proc) after many calls and after many sessions opened and ended (DELETE, by
 *   the SDK's terminateSession; never more than 20 live): flat, ≤ 1.1× the figure after the first 100.
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
  postgresTreeCpuMs,
  processCpuMs,
  round,
  writeStripeConfig,
  type BenchContext,
  type Benchmark,
  type BenchRow,
} from './lib.js';

const TOKEN = 'bench-mcp-token-0123456789abcdef0123';
const CLIENTS = 20;
export const LATENCY_MS = 20;
export const AMOUNT = 1000;
const CORES = 2;
/**
 * The paced rows: each of the 20 clients makes its next call PACE_MS after its previous one was due
 * (a model reads an answer and decides before it calls again: seconds, not 0 ms), the clients'
 * schedules staggered across the interval: 20 / 0.3 s ≈ 67 calls/s in all, a third of what the
 * closed loop shows these 2 cores can serve. Latency runs from the call's due time, so a call held up
 * by a slow one before it counts its wait.
 */
const PACE_MS = 300;

export function percentile(xs: number[], p: number): number {
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

/**
 * CLIENTS clients, each making `calls` calls one after the other, call k of client c due at
 * start + (c / CLIENTS + k) × PACE_MS; `fn(c, k, since)` makes it, `since()` the ms from its due time.
 */
async function pacedLoop(
  calls: number,
  fn: (c: number, k: number, since: () => number) => Promise<void>,
): Promise<void> {
  const start = performance.now() + 50;
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      for (let k = 0; k < calls; k++) {
        const due = start + (c / CLIENTS + k) * PACE_MS;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await fn(c, k, () => performance.now() - due);
      }
    }),
  );
}

export const TOOLS = ['propose_action', 'execute_action', 'check_action'] as const;

/** A tool's arguments for the bench's operation number `i` (its payment intent pi_ag_i). */
export function toolArgs(tool: string, i: number): Record<string, unknown> {
  const id = `refund:ag_${i}`;
  return tool === 'propose_action'
    ? {
        provider: 'stripe',
        action: 'refund',
        operation_id: id,
        payload: { payment_intent: `pi_ag_${i}`, amount: AMOUNT, currency: 'usd' },
      }
    : { operation_id: id };
}

export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content).slice(0, 500)}`);
  return (r.structuredContent ?? {}) as Record<string, unknown>;
}

/** A bare stripe-node client of the sandbox (no retries): the floor the tools' rows are measured against. */
export function bareStripe(sandbox: { url: string; apiKey: string }): {
  refunds: {
    create(p: Record<string, unknown>, o?: Record<string, unknown>): Promise<unknown>;
    list(p: Record<string, unknown>): Promise<unknown>;
  };
} {
  const Stripe = createRequire(`${ROOT}/package.json`)('stripe') as new (
    key: string,
    o: Record<string, unknown>,
  ) => ReturnType<typeof bareStripe>;
  const api = new URL(sandbox.url);
  return new Stripe(sandbox.apiKey, {
    host: api.hostname,
    port: Number(api.port),
    protocol: api.protocol.replace(':', ''),
    maxNetworkRetries: 0,
  });
}

export const agentsBench: Benchmark = {
  name: 'agents',
  async run(ctx: BenchContext): Promise<BenchRow[]> {
    const rounds = ctx.quick ? 10 : 170; // per client; 3 calls a round: 600 / 10,200 calls
    const sessions = ctx.quick ? 300 : 1_000;
    const ops = CLIENTS * rounds;
    const solo = ctx.quick ? 40 : 100; // one client, one call at a time: operations, and bare calls of each kind
    const paced = ctx.quick ? 5 : 25; // rounds per paced client (3 calls each; the bare: 2): 100 / 500 calls of each tool
    const dir = mkdir(ctx, 'agents');
    const sandbox = await startStripeSandbox({ latencyMs: LATENCY_MS });
    const store = await freshPgStore(ctx);
    await store.db.close();
    /** The paced phase's payment intents: recon's, then the bare calls'. */
    const pacedBase = ops + CLIENTS * 20 + 2 * solo;
    for (let i = 0; i < pacedBase + 2 * CLIENTS * paced; i++)
      sandbox.seedPaymentIntent({ amount: AMOUNT, currency: 'usd', id: `pi_ag_${i}` });
    const config = writeStripeConfig(dir, {
      db: store.url,
      apiBase: sandbox.url,
      apiKey: sandbox.apiKey,
      provider: { rateLimit: 1_000_000, autoApprove: { maxAmount: 5000, currencies: ['usd'] } },
    });
    // The server counts its statements to PostgreSQL (count-queries.ts, preloaded; SIGUSR2 prints the count).
    const counter = new URL('./count-queries.js', import.meta.url).href;
    const recon = [`${ROOT}/bin/recon`, 'mcp', '--http', '--port', '0', '--config', config];
    const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : [];
    const child = spawn(process.execPath, [...prof, '--expose-gc', '--import', counter, ...recon], {
      cwd: dir,
      env: cleanEnv({ RECON_MCP_TOKEN: TOKEN, RECON_BENCH_ROOT: ROOT }),
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
      let queryWaiter: ((n: number) => void) | undefined;
      let gcWaiter: (() => void) | undefined;
      child.stderr.on('data', () => {
        const m = /queries (\d+)\n$/.exec(err);
        if (m && queryWaiter) queryWaiter(Number(m[1]));
        if (/collected yes[^\n]*\n/.test(err) && gcWaiter) gcWaiter();
      });
      /**
       * The server's RSS after a full garbage collection (count-queries.ts, on SIGWINCH): what it holds,
       * not where its collector happens to be. Read without one, the rows moved between 0.93× and 1.28×
       * from run to run on the same code, the young and old garbage of the last calls included.
       */
      /** The V8 heap in use and the external memory (MB) at each settled RSS, for the log. */
      const heaps: string[] = [];
      const settledRss = () =>
        new Promise<number>((resolve, reject) => {
          err = '';
          const late = setTimeout(
            () =>
              reject(new Error(`the server did not collect its garbage within 30 s; its stderr: ${err.slice(-500)}`)),
            30_000,
          );
          gcWaiter = () => {
            gcWaiter = undefined;
            clearTimeout(late);
            heaps.push(/heap (\S+) external (\S+)/.exec(err)?.slice(1).join('/') ?? '?');
            resolve(rssMb(pid));
          };
          child.kill('SIGWINCH');
        });
      const queries = () =>
        new Promise<number>((resolve) => {
          err = '';
          queryWaiter = resolve;
          child.kill('SIGUSR2');
        });
      /** CPU (ms) of the server, this process (the MCP clients and the Stripe sandbox), PostgreSQL; statements sent. */
      const usage = async () => ({
        server: processCpuMs(pid),
        bench: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
        pg: postgresTreeCpuMs(ctx.pgUrl) ?? NaN,
        queries: await queries(),
      });
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
      const before = await usage();
      const notConfirmed: string[] = [];
      /** check_action calls that asked the provider (`checked: true`); the sandbox's refunds succeed at once, so execute_action confirms them and check_action has nothing to ask. */
      let asked = 0;
      /** What a check_action answered: not confirmed is a failure of the run; `checked` counts in `asked`. */
      const checkedOut = (tool: string, id: string, out: Record<string, unknown>) => {
        if (tool !== 'check_action') return;
        if (out.state !== 'confirmed') notConfirmed.push(`${id}: ${String(out.state)}`);
        if (out.checked === true) asked++;
      };
      await Promise.all(
        clients.map(async ({ client }, c) => {
          for (let r = 0; r < rounds; r++) {
            const i = c * rounds + r;
            for (const tool of TOOLS) checkedOut(tool, `refund:ag_${i}`, await timed(client, tool, toolArgs(tool, i)));
            if (++done === Math.min(100, ops)) rssAfterFirst = await settledRss();
          }
        }),
      );
      const after = await usage();
      const rssAfterCalls = await settledRss();
      const perCall = (k: 'server' | 'bench' | 'pg' | 'queries') => (after[k] - before[k]) / (ops * 3);
      const cpuPerCall = perCall('server') + perCall('bench') + perCall('pg');
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
            // Once: several senders may see the hundredth session at the same time.
            if (opened >= 100 && !rssAfter100Sessions) {
              rssAfter100Sessions = -1;
              rssAfter100Sessions = await settledRss();
            }
          }
        }),
      );
      const rssAfterSessions = await settledRss();
      // 20 clients, paced (PACE_MS), recon's calls then the bare ones at the same pace.
      const pacedTimes: Record<string, number[]> = { propose_action: [], execute_action: [], check_action: [] };
      const pacedCreate: number[] = [];
      const pacedList: number[] = [];
      {
        const pacedClients = await Promise.all(Array.from({ length: CLIENTS }, () => connect(url)));
        await pacedLoop(paced * 3, async (c, k, since) => {
          const i = pacedBase + c * paced + Math.floor(k / 3);
          const id = `refund:ag_${i}`;
          const tool = TOOLS[k % 3];
          const out = await call(pacedClients[c].client, tool, toolArgs(tool, i));
          pacedTimes[tool].push(since());
          checkedOut(tool, id, out);
        });
        await Promise.all(pacedClients.map(end));
      }
      // One client, one call at a time (no queueing behind other clients): each tool's latency, and the
      // server's CPU and statements per call, over a batch of that tool alone.
      const soloTimes: Record<string, number[]> = { propose_action: [], execute_action: [], check_action: [] };
      const soloCost: Record<string, { cpu: number; queries: number }> = {};
      {
        const s = await connect(url);
        const base = ops + CLIENTS * 20;
        for (const tool of Object.keys(soloTimes)) {
          const u0 = await usage();
          for (let k = 0; k < solo; k++) {
            const i = base + k;
            const id = `refund:ag_${i}`;
            const t = performance.now();
            const out = await call(s.client, tool, toolArgs(tool, i));
            soloTimes[tool].push(performance.now() - t);
            checkedOut(tool, id, out);
          }
          const u1 = await usage();
          soloCost[tool] = { cpu: (u1.server - u0.server) / solo, queries: (u1.queries - u0.queries) / solo };
          // Every tool reads the store: a count of none is a counter hooked on a pg recon does not load.
          if (soloCost[tool].queries === 0) throw new Error(`count-queries.ts counted no statement of ${tool}`);
        }
        await end(s);
      }
      // The floor: the bare stripe-node calls recon makes, from here, at the same concurrency.
      const stripe = bareStripe(sandbox);
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
      await pacedLoop(paced * 2, async (c, k, since) => {
        const i = pacedBase + CLIENTS * paced + c * paced + Math.floor(k / 2);
        if (k % 2 === 0) {
          await stripe.refunds.create(
            { payment_intent: `pi_ag_${i}`, amount: AMOUNT, metadata: { recon_operation_id: `bare_${i}` } },
            { idempotencyKey: `bare_${i}` },
          );
          pacedCreate.push(since());
        } else {
          await stripe.refunds.list({ payment_intent: `pi_ag_${i}`, limit: 100 });
          pacedList.push(since());
        }
      });
      const soloCreate: number[] = [];
      const soloList: number[] = [];
      for (let k = 0; k < solo; k++) {
        const i = ops + CLIENTS * 20 + solo + k;
        let t = performance.now();
        await stripe.refunds.create(
          { payment_intent: `pi_ag_${i}`, amount: AMOUNT, metadata: { recon_operation_id: `bare_${i}` } },
          { idempotencyKey: `bare_${i}` },
        );
        soloCreate.push(performance.now() - t);
        t = performance.now();
        await stripe.refunds.list({ payment_intent: `pi_ag_${i}`, limit: 100 });
        soloList.push(performance.now() - t);
      }
      ctx.log(
        `  ${CLIENTS} clients: CPU per tool call ${round(cpuPerCall, 1)} ms (server ${round(perCall('server'), 1)}, ` +
          `bench's MCP clients + sandbox ${round(perCall('bench'), 1)}, PostgreSQL ${round(perCall('pg'), 1)}); ` +
          `${round(perCall('queries'), 1)} statements per call. Closed loop on ${CORES} cores: a call waits ≈ ` +
          `${CLIENTS} × ${round(cpuPerCall, 1)} / ${CORES} = ${round((CLIENTS * cpuPerCall) / CORES)} ms on average`,
      );
      ctx.log(
        `  ${ops * 3} calls by ${CLIENTS} clients, ${sessions} sessions; RSS ${round(rssAfterFirst, 1)} → ${round(rssAfterCalls, 1)} MB (calls), ` +
          `${round(rssAfter100Sessions, 1)} → ${round(rssAfterSessions, 1)} MB (sessions), each after a full GC; ` +
          `V8 heap used / external at those four points (MB): ${heaps.join(', ')}; ${notConfirmed.length} not confirmed`,
      );
      if (notConfirmed.length) throw new Error(`check_action did not confirm: ${notConfirmed.slice(0, 5).join(', ')}`);
      const rows: BenchRow[] = [];
      const p = (xs: number[], q: number) => round(percentile(xs, q), 1);
      // check_action is measured over the bare refunds.list only when it made that call; else over nothing.
      const checkAsks = asked > 0;
      const noCall = (tool: string) => tool === 'check_action' && !checkAsks;
      const NO_CALL =
        'check_action asked the provider nothing: execute_action had confirmed each refund (the sandbox refunds at once), so the whole call is recon’s';
      /** recon's p50 and p99 over the bare call it makes (none: over nothing), under the 20 clients or 1 at a time. */
      type Setting = 'paced' | 'closed' | 'solo';
      const SETTING: Record<Setting, { name: string; bare: string; note: string }> = {
        paced: {
          name: `, ${CLIENTS} clients, each calling ${PACE_MS} ms after its last call was due`,
          bare: `, ${CLIENTS} clients at the same pace`,
          note: `${CLIENTS} agents at once, each calling again ${PACE_MS} ms after its previous call was due (a model's turn takes longer); latency from the due time`,
        },
        closed: {
          name: `, ${CLIENTS} clients, closed loop`,
          bare: `, ${CLIENTS} clients, closed loop`,
          note: `saturation, for information: ${CLIENTS} clients calling again the moment an answer arrives keep both cores busy, so a call mostly waits behind the others (≈ ${CLIENTS} × the CPU per call row / ${CORES}); the paced rows are the target's`,
        },
        solo: {
          name: ', 1 client, 1 call at a time',
          bare: ', 1 at a time',
          note: 'no queueing behind other clients: recon’s own time per call',
        },
      };
      const latencyRows = (tool: string, xs: number[], bare: number[] | null, setting: Setting): BenchRow[] =>
        ([50, 99] as const).map((q) => {
          const over = bare ? p(xs, q) - p(bare, q) : p(xs, q);
          const what = bare ? (tool === 'execute_action' ? 'refunds.create' : 'refunds.list') : 'none';
          const limit = q === 50 ? 10 : 40;
          const note = [SETTING[setting].note, ...(noCall(tool) ? [NO_CALL] : [])].join('; ');
          return {
            bench: 'agents',
            name: `mcp --http ${tool}${SETTING[setting].name}: recon's p${q} over the bare call (call p${q} ${p(xs, q)} ms)`,
            value: round(over, 1),
            unit: 'ms',
            target: setting === 'closed' ? '-' : `≤ ${limit} ms`,
            baseline: bare ? p(bare, q) : null,
            baseline_of: bare ? `bare stripe-node ${what} p${q}${SETTING[setting].bare}` : undefined,
            ratio: bare ? round(p(xs, q) / p(bare, q), 2) : null,
            pass: setting === 'closed' ? null : over <= limit,
            note,
          };
        });
      /** The bare call a tool makes: refunds.create for execute, refunds.list for check when it asked, else none. */
      const bareOf = (tool: string, create: number[], list: number[]) =>
        tool === 'execute_action' ? create : tool === 'check_action' && checkAsks ? list : null;
      for (const tool of TOOLS)
        rows.push(...latencyRows(tool, pacedTimes[tool], bareOf(tool, pacedCreate, pacedList), 'paced'));
      for (const tool of TOOLS)
        rows.push(...latencyRows(tool, times[tool], bareOf(tool, bareCreate, bareList), 'closed'));
      for (const tool of TOOLS) {
        rows.push(...latencyRows(tool, soloTimes[tool], bareOf(tool, soloCreate, soloList), 'solo'), {
          bench: 'agents',
          name: `mcp --http ${tool}: server CPU per call (${round(soloCost[tool].queries, 1)} statements to PostgreSQL per call)`,
          value: round(soloCost[tool].cpu, 2),
          unit: 'ms',
          target: '-',
          baseline: null,
          pass: null,
          note: `the recon process's CPU (/proc) over ${solo} calls of this tool, 1 at a time, divided by ${solo}`,
        });
      }
      rows.push(
        {
          bench: 'agents',
          name: `mcp --http, ${CLIENTS} clients: CPU per tool call on this machine (server ${round(perCall('server'), 1)}, bench clients + sandbox ${round(perCall('bench'), 1)}, PostgreSQL ${round(perCall('pg'), 1)})`,
          value: round(cpuPerCall, 1),
          unit: 'ms',
          target: '-',
          baseline: null,
          pass: null,
          note: `closed loop, ${CLIENTS} clients on ${CORES} cores: a call's latency is at least ≈ ${CLIENTS} × this / ${CORES}`,
        },
        {
          bench: 'agents',
          name: `mcp --http RSS after ${(ops * 3).toLocaleString('en')} tool calls (each RSS read after a full GC)`,
          value: round(rssAfterCalls, 1),
          unit: 'MB',
          target: '≤ 1.1× after the first 100 rounds',
          baseline: round(rssAfterFirst, 1),
          baseline_of: 'after 100 rounds (300 calls)',
          pass: rssAfterCalls <= 1.1 * rssAfterFirst,
        },
        {
          bench: 'agents',
          name: `mcp --http RSS after ${sessions.toLocaleString('en')} sessions opened and ended (after a full GC)`,
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
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      if (prof.length) await exited; // the profile is written as the server exits
      await sandbox.close();
    }
  },
};
