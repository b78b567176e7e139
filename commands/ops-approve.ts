import type { Command } from 'commander';
import { approveOperation } from '../src/core/intake/approve.js';
import { validateId } from '../src/core/intake/validate.js';
import { operationsJson, type OperationJson } from '../src/core/journal/views.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
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
        const op = await runApprove({ id, ref: opts.ref }, deps);
        if (deps.globals.json) printJson(deps.io, op);
        else info(deps.io, `${op.id}: approved (${opts.ref})`);
      }),
    );
}

export interface ApproveOptions {
  /** The operation id, as typed. */
  id: string;
  /** The approval reference (ticket, change request, approver). */
  ref: string;
}

/** Approves a proposed operation; returns it as `--json` shows it. */
export async function runApprove(o: ApproveOptions, deps: Deps): Promise<OperationJson> {
  const core = await deps.core();
  const op = await approveOperation(core, validateId(o.id), o.ref);
  return (await operationsJson(core.db, [op]))[0];
}
