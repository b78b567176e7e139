import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { failedRunMetrics, runMetrics } from '../src/core/metrics.js';
import { runPass, type RunSummary } from '../src/core/run.js';
import { exitCodeOf } from '../src/errors.js';
import { action, parsePositiveInt } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, println } from './support/io.js';
import { renderTable, styleFor } from './support/style.js';
import { printable } from './support/terminal.js';

export interface RunCommandOptions {
  provider?: string;
  limit?: number;
  concurrency?: number;
  dryRun?: boolean;
  metricsFile?: string;
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
    .addHelpText(
      'after',
      `
Exit codes: 0 done, 5 a provider was unavailable, 8 operations need a human (needs_review exists).
Safe to run from several hosts at once against PostgreSQL.

Examples:
  $ recon run
  $ */5 * * * *  recon run --json --metrics-file /var/lib/node_exporter/recon.prom`,
    )
    .action(action<RunCommandOptions>(async (_a, opts, deps) => runCommand(opts, deps)));
}

export async function runCommand(o: RunCommandOptions, deps: Deps): Promise<number> {
  try {
    return await runAndReport(o, deps);
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

async function runAndReport(o: RunCommandOptions, deps: Deps): Promise<number> {
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
  if (deps.globals.json) printJson(deps.io, summary);
  else await render(deps, summary);
  if (summary.needs_review_total > 0) return 8;
  if (summary.unavailable > 0) return 5;
  return summary.errors.length ? 1 : 0;
}

async function writeAtomically(file: string, text: string): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  await writeFile(tmp, text);
  await rename(tmp, file);
}

async function render(deps: Deps, s: RunSummary): Promise<void> {
  const st = await styleFor(deps.io);
  if (s.decisions.length) {
    println(
      deps.io,
      await renderTable(
        deps.io,
        ['operation', 'decision', 'rule', 'state', 'why'],
        s.decisions.map((d) => [printable(d.id), d.decision, d.rule, st.state(d.state), printable(d.explanation)]),
      ),
    );
  }
  for (const e of s.errors) info(deps.io, `error: ${printable(e.id)}: ${printable(e.error)}`);
  if (s.lease_expired.length)
    info(
      deps.io,
      `${s.lease_expired.length} operation(s) not decided: the lease ran out before the decision was written (a slow pass); the next pass decides them: ${s.lease_expired.map(printable).join(' ')}`,
    );
  const line = `${s.dry_run ? 'dry run: ' : ''}claimed ${s.claimed}: confirmed ${s.confirmed}, failed ${s.failed}, pending ${s.pending}, retried ${s.retried}, escalated ${s.escalated}, waiting ${s.waiting}, unavailable ${s.unavailable} (${s.duration_ms} ms)`;
  info(deps.io, line);
  if (s.needs_review_total)
    info(deps.io, st.red(`${s.needs_review_total} operation(s) need a human: recon review list`));
}
