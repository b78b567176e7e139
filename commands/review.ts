import type { Command } from 'commander';
import { formatDuration } from '../src/lib/durations.js';
import { evidenceOf, type Evidence } from '../src/core/review/evidence.js';
import { checkForce } from '../src/core/review/force.js';
import { checkResolve, resolveReview } from '../src/core/review/review.js';
import { isReviewOutcome, REVIEW_OUTCOMES } from '../src/core/journal/states.js';
import { countOperations, getOperation, listOperations } from '../src/core/journal/operations.js';
import { validateId } from '../src/core/intake/validate.js';
import { operationsJson, type OperationJson } from '../src/core/journal/views.js';
import { UsageError } from '../src/errors.js';
import { action, parsePositiveInt } from './support/action.js';
import { Option } from './support/commander.js';
import type { Deps } from './support/deps.js';
import { formatAmount, formatTime } from './support/format.js';
import { info, printJson, printPaged } from './support/io.js';
import { nextCommands } from './support/next.js';
import { flow, styleFor } from './support/style.js';
import { printable } from './support/terminal.js';

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
    .description(
      'operations waiting for a human, oldest first, with the evidence (transactions, candidates, observations, attempts) and the next command',
    )
    .option('--provider <name>', 'only this provider')
    .option('--limit <n>', 'at most N, the oldest', parsePositiveInt('--limit'), 50)
    .option(
      '--after <id>',
      'the next page: operations waiting less long than this one (the last id of the previous page)',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  $ recon review list --json\n  $ recon review list --limit 20 --after refund:ord_1042     # the next page',
    )
    .action(
      action<ReviewListOptions>(async (_a, opts, deps) => {
        const page = await runReviewList(opts, deps);
        if (deps.globals.json) printJson(deps.io, reviewListJson(page));
        else await renderReviewList(page, opts, deps);
      }),
    );
  review
    .command('resolve')
    .description('record a human decision on a needs_review operation')
    .argument('<id>', 'operation id')
    .addOption(new Option('--outcome <outcome>', 'the decision').choices(REVIEW_OUTCOMES).makeOptionMandatory())
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
      action<Omit<ResolveOptions, 'id'>>(async ([id], opts, deps) => {
        const r = await runResolve({ id, ...opts }, deps);
        if (deps.globals.json) printJson(deps.io, r.operation);
        else info(deps.io, `${r.operation.id}: ${r.operation.state} (by ${r.actor})`);
      }),
    );
}

export interface ResolveOptions {
  /** The operation id, as typed. */
  id: string;
  outcome: string;
  txn?: string;
  note: string;
  force?: boolean;
  reason?: string;
}

/** A human decision recorded: the operation as `--json` shows it, and who decided. */
export async function runResolve(o: ResolveOptions, deps: Deps): Promise<{ operation: OperationJson; actor: string }> {
  if (!isReviewOutcome(o.outcome))
    throw new UsageError(`--outcome: "${o.outcome}" is not one of ${REVIEW_OUTCOMES.join(', ')}`);
  const outcome = o.outcome;
  const force = checkForce({ force: o.force, reason: o.reason });
  const core = await deps.core();
  const id = validateId(o.id);
  const provider = await deps.provider((await getOperation(core.db, id)).provider);
  const check = await checkResolve(core, provider, id, { outcome, txnId: o.txn });
  const op = await resolveReview(core, provider, check, { ...force, note: o.note });
  return { operation: (await operationsJson(core.db, [op]))[0], actor: core.actor };
}

export interface ReviewListOptions {
  provider?: string;
  limit: number;
  after?: string;
}

/**
 * The human queue with its evidence, oldest first, and the exact next command for each: `--limit`
 * keeps the oldest (the ones waiting longest are never the ones left out), `--after ID` pages on.
 */
export async function runReviewList(opts: ReviewListOptions, deps: Deps): Promise<ReviewPage> {
  if (opts.after !== undefined && opts.after.trim() === '')
    throw new UsageError('--after: empty; give the last id of the previous page');
  const core = await deps.core();
  if (opts.after) await getOperation(core.db, validateId(opts.after, '--after'));
  const filter = { states: ['needs_review' as const], provider: opts.provider, orHeld: true };
  const [ops, total] = await Promise.all([
    listOperations(core.db, { ...filter, limit: opts.limit, after: opts.after, oldestFirst: true }),
    countOperations(core.db, filter),
  ]);
  const json = await operationsJson(core.db, ops);
  const items = [];
  for (const o of json) {
    const evidence = await evidenceOf(core.db, o.id);
    const next = nextCommands({
      id: o.id,
      state: o.state,
      review_reason: o.review_reason,
      linked: evidence.linked.map((t) => t.provider_id),
      candidates: evidence.candidates.map((c) => c.provider_id),
    });
    items.push({ op: o, evidence, next });
  }
  const last = json[json.length - 1]?.id ?? null;
  // More beyond this page: the cursor to pass as --after for the next one.
  const more = json.length === opts.limit && last !== null;
  return { items, total, last, more };
}

/** One page of the queue: each operation with its evidence and next commands; `more`: pages follow `last`. */
export interface ReviewPage {
  items: { op: OperationJson; evidence: Evidence; next: string[] }[];
  total: number;
  last: string | null;
  more: boolean;
}

/** The `--json` document of `review list`. */
function reviewListJson({ items, total, last, more }: ReviewPage) {
  return {
    operations: items.map(({ op, evidence, next }) => ({
      ...op,
      evidence: {
        linked: evidence.linked.map((t) => ({
          provider_id: t.provider_id,
          status: t.status,
          amount: t.amount,
          currency: t.currency,
          created: t.created?.toISOString() ?? null,
          linked_via: t.linked_via,
        })),
        candidates: evidence.candidates,
        observations: evidence.observations.map((ob) => ({
          observed_at: ob.observed_at.toISOString(),
          result: ob.result,
        })),
        attempts: evidence.attempts.map((a) => ({
          number: a.number,
          started_at: a.started_at.toISOString(),
          outcome: a.outcome,
          error_class: a.error_class,
        })),
      },
      next,
    })),
    total,
    next_after: more ? last : null,
  };
}

async function renderReviewList(
  { items, total, last, more }: ReviewPage,
  opts: ReviewListOptions,
  deps: Deps,
): Promise<void> {
  if (!items.length)
    return info(deps.io, opts.after ? `nothing needs review after ${opts.after}` : 'nothing needs review');
  // The count first, where a person starts reading: the queue is longer than the page.
  if (items.length < total)
    info(
      deps.io,
      `showing ${items.length} of ${total}, oldest first; --limit N${more ? `, or the next page with --after ${last}` : ''}`,
    );
  const io = deps.io;
  const s = await styleFor(io);
  const now = deps.now().getTime();
  const blocks: string[] = [];
  for (const { op, evidence, next } of items) {
    const lines = [
      await flow(io, [
        s.bold(printable(op.id)),
        `${s.state(op.state)} (${printable(op.review_reason ?? 'no reason')})`,
        formatAmount(op.amount, op.currency),
        `${printable(op.provider)} ${printable(op.action)}`,
        `waiting ${formatDuration(now - Date.parse(op.updated_at))}`,
        op.assignee ? `assignee ${printable(op.assignee)}` : '',
      ]),
    ];
    // Each value of a field is a row of atoms: on a narrow terminal it continues below, indented,
    // and an id is never cut.
    const field = async (name: string, values: string[][]) => {
      for (const [i, v] of values.entries())
        lines.push(await flow(io, [`  ${(i === 0 ? name : '').padEnd(11)}`, ...v], 15));
    };
    await field(
      'linked',
      evidence.linked.length
        ? evidence.linked.map((t) => [
            printable(t.provider_id),
            printable(t.status),
            formatAmount(t.amount, t.currency),
            `created ${formatTime(t.created) || '?'}`,
            `(via ${t.linked_via})`,
          ])
        : [['none']],
    );
    if (evidence.candidates.length)
      await field(
        'candidates',
        evidence.candidates.map((c) => [
          printable(c.provider_id),
          printable(c.status),
          formatAmount(c.amount, c.currency),
          `created ${formatTime(c.created) || '?'}`,
          '(no recon metadata)',
        ]),
      );
    await field(
      'observed',
      evidence.observations.length
        ? evidence.observations.map((ob) => [formatTime(ob.observed_at), ob.result])
        : [['never looked up']],
    );
    await field(
      'attempts',
      evidence.attempts.length
        ? evidence.attempts.map((a) => [
            `#${a.number}`,
            formatTime(a.started_at),
            `${a.outcome ?? 'in flight'}${a.error_class ? ` (${printable(a.error_class)})` : ''}`,
          ])
        : [['none']],
    );
    // A command is printed whole on its line, however wide: one that is folded or cut cannot be pasted.
    for (const [i, n] of next.entries()) lines.push(`  ${(i === 0 ? 'next' : '').padEnd(11)}  ${s.cyan(n)}`);
    blocks.push(lines.join('\n'));
  }
  await printPaged(io, blocks.join('\n\n'));
}
