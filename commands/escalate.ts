import type { Command } from 'commander';
import { escalate } from '../src/core/human.js';
import { validateId } from '../src/core/validate.js';
import { operationsJson } from '../src/core/views.js';
import { action } from './support/action.js';
import { info, printJson } from './support/io.js';

export function register(program: Command): void {
  program
    .command('escalate')
    .description('hand an unresolved operation to a human (→ needs_review)')
    .argument('<id>', 'operation id')
    .requiredOption('--reason <text>', 'why a human must decide')
    .option('--assignee <who>', 'who should look at it')
    .addHelpText(
      'after',
      '\nExample:\n  $ recon escalate refund:ord_1042 --reason "customer says they got two refunds" --assignee finance-oncall',
    )
    .action(
      action<{ reason: string; assignee?: string }>(async ([id], opts, deps) => {
        const core = await deps.core();
        const op = await escalate(core, validateId(id), { reason: opts.reason, assignee: opts.assignee });
        if (deps.globals.json) printJson(deps.io, (await operationsJson(core.db, [op]))[0]);
        else
          info(
            deps.io,
            `${op.id}: needs_review (${opts.reason})${opts.assignee ? `, assigned to ${opts.assignee}` : ''}`,
          );
      }),
    );
}
