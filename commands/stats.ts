import type { Command } from 'commander';
import { formatDuration, parseSinceOrDate } from '../src/lib/durations.js';
import { AGE_BUCKETS, computeStats, statsPrometheus, type Stats } from '../src/core/report/stats.js';
import { UsageError } from '../src/errors.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { printJson, println } from './support/io.js';
import { renderTable } from './support/style.js';

export function register(program: Command): void {
  program
    .command('stats')
    .description('unresolved by state and age, duplicates, time to reconciliation, attempts per operation')
    .option('--since <duration|date>', 'only operations created (or resolved) since, e.g. 7d')
    .option('--format <format>', 'table (default) or prometheus')
    .addHelpText(
      'after',
      '\nExamples:\n  $ recon stats --since 7d\n  $ recon stats --format prometheus > /var/lib/node_exporter/recon_stats.prom',
    )
    .action(
      action<StatsOptions>(async (_a, opts, deps) => {
        const s = await runStats(opts, deps);
        if (opts.format === 'prometheus') return void deps.io.out.write(statsPrometheus(s));
        if (deps.globals.json) return printJson(deps.io, s);
        await render(deps, s);
      }),
    );
}

export interface StatsOptions {
  since?: string;
  /** table (default) or prometheus. */
  format?: string;
}

export async function runStats(opts: StatsOptions, deps: Deps): Promise<Stats> {
  if (opts.format && !['table', 'prometheus'].includes(opts.format))
    throw new UsageError(`--format: "${opts.format}" is not one of table, prometheus`);
  // Two documents cannot both be stdout's one document: refused before any work.
  if (opts.format === 'prometheus' && deps.globals.json)
    throw new UsageError('--format prometheus and --json: choose one output format');
  const core = await deps.core();
  return computeStats(core.db, {
    now: deps.now(),
    since: opts.since ? parseSinceOrDate(opts.since, '--since', deps.now()) : undefined,
  });
}

const secs = (v: number | null) => (v === null ? '-' : formatDuration(v * 1000));

async function render(deps: Deps, s: Stats): Promise<void> {
  println(deps.io, `unresolved: ${s.unresolved_total}`);
  if (s.unresolved.length) {
    const states = [...new Set(s.unresolved.map((u) => u.state))];
    const max = Math.max(...s.unresolved.map((u) => u.count));
    const rows = states.map((st) => [
      st,
      ...AGE_BUCKETS.map(([b]) => {
        const n = s.unresolved.find((u) => u.state === st && u.age_bucket === b)?.count ?? 0;
        return n ? `${'█'.repeat(Math.max(1, Math.round((n / max) * 10)))} ${n}` : '';
      }),
    ]);
    println(deps.io, await renderTable(deps.io, ['state', ...AGE_BUCKETS.map(([b]) => b)], rows));
  }
  const t = s.time_to_reconciliation_seconds;
  println(
    deps.io,
    `time to reconciliation: p50 ${secs(t.p50)}  p90 ${secs(t.p90)}  p99 ${secs(t.p99)}  (${t.count} resolved)`,
  );
  const a = s.attempts_per_operation;
  println(
    deps.io,
    `attempts per operation: mean ${a.mean === null ? '-' : a.mean.toFixed(2)}  max ${a.max ?? '-'}  (${
      Object.entries(a.histogram)
        .map(([k, v]) => `${k}: ${v}`)
        .join(', ') || 'none'
    })`,
  );
  println(
    deps.io,
    `duplicate actions: ${s.duplicate_actions}   ledger duplicate groups: ${s.ledger_duplicate_groups ?? '-'}   escalations: ${s.escalations}`,
  );
}
