import type { Command } from 'commander';
import { attach, checkAttach } from '../src/core/review/attach.js';
import { checkForce } from '../src/core/review/force.js';
import { getOperation } from '../src/core/journal/operations.js';
import { validateId } from '../src/core/intake/validate.js';
import { operationsJson, type OperationJson } from '../src/core/journal/views.js';
import { ResultExit } from '../src/errors.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
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
      action<{ force?: boolean; reason?: string }>(async ([id, txn], opts, deps) => {
        const r = await runAttach({ id, txn, ...opts }, deps);
        if (!r.attached) {
          info(deps.io, 'nothing attached');
          throw new ResultExit(4, 'a "no" at the confirmation');
        }
        if (deps.globals.json) printJson(deps.io, r.operation);
        else info(deps.io, `${r.operation.id}: attached ${txn} → ${r.operation.state}`);
      }),
    );
}

export interface AttachOptions {
  /** The operation id, as typed. */
  id: string;
  /** The provider transaction id. */
  txn: string;
  force?: boolean;
  reason?: string;
}

/** What `recon attach` did: nothing at a "no", else the operation as `--json` shows it. */
export type AttachResult = { attached: false } | { attached: true; operation: OperationJson };

/**
 * Fetches and checks the transaction, asks (deps.confirm: --yes, or a person at a terminal), links it.
 */
export async function runAttach(o: AttachOptions, deps: Deps): Promise<AttachResult> {
  const force = checkForce({ force: o.force, reason: o.reason });
  const core = await deps.core();
  const op = await getOperation(core.db, validateId(o.id));
  const provider = await deps.provider(op.provider);
  const check = await checkAttach(core, provider, op.id, o.txn, force);
  const question = `Attach ${o.txn} (${check.txn.status}, ${formatAmount(check.txn.amount, check.txn.currency) || '?'}) to ${op.id} and mark it ${check.to}?`;
  if (!(await deps.confirm(question))) return { attached: false };
  const updated = await attach(core, provider, check, force);
  return { attached: true, operation: (await operationsJson(core.db, [updated]))[0] };
}
