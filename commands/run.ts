import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { formatDuration } from '../src/lib/durations.js';
import { failedRunMetrics, runMetrics } from '../src/core/report/metrics.js';
import { runPass, type RunSummary } from '../src/core/reconcile/run.js';
import { ResultExit, exitCodeOf } from '../src/errors.js';
import { action, parsePositiveInt } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, printPaged, println } from './support/io.js';
import { formatTime, waitingLine } from './support/format.js';
import { renderTable, styleFor } from './support/style.js';
import { printable } from './support/terminal.js';

/** Operations backing off named on the human summary line; `--json` lists the first 100 and counts them all. */
const BACKING_OFF_SHOWN = 5;

export interface RunCommandOptions {
  provider?: string;
  limit?: number;
  concurrency?: number;
  dryRun?: boolean;
  metricsFile?: string;
  verbose?: boolean;
}

export function register(program: Command): void {
  program
    .command('run')
    .description('one reconciliation pass over unresolved operations: look up, decide by the rule, act')
    .option('--provider <name>', 'only this provider')
    .option('--limit <n>', 'at most N operations this pass (default 10000)', parsePositiveInt('--limit'))
    .option(
      '--concurrency <n>',
      "lookups in flight per provider (default: the provider's concurrency)",
      parsePositiveInt('--concurrency'),
    )
    .option('--dry-run', 'decide and print, write nothing')
    .option('--metrics-file <path>', 'write Prometheus text metrics here (atomically)')
    .option('--verbose', 'on a terminal, list every decision (default: a summary and what needs attention)')
    .addHelpText(
      'after',
      `
Exit codes: 0 done, 5 a provider was unavailable (wins over 8), 8 operations need a human
(needs_review exists).
Safe to run from several hosts at once against PostgreSQL.

Examples:
  $ recon run
  $ */5 * * * *  recon run --json --metrics-file /var/lib/node_exporter/recon.prom`,
    )
    .action(
      action<RunCommandOptions>(async (_a, opts, deps) => {
        const summary = await runCommand(opts, deps);
        if (deps.globals.json) printJson(deps.io, summary);
        else await render(deps, summary, Boolean(opts.verbose));
        // 5 wins over 8 (SPEC §7): a review is open nearly always, and cron must still hear of an outage.
        // The metrics file carries both.
        if (summary.unavailable > 0) throw new ResultExit(5, 'a provider was unavailable');
        if (summary.needs_review_total > 0) throw new ResultExit(8, 'operations need a human');
        if (summary.errors.length) throw new ResultExit(1, 'operations failed unexpectedly');
      }),
    );
}

/**
 * One pass, and the metrics file written (also when the pass fails); returns the summary. On a
 * terminal the only thing said meanwhile is the progress counter on stderr.
 */
export async function runCommand(o: RunCommandOptions, deps: Deps): Promise<RunSummary> {
  try {
    return await runAndWriteMetrics(o, deps);
  } catch (err) {
    // The metrics file says this pass failed (a lost store: exit 6) rather than keep the last
    // good pass's figures; the error itself goes on to bin/main.ts (message, --json document).
    if (o.metricsFile && !o.dryRun) {
      const exitCode = exitCodeOf(err);
      await writeAtomically(o.metricsFile, failedRunMetrics({ exitCode, storeUp: exitCode !== 6 }, deps.now())).catch(
        () => undefined,
      );
    }
    throw err;
  }
}

async function runAndWriteMetrics(o: RunCommandOptions, deps: Deps): Promise<RunSummary> {
  const core = await deps.core();
  const progress = deps.io.isStderrTTY && !deps.io.quiet && !deps.globals.json;
  let lastDraw = 0;
  const summary = await runPass(core, (name) => deps.provider(name), {
    provider: o.provider,
    limit: o.limit,
    concurrency: o.concurrency,
    dryRun: o.dryRun,
    onProgress: progress
      ? (done, claimed) => {
          const t = Date.now();
          if (t - lastDraw > 200) {
            lastDraw = t;
            deps.io.err.write(`\r  reconciling… ${done}/${claimed}`);
          }
        }
      : undefined,
  });
  if (progress && lastDraw) deps.io.err.write('\r\x1b[K');
  if (o.metricsFile && !o.dryRun) await writeAtomically(o.metricsFile, runMetrics(summary, deps.now()));
  return summary;
}

async function writeAtomically(file: string, text: string): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  await writeFile(tmp, text);
  await rename(tmp, file);
}

/** Decisions a person must look at after a pass; the rest is summarised on a terminal. */
const ATTENTION = new Set(['review', 'unavailable']);

async function render(deps: Deps, s: RunSummary, verbose: boolean): Promise<void> {
  const st = await styleFor(deps.io);
  const now = deps.now();
  const why = (d: RunSummary['decisions'][number]) =>
    d.retry_at ? `${d.explanation}; ${waitingLine(d.retry_at, now)}` : d.explanation;
  // On a terminal, 300 rows of "confirmed" hide the three that matter: summarise by decision and
  // list only what needs attention (--verbose: every row). Piped output keeps every row.
  const everyRow = verbose || !deps.io.isStdoutTTY;
  const shown = everyRow ? s.decisions : s.decisions.filter((d) => ATTENTION.has(d.decision));
  if (shown.length) {
    const table = await renderTable(
      deps.io,
      ['operation', 'decision', 'rule', 'state', 'why'],
      shown.map((d) => [printable(d.id), d.decision, d.rule, st.state(d.state), printable(why(d))]),
      { text: ['why'] },
    );
    await printPaged(deps.io, everyRow ? table : `${st.bold('Needs attention')}\n${table}`);
  }
  if (!everyRow) {
    const counts = new Map<string, number>();
    for (const d of s.decisions) counts.set(d.decision, (counts.get(d.decision) ?? 0) + 1);
    const waits = s.decisions
      .filter((d) => d.retry_at)
      .map((d) => d.retry_at!)
      .sort();
    const parts = [...counts].map(([k, n]) =>
      k === 'wait' && waits.length ? `${n} wait (first retry allowed from ${formatTime(waits[0])})` : `${n} ${k}`,
    );
    if (parts.length)
      println(
        deps.io,
        `decisions: ${parts.join(' · ')}${s.decisions.length > shown.length ? st.dim('  (--verbose for every row)') : ''}`,
      );
  }
  for (const e of s.errors) info(deps.io, `recon: ${printable(e.id)}: ${printable(e.error)}`);
  if (s.lease_expired.length)
    info(
      deps.io,
      `${s.lease_expired.length} operation(s) not decided: the lease ran out before the decision was written (a slow pass); the next pass decides them: ${s.lease_expired.map(printable).join(' ')}`,
    );
  const line = `${s.dry_run ? 'dry run: ' : ''}claimed ${s.claimed}: confirmed ${s.confirmed}, failed ${s.failed}, pending ${s.pending}, retried ${s.retried}, escalated ${s.escalated}, waiting ${s.waiting}, unavailable ${s.unavailable} (${formatDuration(s.duration_ms)})`;
  info(deps.io, line);
  if (s.unavailable) info(deps.io, st.red(`${s.unavailable} lookup(s) found the provider unavailable: exit 5`));
  if (s.backing_off_total) {
    const shown = s.backing_off.slice(0, BACKING_OFF_SHOWN);
    const more = s.backing_off_total - shown.length;
    info(
      deps.io,
      `${s.backing_off_total} operation(s) not looked up: backing off after the provider was unavailable, until ${shown
        .map((b) => `${printable(b.id)} ${formatTime(b.until)}`)
        .join(', ')}${more > 0 ? `, and ${more} more (recon ops list --unresolved)` : ''}`,
    );
  }
  if (s.needs_review_total)
    info(deps.io, st.red(`${s.needs_review_total} operation(s) need a human: recon review list`));
}
