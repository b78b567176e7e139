/**
 * Reconciliation throughput against a rate-limited provider: `recon run` (a child process) over
 * outcome_unknown operations against the Stripe sandbox with 20 ms latency and a 100 req/s
 * limit, recon configured a little under it. recon must use ≥ 90% of the limit without leaving a
 * 429 unhandled, and its own time per operation (the same pass, `runPass` in-process against an
 * in-memory provider, on a copy of the store) must stay under 2 ms.
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../../src/config.js';
import type { CoreContext } from '../../src/core/context.js';
import { runPass, type RunSummary } from '../../src/core/run.js';
import { startStripeSandbox } from '../../src/sandbox/stripe/server.js';
import {
  expectExit,
  freshPgStore,
  mkdir,
  round,
  runRecon,
  writeStripeConfig,
  type BenchContext,
  type Benchmark,
  type BenchRow,
} from './lib.js';
import { instantProvider, seedOperations, seedSandbox } from './seed.js';

const SANDBOX_LIMIT = 100;
const CONFIGURED_LIMIT = 95;

function check(s: RunSummary, n: number, what: string): void {
  if (s.claimed !== n || s.confirmed !== n / 2 || s.waiting !== n / 2) {
    throw new Error(
      `${what}: expected ${n} claimed, ${n / 2} confirmed, ${n / 2} waiting; got ${s.claimed} claimed, ${s.confirmed} confirmed, ` +
        `${s.waiting} waiting, ${s.unavailable} unavailable, ${s.errors.length} errors${s.errors[0] ? ` (${s.errors[0].error})` : ''}`,
    );
  }
}

export const reconcileThroughput: Benchmark = {
  name: 'reconcile',
  async run(ctx: BenchContext) {
    const n = ctx.quick ? 500 : 5000;
    const dir = mkdir(ctx, 'reconcile');
    const sandbox = await startStripeSandbox({ latencyMs: 20, rateLimit: SANDBOX_LIMIT });
    const store = await freshPgStore(ctx);
    const instantStore = await freshPgStore(ctx);
    try {
      seedSandbox(sandbox, 'r', n);
      const now = new Date();
      await seedOperations(store.db, 'r', n, now);
      await seedOperations(instantStore.db, 'r', n, now);
      const configPath = writeStripeConfig(dir, {
        db: store.url,
        apiBase: sandbox.url,
        apiKey: sandbox.apiKey,
        provider: { rateLimit: CONFIGURED_LIMIT, concurrency: 8 },
      });
      // recon runs as users run it, in its own process; the sandbox's request counter, polled from
      // here, gives the sustained rate (from the first lookup to the last, start-up excluded).
      const samples: { t: number; count: number }[] = [];
      const lists = () => sandbox.stats.byRoute['GET /v1/refunds'] ?? 0;
      const poll = setInterval(() => samples.push({ t: performance.now(), count: lists() }), 25);
      const t0 = performance.now();
      const child = await runRecon(ctx, ['run', '--json', '--limit', String(n), '--config', configPath], { cwd: dir });
      const passMs = performance.now() - t0;
      clearInterval(poll);
      expectExit(child, 'recon run');
      const summary = JSON.parse(child.stdout) as RunSummary;
      check(summary, n, 'recon run against the sandbox');
      const first = samples.find((x) => x.count > 0);
      const last = samples.find((x) => x.count >= lists()) ?? samples[samples.length - 1];
      if (!first || !last || last.t <= first.t)
        throw new Error('too few samples of the sandbox counter to compute a rate');
      const rate = (last.count - first.count) / ((last.t - first.t) / 1000);
      const throttled = sandbox.stats.status[429] ?? 0;
      ctx.log(
        `  recon run: ${n} ops in ${Math.round(passMs)} ms, ${lists()} list requests, ${throttled} answered 429 (and retried)`,
      );

      const config = await loadConfig({ flag: configPath, env: {}, cwd: dir });
      const capabilities = config.providers.stripe.capabilities;
      const instantCore: CoreContext = { db: instantStore.db, actor: 'bench', now: () => new Date() };
      const fake = instantProvider('r', capabilities);
      const t1 = performance.now();
      const instant = await runPass(instantCore, async () => fake, { limit: n });
      const instantMs = performance.now() - t1;
      check(instant, n, 'pass against the instant provider');
      const ownPerOp = instantMs / n;
      const unhandled = summary.errors.length + summary.unavailable;

      const rows: BenchRow[] = [
        {
          bench: 'reconcile',
          name: `recon run lookups/s, ${n} ops, sandbox 20 ms latency, limit ${SANDBOX_LIMIT}/s (recon at ${CONFIGURED_LIMIT})`,
          value: round(rate, 1),
          unit: 'req/s',
          target: `≥ ${0.9 * SANDBOX_LIMIT} req/s`,
          baseline: SANDBOX_LIMIT,
          baseline_of: 'the sandbox limit',
          pass: rate >= 0.9 * SANDBOX_LIMIT,
          note: ctx.quick ? 'quick: the initial token-bucket burst weighs more in a short pass' : undefined,
        },
        {
          bench: 'reconcile',
          name: `recon run unhandled 429s (errors + unavailable decisions; sandbox answered ${throttled}× 429)`,
          value: unhandled,
          unit: 'ops',
          target: '= 0',
          baseline: null,
          pass: unhandled === 0,
        },
        {
          bench: 'reconcile',
          name: `recon's own time per operation (runPass in-process, in-memory provider, concurrency 8)`,
          value: round(ownPerOp, 3),
          unit: 'ms/op',
          target: '< 2 ms/op',
          baseline: round(passMs / n, 3),
          baseline_of: 'recon run against the sandbox, start-up included',
          pass: ownPerOp < 2,
        },
      ];
      return rows;
    } finally {
      await store.db.close();
      await instantStore.db.close();
      await sandbox.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
};
