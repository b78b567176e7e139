import type { Command } from 'commander';
import { formatDuration } from '../src/core/durations.js';
import { checkResolve, resolveReview, type ReviewOutcome } from '../src/core/human.js';
import { getOperation, listOperations } from '../src/core/repo.js';
import { validateId } from '../src/core/validate.js';
import { operationsJson } from '../src/core/views.js';
import { UsageError } from '../src/errors.js';
import { action, parsePositiveInt } from './support/action.js';
import { info, printJson, println } from './support/io.js';
import { renderTable } from './support/style.js';
import { printable } from './support/terminal.js';

const OUTCOMES: ReviewOutcome[] = ['confirmed', 'failed', 'cancelled'];

export function register(program: Command): void {
  const review = program
    .command('review')
    .description('the human queue: operations in needs_review')
    .addHelpText(
      'after',
      '\nExamples:\n  $ recon review list\n  $ recon review resolve refund:ord_1042 --outcome confirmed --txn re_123 --note "one refund at Stripe"',
    );
  review
    .command('list')
    .description('operations waiting for a human, oldest first, with the evidence')
    .option('--provider <name>', 'only this provider')
    .option('--limit <n>', 'at most N', parsePositiveInt('--limit'), 50)
    .addHelpText('after', '\nExample:\n  $ recon review list --json')
    .action(
      action<{ provider?: string; limit: number }>(async (_a, opts, deps) => {
        const core = await deps.core();
        const ops = (
          await listOperations(core.db, { states: ['needs_review'], provider: opts.provider, limit: opts.limit })
        ).reverse();
        const json = await operationsJson(core.db, ops);
        if (deps.globals.json) return printJson(deps.io, { operations: json });
        if (!json.length) return info(deps.io, 'nothing needs review');
        const now = deps.now().getTime();
        println(
          deps.io,
          await renderTable(
            deps.io,
            ['id', 'provider', 'amount', 'reason', 'assignee', 'waiting', 'provider txns'],
            json.map((o) => [
              printable(o.id),
              printable(o.provider),
              `${o.amount ?? ''} ${printable(o.currency)}`.trim(),
              printable(o.review_reason),
              printable(o.assignee),
              formatDuration(now - Date.parse(o.updated_at)),
              printable(o.provider_txn_ids.join(' ')),
            ]),
          ),
        );
      }),
    );
  review
    .command('resolve')
    .description('record a human decision on a needs_review operation')
    .argument('<id>', 'operation id')
    .requiredOption('--outcome <outcome>', `one of ${OUTCOMES.join(', ')}`)
    .option('--txn <txn>', 'the provider transaction that is the real one (fetched, checked and linked)')
    .requiredOption('--note <text>', 'what was decided and why (goes into the audit trail)')
    .option(
      '--force',
      'resolve even though the provider disagrees (amount, currency, a transaction it holds); needs --reason',
    )
    .option('--reason <text>', 'why, for the audit trail (required with --force)')
    .addHelpText(
      'after',
      '\nExample:\n  $ recon review resolve refund:ord_1042 --outcome confirmed --txn re_123 --note "second refund reversed in dashboard, see FIN-22"',
    )
    .action(
      action<{ outcome: string; txn?: string; note: string; force?: boolean; reason?: string }>(
        async ([rawId], opts, deps) => {
          if (!OUTCOMES.includes(opts.outcome as ReviewOutcome))
            throw new UsageError(`--outcome: "${opts.outcome}" is not one of ${OUTCOMES.join(', ')}`);
          if (opts.force && !opts.reason)
            throw new UsageError('--reason: required with --force (it goes into the audit trail)');
          const core = await deps.core();
          const id = validateId(rawId);
          const provider = await deps.provider((await getOperation(core.db, id)).provider);
          const check = await checkResolve(core, provider, id, {
            outcome: opts.outcome as ReviewOutcome,
            txnId: opts.txn,
          });
          const op = await resolveReview(core, provider, check, {
            note: opts.note,
            force: opts.force,
            reason: opts.reason,
          });
          if (deps.globals.json) printJson(deps.io, (await operationsJson(core.db, [op]))[0]);
          else info(deps.io, `${op.id}: ${op.state} (by ${core.actor})`);
        },
      ),
    );
}
