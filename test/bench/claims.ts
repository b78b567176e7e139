/**
 * Claims under contention: 4 `recon run` processes against one PostgreSQL over the same backlog,
 * with a provider that answers at once (sandbox latency 0, no rate limit). Every operation must be
 * decided exactly once across the 4 JSON outputs (SKIP LOCKED leases), at ≥ 2,000 decisions/s in
 * total. Every operation has its refund, so each process answers its batches from one listing of
 * the ledger (providers/stripe/scan.ts); the requests made are counted and noted. Baselines: one
 * process over a quarter of the backlog, and the same lookups one by one by bare stripe-node.
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { startStripeSandbox } from '../../src/sandbox/stripe/server.js';
import {
  dropBenchDatabases,
  expectExit,
  freshPgStore,
  mkdir,
  postgresCpuMs,
  round,
  runNode,
  runRecon,
  writeStripeConfig,
  type BenchContext,
  type Benchmark,
  type ChildResult,
} from './lib.js';
import { seedOperations, seedSandbox } from './seed.js';

const WORKERS = 4;

/**
 * The provider calls alone, as a ceiling: the same lookups (stripe-node `refunds.list` by payment
 * intent, 32 in flight) from WORKERS plain node processes against the same sandbox, with no store
 * and no rule. Whatever recon does per operation comes on top of this.
 */
const BARE_LOOKUPS = `
import Stripe from 'stripe';
const [base, key, prefix, from, to] = process.argv.slice(1);
const u = new URL(base);
const stripe = new Stripe(key, { host: u.hostname, port: Number(u.port), protocol: 'http', maxNetworkRetries: 0, telemetry: false });
let i = Number(from);
await Promise.all(Array.from({ length: 32 }, async () => {
  while (i < Number(to)) {
    const k = i++;
    const page = await stripe.refunds.list({ payment_intent: 'pi_' + prefix + '_' + k, limit: 100 });
    if (page.data.length !== 1) throw new Error('expected one refund for ' + k);
  }
}));
`;

async function bareLookups(ctx: BenchContext, o: { n: number; apiBase: string; apiKey: string; prefix: string }) {
  const per = o.n / WORKERS;
  const self0 = process.cpuUsage();
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: WORKERS }, (_, w) =>
      runNode(
        ctx,
        [
          '--input-type=module',
          '-e',
          BARE_LOOKUPS,
          o.apiBase,
          o.apiKey,
          o.prefix,
          String(w * per),
          String((w + 1) * per),
        ],
        { measureRss: true },
      ),
    ),
  );
  const ms = performance.now() - t0;
  const self = process.cpuUsage(self0);
  for (const [i, r] of results.entries()) expectExit(r, `bare lookups (process ${i + 1})`);
  return {
    rate: o.n / (ms / 1000),
    clientCpu: results.reduce((sum, r) => sum + (r.cpuMs ?? 0), 0) / o.n,
    sandboxCpu: (self.user + self.system) / 1000 / o.n,
  };
}

async function pass(
  ctx: BenchContext,
  o: { prefix: string; n: number; workers: number; apiBase: string; apiKey: string },
) {
  const dir = mkdir(ctx, `claims-${o.prefix}`);
  const store = await freshPgStore(ctx);
  try {
    await seedOperations(store.db, o.prefix, o.n, new Date());
    const config = writeStripeConfig(dir, {
      db: store.url,
      apiBase: o.apiBase,
      apiKey: o.apiKey,
      provider: { rateLimit: 1_000_000, concurrency: 32 },
    });
    const pg0 = postgresCpuMs(ctx.pgUrl);
    const self0 = process.cpuUsage();
    const t0 = performance.now();
    const results: ChildResult[] = await Promise.all(
      Array.from({ length: o.workers }, () =>
        runRecon(ctx, ['run', '--json', '--limit', String(o.n), '--config', config], {
          cwd: dir,
          measureRss: true,
          nodeArgs: process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : [],
        }),
      ),
    );
    const ms = performance.now() - t0;
    const self = process.cpuUsage(self0);
    await new Promise((resolve) => setTimeout(resolve, 300)); // let the server reap the closed backends
    const pg1 = postgresCpuMs(ctx.pgUrl);
    const cpu = {
      recon: results.reduce((sum, r) => sum + (r.cpuMs ?? 0), 0) / o.n,
      postgres: pg0 !== null && pg1 !== null ? (pg1 - pg0) / o.n : null,
      sandbox: (self.user + self.system) / 1000 / o.n,
    };
    const decided = new Map<string, number>();
    for (const [i, r] of results.entries()) {
      expectExit(r, `recon run (worker ${i + 1})`);
      const summary = JSON.parse(r.stdout) as { decisions: { id: string }[]; errors: unknown[]; confirmed: number };
      if (summary.confirmed !== summary.decisions.length)
        throw new Error(`worker ${i + 1}: ${summary.decisions.length - summary.confirmed} decisions were not confirm`);
      if (summary.errors.length)
        throw new Error(`worker ${i + 1}: ${summary.errors.length} errors, e.g. ${JSON.stringify(summary.errors[0])}`);
      for (const d of summary.decisions) decided.set(d.id, (decided.get(d.id) ?? 0) + 1);
    }
    const doubles = [...decided.values()].filter((c) => c > 1).length;
    return {
      ms,
      cpu,
      doubles,
      missing: o.n - decided.size,
      cpuPerWorker: results.map((r) => Math.round(r.cpuMs ?? 0)),
      perWorker: results.map((r) => (JSON.parse(r.stdout) as { decisions: unknown[] }).decisions.length),
    };
  } finally {
    await store.db.close();
    await dropBenchDatabases(ctx); // so that autovacuum of this pass's rows does not run during the next
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export const claims: Benchmark = {
  name: 'claims',
  async run(ctx: BenchContext) {
    const n = ctx.quick ? 4000 : 12_000;
    let requests = 0;
    const sandbox = await startStripeSandbox({ latencyMs: 0, onRequest: () => requests++ });
    try {
      // Every operation is found (→ confirmed), so a decided operation leaves the backlog for good and
      // any operation decided twice was claimed twice. (A `wait` gives its lease back, and a pass that
      // starts after it may look again: a later look, not a double claim.)
      seedSandbox(sandbox, 'c', n, { every: true });
      seedSandbox(sandbox, 'b', n / WORKERS, { every: true });
      const requests0 = requests;
      const contended = await pass(ctx, {
        prefix: 'c',
        n,
        workers: WORKERS,
        apiBase: sandbox.url,
        apiKey: sandbox.apiKey,
      });
      const contendedRequests = requests - requests0;
      ctx.log(
        `  ${WORKERS} workers: ${n} ops in ${Math.round(contended.ms)} ms, decisions per worker ${contended.perWorker.join('/')} (CPU ${contended.cpuPerWorker.join('/')} ms), ${contendedRequests} requests to the sandbox`,
      );
      const single = await pass(ctx, {
        prefix: 'b',
        n: n / WORKERS,
        workers: 1,
        apiBase: sandbox.url,
        apiKey: sandbox.apiKey,
      });
      const bare = await bareLookups(ctx, { n, apiBase: sandbox.url, apiKey: sandbox.apiKey, prefix: 'c' });
      ctx.log(`  ${WORKERS} processes of bare stripe-node lookups: ${round(bare.rate, 0)}/s`);
      const rate = n / (contended.ms / 1000);
      const c = contended.cpu;
      const perOp = c.recon + (c.postgres ?? 0) + c.sandbox;
      return [
        {
          bench: 'claims',
          name: `${WORKERS} × recon run on PostgreSQL, ${n} ops: operations decided more than once`,
          value: contended.doubles,
          unit: 'ops',
          target: '= 0',
          baseline: null,
          pass: contended.doubles === 0 && contended.missing === 0,
          note: contended.missing ? `${contended.missing} operations were not decided at all` : undefined,
        },
        {
          bench: 'claims',
          name: `${WORKERS} × recon run on PostgreSQL, ${n} ops, instant provider: decided/s in total`,
          value: round(rate, 0),
          unit: 'ops/s',
          target: '≥ 2000 ops/s',
          baseline: round(bare.rate, 0),
          baseline_of: `${WORKERS} processes of bare stripe-node lookups, same sandbox`,
          pass: rate >= 2000,
          note: `1 process over ${n / WORKERS} ops: ${round(n / WORKERS / (single.ms / 1000), 0)}/s. Requests to the sandbox: ${contendedRequests} for ${n} ops (recon run lists the ledger for a large backlog, see providers/stripe/scan.ts; one lookup each costs stripe-node ≈ ${round(bare.clientCpu, 2)} ms of CPU, see the bare-lookups row). CPU per operation: recon ${round(c.recon, 2)} ms, PostgreSQL ${c.postgres === null ? '?' : round(c.postgres, 2)} ms, sandbox (this process) ${round(c.sandbox, 2)} ms`,
        },
        {
          bench: 'claims',
          name: `${WORKERS} processes of bare stripe-node refunds.list against the same sandbox (no store, no rule): lookups/s`,
          value: round(bare.rate, 0),
          unit: 'req/s',
          target: '-',
          baseline: null,
          pass: null,
          note: `CPU per lookup: client ${round(bare.clientCpu, 2)} ms, sandbox ${round(bare.sandboxCpu, 2)} ms: the provider calls alone take ${round(bare.clientCpu + bare.sandboxCpu, 2)} of the 1.0 ms of CPU per operation that 2,000/s on 2 cores allows`,
        },
        {
          bench: 'claims',
          name: `${WORKERS} × recon run: the same work's ceiling on 2 idle cores (2000 ms of CPU per s ÷ CPU per operation)`,
          value: round(2000 / perOp, 0),
          unit: 'ops/s',
          target: '-',
          baseline: null,
          pass: null,
        },
      ];
    } finally {
      await sandbox.close();
    }
  },
};
