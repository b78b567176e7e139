import type { Command } from 'commander';
import { verifyChains } from '../src/core/audit.js';
import { action } from './support/action.js';
import { info, printJson, println } from './support/io.js';
import { renderTable } from './support/style.js';

export function register(audit: Command): void {
  audit
    .command('verify')
    .description('re-compute every hash chain of the audit trail; report the first broken link per operation')
    .option('--operation <id>', 'only this operation')
    .addHelpText('after', '\nExit code 4 when a chain is broken.\n\nExample:\n  $ recon audit verify --json')
    .action(
      action<{ operation?: string }>(async (_a, opts, deps) => {
        const core = await deps.core();
        const report = await verifyChains(core.db, { operationId: opts.operation });
        if (deps.globals.json) printJson(deps.io, report);
        else if (report.ok)
          info(
            deps.io,
            `audit trail intact: ${report.operations_checked} operation(s), ${report.events_checked} event(s) verified`,
          );
        else {
          println(
            deps.io,
            await renderTable(
              deps.io,
              ['operation', 'seq', 'problem', 'expected', 'found'],
              report.broken.map((b) => [
                b.operation_id,
                b.seq,
                b.problem,
                b.expected.slice(0, 16),
                b.found.slice(0, 16),
              ]),
            ),
          );
          info(deps.io, `${report.broken.length} broken chain(s) among ${report.operations_checked} operation(s)`);
        }
        return report.ok ? 0 : 4;
      }),
    );
}
