/**
 * `npm run bench`: recon's performance targets, measured against a real PostgreSQL, PGlite and the
 * sandboxes on loopback, each next to a baseline measured in the same run.
 *
 *   npm run bench                 full run (< 10 minutes on 2 cores)
 *   npm run bench -- --quick      smaller run (< 2 minutes), for development
 *   npm run bench -- --only NAME  only the named benchmark(s), comma-separated
 *   BENCH_CPU_PROF=DIR npm run bench -- --only claims   also writes each `recon run`'s (claims), `recon mcp`'s (agents) or `recon webhook serve`'s (webhooks) node --cpu-prof profile to DIR
 *   BENCH_NODE_ARGS='--max-semi-space-size=16' npm run bench -- --only claims   node options for every process the bench starts (experiments)
 *
 * Prints a table and writes bench-results.json; exits 1 when a target is missed.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startPostgres } from '../support/postgres.js';
import { agentsBench } from './agents.js';
import { agentsEmbeddedBench } from './agents-embedded.js';
import { auditDuplicates } from './audit-duplicates.js';
import { backlogBench } from './backlog.js';
import { claims } from './claims.js';
import { firstCommand } from './first-command.js';
import { dropBenchDatabases, ROOT, round, type BenchContext, type Benchmark, type BenchRow } from './lib.js';
import { listUnresolved } from './list-unresolved.js';
import { reconcileThroughput } from './reconcile.js';
import { recordThroughput } from './record.js';
import { startup } from './startup.js';
import { statsBench } from './stats.js';
import { webhooksBench } from './webhooks.js';
import { writePath } from './write-path.js';

/** Every benchmark, in the order its rows are printed. */
const ALL: Benchmark[] = [
  startup,
  firstCommand,
  listUnresolved,
  reconcileThroughput,
  writePath,
  claims,
  auditDuplicates,
  recordThroughput,
  statsBench,
  webhooksBench,
  agentsBench,
  agentsEmbeddedBench,
  backlogBench,
];

/**
 * The order they run in. The backlog's time is the sandbox's 25 requests/s (150–180 s of the full
 * run, its CPU a fraction of one core), so it runs beside the benchmarks whose rows have the widest
 * margins and measure no latency against a baseline run elsewhere (peak RSS and time per page against
 * a run of their own, statement latency at 20× under its target, bulk inserts at 1.9×) and the
 * reconcile pass, itself paced by its sandbox's 100 requests/s. The latency and throughput rows
 * (claims, write path, stats, webhooks, agents, startup, first command) run alone: stats' scan of a
 * million operations beside the backlog took 0.83 s against its 0.6 s target (0.42–0.5 s alone).
 */
const PLAN: (Benchmark | { beside: Benchmark; during: Benchmark[] })[] = [
  startup,
  firstCommand,
  writePath,
  claims,
  {
    beside: backlogBench,
    during: [auditDuplicates, reconcileThroughput, recordThroughput, listUnresolved],
  },
  statsBench,
  webhooksBench,
  agentsBench,
  agentsEmbeddedBench,
];

function parseArgs(argv: string[]): { quick: boolean; only: string[] | null } {
  let quick = false;
  let only: string[] | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--quick') quick = true;
    else if (a === '--only') only = (argv[++i] ?? '').split(',').filter(Boolean);
    else if (a.startsWith('--only=')) only = a.slice('--only='.length).split(',').filter(Boolean);
    else throw new Error(`unknown argument ${a}; use --quick and/or --only ${ALL.map((b) => b.name).join(',')}`);
  }
  if (only) {
    const unknown = only.filter((n) => !ALL.some((b) => b.name === n));
    if (unknown.length)
      throw new Error(
        `--only: unknown benchmark ${unknown.join(', ')}; choose from ${ALL.map((b) => b.name).join(', ')}`,
      );
  }
  return { quick, only };
}

function table(rows: BenchRow[]): string {
  const head = ['benchmark', 'measured', 'target', 'baseline (same run)', 'ratio', 'result'];
  const body = rows.map((r) => [
    r.name,
    `${r.value} ${r.unit}`,
    r.target,
    r.baseline === null
      ? '-'
      : `${r.baseline} ${r.baseline_unit ?? (r.unit === 'bool' ? '' : r.unit)}${r.baseline_of ? ` (${r.baseline_of})` : ''}`.trim(),
    r.ratio === null || r.ratio === undefined ? '-' : `${r.ratio}×`,
    r.pass === null ? 'info' : r.pass ? 'PASS' : 'FAIL',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join(' | ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('-|-'), ...body.map(line)].join('\n');
}

/** What the server says it runs with (SHOW), recorded so a result cannot hide a non-durable server. */
async function showSettings(url: string): Promise<Record<string, string>> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const out: Record<string, string> = {};
    for (const name of ['fsync', 'synchronous_commit', 'full_page_writes', 'server_version']) {
      const r = await client.query<Record<string, string>>(`SHOW ${name}`);
      out[name] = Object.values(r.rows[0])[0]!;
    }
    return out;
  } finally {
    await client.end();
  }
}

function withRatio(r: BenchRow): BenchRow {
  if (r.ratio !== undefined) return r;
  return { ...r, ratio: r.baseline ? round(r.value / r.baseline, 2) : null };
}

async function main(): Promise<void> {
  const { quick, only } = parseArgs(process.argv.slice(2));
  const started = performance.now();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-bench-'));
  const log = (m: string) => process.stderr.write(`${m}\n`);
  log(`recon bench${quick ? ' (quick)' : ''}: starting PostgreSQL (default durability)`);
  // Default durability, as users run it: every commit waits for its WAL flush.
  const server = await startPostgres({ durable: true });
  const postgresSettings = await showSettings(server.url);
  const ctx = { quick, pgUrl: server.url, tmp, log };
  const results = new Map<string, BenchRow[]>();
  const failures: string[] = [];
  const selected = (b: Benchmark) => !only || only.includes(b.name);
  /** One benchmark, with a database list of its own (dropped when it ends), its rows kept by name. */
  const runOne = async (b: Benchmark, label = ''): Promise<void> => {
    const t0 = performance.now();
    log(`- ${b.name}${label}`);
    const own: BenchContext = { ...ctx, databases: [] };
    try {
      results.set(b.name, (await b.run(own)).map(withRatio));
    } catch (err) {
      failures.push(`${b.name}: ${(err as Error).stack ?? String(err)}`);
      results.set(b.name, [
        {
          bench: b.name,
          name: `${b.name}: did not complete`,
          value: 0,
          unit: '',
          target: 'completes',
          baseline: null,
          pass: false,
          note: (err as Error).message,
        },
      ]);
    }
    await dropBenchDatabases(own);
    log(`  (${b.name}: ${Math.round((performance.now() - t0) / 1000)} s)`);
  };
  try {
    for (const step of PLAN) {
      if ('beside' in step) {
        const background = selected(step.beside)
          ? runOne(
              step.beside,
              `, beside ${
                step.during
                  .filter(selected)
                  .map((b) => b.name)
                  .join(', ') || 'nothing'
              }`,
            )
          : Promise.resolve();
        for (const b of step.during) if (selected(b)) await runOne(b);
        await background;
      } else if (selected(step)) await runOne(step);
    }
  } finally {
    await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const rows = ALL.flatMap((b) => results.get(b.name) ?? []);
  const totalS = round((performance.now() - started) / 1000, 1);
  process.stdout.write(`\n${table(rows)}\n\n`);
  for (const r of rows) if (r.note) process.stdout.write(`note: ${r.name}: ${r.note}\n`);
  for (const f of failures) process.stderr.write(`\n${f}\n`);
  const passed = rows.filter((r) => r.pass === true).length;
  const failed = rows.filter((r) => r.pass === false).length;
  process.stdout.write(
    `PostgreSQL ${Object.entries(postgresSettings)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}\n`,
  );
  process.stdout.write(`total bench time ${totalS} s (${quick ? 'quick' : 'full'}) on ${os.cpus().length} cores\n`);
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  const out = path.join(ROOT, 'bench-results.json');
  fs.writeFileSync(
    out,
    JSON.stringify(
      {
        mode: quick ? 'quick' : 'full',
        node: process.version,
        cpus: os.cpus().length,
        total_seconds: totalS,
        finished_at: new Date().toISOString(),
        postgres_settings: postgresSettings,
        rows,
      },
      null,
      2,
    ) + '\n',
  );
  process.stdout.write(`wrote ${path.relative(process.cwd(), out) || out}\n`);
  if (failed) process.exitCode = 1;
}

main().catch((err) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
});
