import type { Command } from 'commander';
import type { Check, DemoListener, DemoReport, DemoStep, DemoTable } from '../src/demo/play.js';
import { ResultExit } from '../src/errors.js';
import type { Db } from '../src/store/db.js';
import { action } from './support/action.js';
import { formatAmount } from './support/format.js';
import type { Deps } from './support/deps.js';
import { printJson, println, warn } from './support/io.js';
import { renderDetail } from './ops-show.js';
import { renderOperations } from './ops-list.js';
import { renderTable, styleFor, type Style } from './support/style.js';

export function register(program: Command): void {
  program
    .command('demo')
    .description('play the incidents of the spec against built-in sandbox providers on a throw-away store')
    .addHelpText(
      'after',
      `
Plays incidents 1, 2, 3, 5, 6 and 9: a refund committed before the connection dropped, the
second click, delayed indexing, a key past its retention, a webhook delivered twice and an old
duplicate; and 11, the agent's afternoon: an AI agent's refund through recon mcp. The providers run inside this process, the store is in memory (--db and --config are
not used), and nothing is left behind. Each claim is checked against the store and the provider's
ledger: exit 1 means a check failed, which is a bug in recon.

Examples:
  $ recon demo
  $ recon demo --json | jq '.incidents[] | {number, ledger}'`,
    )
    .action(action(async (_args, _opts, deps) => runDemo(deps)));
}

export async function runDemo(deps: Deps): Promise<void> {
  if (deps.globals.db) warn(deps.io, '--db is not used: the demo always plays on a throw-away in-memory store');
  // The store starts on a thread of its own while the demo's modules load (src/store/thread.ts); where
  // it cannot, its WebAssembly is compiled and its template inflated on other threads meanwhile.
  const store = (await import('../src/store/thread.js')).openMemoryStoreOnThread();
  if (!store) await (await import('../src/store/open.js')).prefetchStore('memory:');
  try {
    await play(deps, store);
  } finally {
    // Closed by the demo once it has it; here when it never got that far.
    await store?.then((db) => db.close()).catch(() => undefined);
  }
}

async function play(deps: Deps, store: Promise<Db> | undefined): Promise<void> {
  const { playDemo } = await import('../src/demo/play.js');
  const json = deps.globals.json;
  const s = await styleFor(deps.io);
  const listener: DemoListener = json ? { onStep: () => {}, onTable: () => {} } : humanListener(deps, s);
  if (!json) {
    println(
      deps.io,
      s.bold('recon demo') +
        s.dim(' — the incidents of docs/rule.md against in-process sandboxes, on a throw-away in-memory store'),
    );
  }
  const report = await playDemo(listener, store);
  const checks = report.incidents.flatMap((i) => i.checks);
  const failed = checks.filter((c) => !c.ok).length;
  if (json) printJson(deps.io, report);
  else println(deps.io, '\n' + summaryLine(report, checks.length, failed, s));
  if (failed > 0)
    deps.io.err.write(
      `recon demo: ${failed} of ${checks.length} checks failed; that is a bug in recon, please report it\n`,
    );
  if (!report.ok) throw new ResultExit(1, 'a demo check failed');
}

function humanListener(deps: Deps, s: Style): DemoListener {
  const out = (text: string) => println(deps.io, text);
  // Under an incident's heading its steps need no tag; elsewhere (after a run, at the end) they do.
  let current: number | undefined;
  return {
    onStep(step: DemoStep) {
      if (step.heading) {
        current = step.incident;
        out('\n' + s.bold(step.incident !== undefined ? `[${step.incident}] ${step.text}` : `== ${step.text}`));
      } else {
        out(`    ${step.incident !== undefined && step.incident !== current ? `[${step.incident}] ` : ''}${step.text}`);
      }
    },
    async onTable(t: DemoTable) {
      current = undefined;
      out('\n' + s.cyan(`$ ${t.title}`));
      await renderDemoTable(deps, t, s);
    },
    onCheck(incident: number, c: Check) {
      if (!c.ok)
        out(
          s.red(
            `    ✗ [${incident}] ${c.name}: expected ${JSON.stringify(c.expected)}, got ${JSON.stringify(c.actual)}`,
          ),
        );
    },
  };
}

async function renderDemoTable(deps: Deps, t: DemoTable, s: Style): Promise<void> {
  const out = (text: string) => println(deps.io, text);
  switch (t.kind) {
    case 'operations':
      return out(await renderOperations(deps.io, t.operations, t.now));
    case 'run': {
      const r = t.summary;
      out(
        await renderTable(
          deps.io,
          ['operation', 'decision', 'rule', 'state', 'why'],
          r.decisions.map((d) => [d.id, d.decision, d.rule, s.state(d.state), d.explanation]),
        ),
      );
      out(
        s.dim(
          `claimed ${r.claimed}: confirmed ${r.confirmed}, retried ${r.retried}, escalated ${r.escalated}, waiting ${r.waiting}, unavailable ${r.unavailable}`,
        ),
      );
      return;
    }
    case 'show':
      return renderDetail(deps, t.detail);
    case 'duplicates':
      return out(
        await renderTable(
          deps.io,
          ['provider', 'kind', 'key', 'transactions', 'total', 'recon knows'],
          t.duplicates.map((d) => [
            d.provider,
            d.kind,
            d.key,
            d.transactions.map((x) => x.provider_id).join(' '),
            formatAmount(d.amount_total, d.currency),
            d.recon_knows ? 'yes' : 'no',
          ]),
        ),
      );
  }
}

function summaryLine(report: DemoReport, total: number, failed: number, s: Style): string {
  const seconds = (report.duration_ms / 1000).toFixed(1);
  const ledger = report.incidents
    .map(
      (i) =>
        `[${i.number}] ${Object.entries(i.ledger)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
    )
    .join('  ');
  const head =
    failed === 0
      ? s.green(`✓ all ${total} checks passed in ${seconds}s`)
      : s.red(`✗ ${failed} of ${total} checks failed (${seconds}s)`);
  return `${head}\n  provider ledgers: ${ledger}\n  the store was in memory and is gone; nothing was written to disk`;
}
