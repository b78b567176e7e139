/**
 * Reconciliation against a rate-limited provider, as users run it: `recon run` (a child process)
 * over outcome_unknown operations against the Stripe sandbox with 20 ms latency and a 100 req/s
 * limit, and recon's `rateLimit` set to that same limit (what a user copies from the provider's
 * docs). The sandbox records when each request arrives:
 * - requests above the sandbox's own bucket (capacity one second of its limit, refilled
 *   continuously: each one it refuses is a 429) must be 0; the most arrivals in any sliding 1-second
 *   window are noted;
 * - the sustained rate, from the first lookup to the last, must be ≥ 95% of the limit;
 * - recon's own CPU time per operation (the child's user + system time, start-up included) must
 *   stay under 2 ms; baseline: the same lookups by bare stripe-node, CPU per lookup. The found half
 *   is answered from a listing of the ledger (providers/stripe/scan.ts): the note gives the requests
 *   made and the CPU per request as well.
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { RunSummary } from '../../src/core/reconcile/run.js';
import { startStripeSandbox } from '../../src/sandbox/stripe/server.js';
import {
  expectExit,
  freshPgStore,
  mkdir,
  round,
  runNode,
  runRecon,
  writeStripeConfig,
  type BenchContext,
  type Benchmark,
  type BenchRow,
} from './lib.js';
import { piId, seedOperations, seedSandbox } from './seed.js';

const SANDBOX_LIMIT = 100;

function check(s: RunSummary, n: number, what: string): void {
  if (s.claimed !== n || s.confirmed !== n / 2 || s.waiting !== n / 2) {
    throw new Error(
      `${what}: expected ${n} claimed, ${n / 2} confirmed, ${n / 2} waiting; got ${s.claimed} claimed, ${s.confirmed} confirmed, ` +
        `${s.waiting} waiting, ${s.unavailable} unavailable, ${s.errors.length} errors${s.errors[0] ? ` (${s.errors[0].error})` : ''}`,
    );
  }
}

/** The most arrivals in any half-open 1-second window [t, t + 1000). */
function maxPerSecond(times: number[]): number {
  let max = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= 1000) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

/** The same lookups by bare stripe-node, unthrottled (no sandbox limit here): CPU per lookup of the client. */
const BARE = `
import Stripe from 'stripe';
const [base, key, ...pis] = process.argv.slice(1);
const u = new URL(base);
const stripe = new Stripe(key, { host: u.hostname, port: Number(u.port), protocol: 'http', maxNetworkRetries: 0, telemetry: false });
let i = 0;
await Promise.all(Array.from({ length: 8 }, async () => {
  while (i < pis.length) await stripe.refunds.list({ payment_intent: pis[i++], limit: 100 });
}));
`;

export const reconcileThroughput: Benchmark = {
  name: 'reconcile',
  async run(ctx: BenchContext) {
    const n = ctx.quick ? 600 : 2000;
    const dir = mkdir(ctx, 'reconcile');
    const arrivals: number[] = [];
    const sandbox = await startStripeSandbox({
      latencyMs: 20,
      rateLimit: SANDBOX_LIMIT,
      onRequest: (route) => {
        if (route === 'GET /v1/refunds') arrivals.push(performance.now());
      },
    });
    const store = await freshPgStore(ctx);
    try {
      seedSandbox(sandbox, 'r', n);
      await seedOperations(store.db, 'r', n, new Date());
      const configPath = writeStripeConfig(dir, {
        db: store.url,
        apiBase: sandbox.url,
        apiKey: sandbox.apiKey,
        provider: { rateLimit: SANDBOX_LIMIT, concurrency: 8 },
      });
      const child = await runRecon(ctx, ['run', '--json', '--limit', String(n), '--config', configPath], {
        cwd: dir,
        measureRss: true,
      });
      expectExit(child, 'recon run');
      const summary = JSON.parse(child.stdout) as RunSummary;
      check(summary, n, 'recon run against the sandbox');
      const throttled = sandbox.stats.status[429] ?? 0;
      const lookups = arrivals.length;
      const rate = (lookups - 1) / ((arrivals.at(-1)! - arrivals[0]) / 1000);
      ctx.log(`  recon run: ${n} ops, ${lookups} lookups at ${round(rate, 1)}/s, ${throttled} answered 429`);
      const reconCpu = child.cpuMs! / n;

      // Baseline: the provider calls alone.
      const pis = Array.from({ length: Math.min(n, 1000) }, (_, i) => piId('r', i));
      const bareSandbox = await startStripeSandbox({ latencyMs: 0 });
      let bareCpu: number;
      try {
        seedSandbox(bareSandbox, 'r', pis.length);
        const bare = await runNode(
          ctx,
          ['--input-type=module', '-e', BARE, bareSandbox.url, bareSandbox.apiKey, ...pis],
          {
            measureRss: true,
          },
        );
        expectExit(bare, 'bare stripe-node lookups');
        bareCpu = bare.cpuMs! / pis.length;
      } finally {
        await bareSandbox.close();
      }
      const unhandled = summary.errors.length + summary.unavailable;
      const rows: BenchRow[] = [
        {
          bench: 'reconcile',
          name: `recon run at rateLimit = the sandbox's limit (${SANDBOX_LIMIT}/s): requests above the sandbox's bucket (answered 429)`,
          value: throttled,
          unit: 'req',
          target: '= 0',
          baseline: null,
          pass: throttled === 0 && unhandled === 0,
          note:
            `most lookups arriving in any 1-second window: ${maxPerSecond(arrivals)} (recon sends at most ${SANDBOX_LIMIT} in any ` +
            `1-second window of its own clock; arrivals jitter by the event loop's delays)` +
            (unhandled ? `; ${unhandled} operations ended with an error or unavailable` : ''),
        },
        {
          bench: 'reconcile',
          name: `recon run lookups/s, ${n} ops, sandbox 20 ms latency, limit ${SANDBOX_LIMIT}/s`,
          value: round(rate, 1),
          unit: 'req/s',
          target: `≥ ${0.95 * SANDBOX_LIMIT} req/s`,
          baseline: SANDBOX_LIMIT,
          baseline_of: 'the sandbox limit',
          pass: rate >= 0.95 * SANDBOX_LIMIT,
        },
        {
          bench: 'reconcile',
          name: `recon's own CPU time per operation, recon run against the rate-limited sandbox (start-up included)`,
          value: round(reconCpu, 3),
          unit: 'ms/op',
          target: '< 2 ms/op',
          baseline: round(bareCpu, 3),
          baseline_of: 'bare stripe-node refunds.list, client CPU per lookup',
          pass: reconCpu < 2,
          note:
            `${lookups} requests for ${n} ops: the ${n / 2} found are answered from a listing of the ledger ` +
            `(providers/stripe/scan.ts), the ${n / 2} not found by a lookup each; ${round(child.cpuMs! / lookups, 3)} ms of recon's CPU per request made`,
        },
      ];
      return rows;
    } finally {
      await store.db.close();
      await sandbox.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
};
