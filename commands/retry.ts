import type { Command } from 'commander';
import { decisionJson } from '../src/core/decision-json.js';
import { evaluate, reconcileById } from '../src/core/reconcile.js';
import { getOperation } from '../src/core/repo.js';
import { validateId } from '../src/core/validate.js';
import { RefusedError } from '../src/errors.js';
import { action } from './support/action.js';
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
and attempts remain. Otherwise exit 4 naming the rule that refused (a found transaction is
still linked and applied).

Example:
  $ recon retry refund:ord_1042 --dry-run`,
    )
    .action(
      action<{ dryRun?: boolean }>(async ([rawId], opts, deps) => {
        const id = validateId(rawId);
        const core = await deps.core();
        const op = await getOperation(core.db, id);
        const provider = await deps.provider(op.provider);
        if (op.state === 'submitting' && op.lease_expires_at && op.lease_expires_at > core.now()) {
          throw new RefusedError(
            `operation ${id} has an attempt in flight until ${op.lease_expires_at.toISOString()}`,
            'lease_held',
          );
        }
        if (!['outcome_unknown', 'pending', 'submitting'].includes(op.state)) {
          throw new RefusedError(
            `operation ${id} is ${op.state}; only outcome_unknown operations are retried`,
            'state_machine',
          );
        }
        let result;
        if (opts.dryRun) {
          const { decision: d } = await evaluate(core, provider, op);
          result = { ...decisionJson(id, d), dry_run: true };
        } else {
          result = await reconcileById(core, provider, id);
          if (!result)
            throw new RefusedError(
              `operation ${id} is claimed by another worker right now; try again shortly`,
              'lease_held',
            );
        }
        if (deps.globals.json) printJson(deps.io, result);
        else {
          info(deps.io, `${id}: ${result.decision} (${result.rule}) → ${result.state}: ${result.explanation}`);
          if (result.retry_at) info(deps.io, waitingLine(result.retry_at, deps.now()));
        }
        return result.decision === 'retry' ? 0 : 4;
      }),
    );
}
