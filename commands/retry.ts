import type { Command } from 'commander';
import { getOperation } from '../src/core/journal/operations.js';
import { retryNow } from '../src/core/reconcile/retry.js';
import { validateId } from '../src/core/intake/validate.js';
import { ResultExit } from '../src/errors.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { waitingLine } from './support/format.js';
import { info, printJson } from './support/io.js';

export function register(program: Command): void {
  program
    .command('retry')
    .description('evaluate the rule now; retry with the original key and payload only if it allows')
    .argument('<id>', 'operation id')
    .option('--dry-run', 'only print the decision')
    .addHelpText(
      'after',
      `
The rule allows a retry only when a fresh lookup found nothing, the uncertainty window has
passed, the key is within retention (or the lookup is authoritative), the payload is unchanged
and attempts remain; exit 7 when the new attempt ends outcome_unknown too. Otherwise exit 4 naming the rule that refused (a found transaction is
still linked and applied).

Example:
  $ recon retry refund:ord_1042 --dry-run`,
    )
    .action(
      action<{ dryRun?: boolean }>(async ([id], opts, deps) => {
        const { id: opId, result } = await runRetry({ id, dryRun: opts.dryRun }, deps);
        if (deps.globals.json) printJson(deps.io, result);
        else {
          info(deps.io, `${opId}: ${result.decision} (${result.rule}) → ${result.state}: ${result.explanation}`);
          if (result.retry_at) info(deps.io, waitingLine(result.retry_at, deps.now()));
        }
        if (result.decision !== 'retry') throw new ResultExit(4, `the rule decided ${result.decision}`);
        // The new attempt's answer was lost too: a script must not read it as done (SPEC §7).
        if (!opts.dryRun && result.state === 'outcome_unknown') throw new ResultExit(7, 'the outcome is unknown');
      }),
    );
}

export interface RetryOptions {
  /** The operation id, as typed. */
  id: string;
  dryRun?: boolean;
}

/** Evaluates the rule now after a fresh lookup; retries with the original key only if it allows. */
export async function runRetry(
  o: RetryOptions,
  deps: Deps,
): Promise<{ id: string; result: Awaited<ReturnType<typeof retryNow>> }> {
  const id = validateId(o.id);
  const core = await deps.core();
  const op = await getOperation(core.db, id);
  const provider = await deps.provider(op.provider);
  return { id: op.id, result: await retryNow(core, provider, op, { dryRun: o.dryRun }) };
}
