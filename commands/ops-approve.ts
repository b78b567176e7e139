import type { Command } from 'commander';
import { approveOperation } from '../src/core/intake/approve.js';
import { validateId } from '../src/core/intake/validate.js';
import { operationsJson } from '../src/core/journal/views.js';
import { action } from './support/action.js';
import { info, printJson } from './support/io.js';

export function register(ops: Command): void {
  ops
    .command('approve')
    .description('approve a proposed operation so it may be submitted')
    .argument('<id>', 'operation id')
    .requiredOption('--ref <ref>', 'approval reference (ticket, change request, approver)')
    .addHelpText('after', '\nExample:\n  $ recon ops approve refund:ord_1042 --ref TICKET-88')
    .action(
      action<{ ref: string }>(async ([id], opts, deps) => {
        const core = await deps.core();
        const op = await approveOperation(core, validateId(id), opts.ref);
        if (deps.globals.json) printJson(deps.io, (await operationsJson(core.db, [op]))[0]);
        else info(deps.io, `${op.id}: approved (${opts.ref})`);
      }),
    );
}
