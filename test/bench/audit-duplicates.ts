/**
 * `recon audit duplicates --full --json` over a large Stripe ledger (the sandbox, hosted by this
 * process), run as a child process so its peak RSS (VmHWM at exit) is recon's alone. Memory must
 * stay under 200 MB and flat as the ledger grows 4×; time must grow linearly with the pages read.
 * 1 refund in 100 has a same-charge same-amount twin, which the audit must report.
 *
 * Both runs pin V8's young generation at its largest size (YOUNG_GEN). By default it starts at
 * 2 × 8 MB and V8 doubles it once, for good, when enough has survived scavenges since start-up: a run
 * long enough (every full-size run, the quick mode's 50k) ends with 16 MB more RSS than one too short
 * to get there (the quick mode's 10k), whatever the ledger holds. That step made the quick mode's
 * RSS row 1.18× (79.5 → 95.1 MB) while the live heap after each scavenge stayed at ~11.5 MB in both
 * (node --trace-gc); with the young generation pinned the same runs measure 95.9 → 97.9 MB (1.02×).
 * So the ratio is the growth of what recon keeps, not the moment of a one-time V8 resize.
 */
import fs from 'node:fs';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import {
  expectExit,
  freshPgStore,
  mkdir,
  round,
  runRecon,
  writeStripeConfig,
  type BenchContext,
  type Benchmark,
} from './lib.js';

/** V8's default maximum semi-space on 64-bit (MB), as minimum too: the young generation never resizes. */
const YOUNG_GEN = ['--min-semi-space-size=16', '--max-semi-space-size=16'];

const BASE_CREATED = Math.floor(Date.parse('2026-01-01T00:00:00Z') / 1000);

/**
 * Adds refunds `from`..`to-1`, each older than the last (the sandbox keeps its list newest first,
 * so older seeds append instead of shifting the whole array). Every 100th has a duplicate.
 */
function seedLedger(sandbox: StripeSandbox, from: number, to: number): number {
  let duplicates = 0;
  for (let i = from; i < to; i++) {
    const created = BASE_CREATED - i * 60;
    const amount = 500 + (i % 9000);
    const refund = sandbox.seedRefund({ amount, currency: 'usd', created });
    if (i % 100 === 0) {
      sandbox.seedRefund({ payment_intent: refund.payment_intent!, amount, currency: 'usd', created });
      duplicates++;
    }
  }
  return duplicates;
}

async function audit(ctx: BenchContext, sandbox: StripeSandbox, expected: { refunds: number; duplicates: number }) {
  const dir = mkdir(ctx, 'audit');
  const store = await freshPgStore(ctx);
  await store.db.close();
  try {
    const config = writeStripeConfig(dir, {
      db: store.url,
      apiBase: sandbox.url,
      apiKey: sandbox.apiKey,
      provider: { rateLimit: 1_000_000 },
    });
    const r = await runRecon(
      ctx,
      ['audit', 'duplicates', '--full', '--json', '--provider', 'stripe', '--config', config],
      { cwd: dir, measureRss: true, timeoutMs: 400_000, nodeArgs: YOUNG_GEN },
    );
    expectExit(r, 'recon audit duplicates', [8]);
    const out = JSON.parse(r.stdout) as { duplicates: unknown[]; scans: { pages: number; transactions: number }[] };
    const scan = out.scans[0];
    if (scan.transactions !== expected.refunds || out.duplicates.length !== expected.duplicates) {
      throw new Error(
        `audit read ${scan.transactions} refunds (expected ${expected.refunds}), found ${out.duplicates.length} duplicates (expected ${expected.duplicates})`,
      );
    }
    if (r.peakRssMb === undefined) throw new Error('no peak RSS reported by the child (is /proc mounted?)');
    return { ms: r.ms, pages: scan.pages, rssMb: r.peakRssMb, heapMb: r.peakHeapMb ?? 0 };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export const auditDuplicates: Benchmark = {
  name: 'audit-duplicates',
  async run(ctx: BenchContext) {
    const small = ctx.quick ? 10_000 : 200_000;
    const large = ctx.quick ? 50_000 : 1_000_000;
    const sandbox = await startStripeSandbox({ latencyMs: 0 });
    try {
      let dups = seedLedger(sandbox, 0, small);
      const a = await audit(ctx, sandbox, { refunds: small + dups, duplicates: dups });
      ctx.log(`  ${small} refunds: ${a.pages} pages in ${Math.round(a.ms)} ms, peak RSS ${round(a.rssMb, 1)} MB`);
      dups += seedLedger(sandbox, small, large);
      const b = await audit(ctx, sandbox, { refunds: large + dups, duplicates: dups });
      ctx.log(`  ${large} refunds: ${b.pages} pages in ${Math.round(b.ms)} ms, peak RSS ${round(b.rssMb, 1)} MB`);
      const growth = b.rssMb / a.rssMb;
      const perPageA = a.ms / a.pages;
      const perPageB = b.ms / b.pages;
      return [
        {
          bench: 'audit-duplicates',
          name: `audit duplicates --full --json, ${large.toLocaleString('en')} refunds: peak RSS of recon`,
          value: round(b.rssMb, 1),
          unit: 'MB',
          target: '< 1.10 × the smaller ledger',
          baseline: round(a.rssMb, 1),
          baseline_of: `${small.toLocaleString('en')} refunds`,
          pass: growth < 1.1,
          note: 'young generation pinned at 2 × 16 MB in both runs (--min/--max-semi-space-size=16): see test/bench/audit-duplicates.ts',
        },
        {
          bench: 'audit-duplicates',
          name: `audit duplicates --full --json, ${large.toLocaleString('en')} refunds: peak V8 heap of recon`,
          value: round(b.heapMb, 1),
          unit: 'MB',
          target: '≤ 64 MB',
          baseline: round(a.heapMb, 1),
          baseline_of: `${small.toLocaleString('en')} refunds`,
          pass: b.heapMb <= 64,
        },
        {
          bench: 'audit-duplicates',
          name: `audit duplicates time per page (${b.pages} pages, ${round(b.ms / 1000, 1)} s)`,
          value: round(perPageB, 2),
          unit: 'ms/page',
          target: `≤ 1.5× the ${small.toLocaleString('en')} run (linear)`,
          baseline: round(perPageA, 2),
          baseline_of: `${a.pages} pages, ${small.toLocaleString('en')} refunds`,
          pass: perPageB <= 1.5 * perPageA,
        },
      ];
    } finally {
      await sandbox.close();
    }
  },
};
