import type { Command } from 'commander';
import { escalate } from '../src/core/human.js';
import { reassignReview } from '../src/core/reassign.js';
import { validateId } from '../src/core/validate.js';
import { operationsJson } from '../src/core/views.js';
import { action } from './support/action.js';
import { printJson, println } from './support/io.js';
import { printable } from './support/terminal.js';

export function register(program: Command): void {
  program
    .command('escalate')
    .description(
      'hand an unresolved operation to a human (→ needs_review); on one already in review: reassign it or add a reason',
    )
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
        const o = { reason: opts.reason, assignee: opts.assignee };
        // Already waiting for a human: reassign it or add the reason; the state stays.
        const reassigned = await reassignReview(core, validateId(id), o);
        const op = reassigned ?? (await escalate(core, validateId(id), o));
        if (deps.globals.json) printJson(deps.io, (await operationsJson(core.db, [op]))[0]);
        else
          println(
            deps.io,
            `${op.id}: needs_review (${printable(op.review_reason)})${op.assignee ? `, assigned to ${printable(op.assignee)}` : ''}${reassigned ? ' (was already in review: reason added, state unchanged)' : ''}`,
          );
      }),
    );
}
