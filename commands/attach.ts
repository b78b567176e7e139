import type { Command } from 'commander';
import { attach, checkAttach } from '../src/core/review/attach.js';
import { checkForce } from '../src/core/review/force.js';
import { getOperation } from '../src/core/journal/operations.js';
import { validateId } from '../src/core/intake/validate.js';
import { operationsJson } from '../src/core/journal/views.js';
import { ResultExit } from '../src/errors.js';
import { action } from './support/action.js';
import { formatAmount } from './support/format.js';
import { info, printJson } from './support/io.js';

export function register(program: Command): void {
  program
    .command('attach')
    .description('link a provider transaction to an operation, after fetching and checking it')
    .argument('<id>', 'operation id')
    .argument('<txn>', 'provider transaction id (e.g. re_…)')
    .option('--force', 'attach even if amount, currency or operation metadata disagree (needs --reason)')
    .option('--reason <text>', 'why, for the audit trail (required with --force)')
    .addHelpText(
      'after',
      '\nAsks for confirmation on a terminal unless --yes; without a terminal, --yes is required.\n\nExample:\n  $ recon attach refund:ord_1042 re_3Nx… --yes',
    )
    .action(
      action<{ force?: boolean; reason?: string }>(async ([rawId, txnId], opts, deps) => {
        const force = checkForce(opts);
        const core = await deps.core();
        const op = await getOperation(core.db, validateId(rawId));
        const provider = await deps.provider(op.provider);
        const check = await checkAttach(core, provider, op.id, txnId, force);
        const question = `Attach ${txnId} (${check.txn.status}, ${formatAmount(check.txn.amount, check.txn.currency) || '?'}) to ${op.id} and mark it ${check.to}?`;
        if (!(await deps.confirm(question))) {
          info(deps.io, 'nothing attached');
          throw new ResultExit(4, 'a "no" at the confirmation');
        }
        const updated = await attach(core, provider, check, force);
        if (deps.globals.json) printJson(deps.io, (await operationsJson(core.db, [updated]))[0]);
        else info(deps.io, `${op.id}: attached ${txnId} → ${updated.state}`);
      }),
    );
}
