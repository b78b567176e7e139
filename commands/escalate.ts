import type { Command } from 'commander';
import { escalate } from '../src/core/review/escalate.js';
import { getOperation } from '../src/core/journal/operations.js';
import { validateId } from '../src/core/intake/validate.js';
import { operationsJson, type OperationJson } from '../src/core/journal/views.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { printJson, println } from './support/io.js';
import { printable } from './support/terminal.js';

export function register(program: Command): void {
  program
    .command('escalate')
    .description(
      'put an operation in front of a human (→ needs_review, from any state but cancelled); on one already in review: reassign it or add a reason',
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
        const { operation: op, wasInReview } = await runEscalate({ id, ...opts }, deps);
        if (deps.globals.json) printJson(deps.io, op);
        else
          println(
            deps.io,
            `${op.id}: needs_review (${printable(op.review_reason)}: ${printable(opts.reason)})${op.assignee ? `, assigned to ${printable(op.assignee)}` : ''}${wasInReview ? ' (was already in review: reassigned, your reason is in the audit trail; state unchanged)' : ''}`,
          );
      }),
    );
}

export interface EscalateOptions {
  /** The operation id, as typed. */
  id: string;
  reason: string;
  assignee?: string;
}

/** Puts the operation in front of a human; `wasInReview`: it already was (reassigned, state unchanged). */
export async function runEscalate(
  o: EscalateOptions,
  deps: Deps,
): Promise<{ operation: OperationJson; wasInReview: boolean }> {
  const core = await deps.core();
  const id = validateId(o.id);
  // Already waiting for a human: escalate reassigns it or adds the reason; the state stays.
  const wasInReview = (await getOperation(core.db, id)).state === 'needs_review';
  const op = await escalate(core, id, { reason: o.reason, assignee: o.assignee });
  return { operation: (await operationsJson(core.db, [op]))[0], wasInReview };
}
