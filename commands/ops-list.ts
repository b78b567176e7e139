import type { Command } from 'commander';
import { formatDuration, parseDuration, parseSinceOrDate } from '../src/lib/durations.js';
import { countOperations, getOperation, listOperations } from '../src/core/journal/operations.js';
import { validateId } from '../src/core/intake/validate.js';
import { isState } from '../src/core/journal/states.js';
import { operationsJson, type OperationJson } from '../src/core/journal/views.js';
import { UsageError } from '../src/errors.js';
import { STATES, UNRESOLVED_STATES, type State } from '../src/types.js';
import { action, parsePositiveInt } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, printPaged, println, type IO } from './support/io.js';
import { csvRow } from './support/csv.js';
import { formatAmount } from './support/format.js';
import { renderTable, styleFor } from './support/style.js';
import { printable } from './support/terminal.js';

export interface ListOptions {
  state?: string;
  unresolved?: boolean;
  provider?: string;
  olderThan?: string;
  since?: string;
  clientRef?: string;
  limit: number;
  after?: string;
  csv?: boolean;
}

export function register(ops: Command): void {
  ops
    .command('list')
    .description('operations, newest first')
    .option('--state <states>', `comma-separated states (${STATES.join(', ')})`)
    .option('--unresolved', `only ${UNRESOLVED_STATES.join(', ')}`)
    .option('--provider <name>', 'only this provider')
    .option('--older-than <duration>', 'only operations created longer ago than this (e.g. 10m, 24h)')
    .option('--since <duration|date>', 'only operations created since (e.g. 24h, 2026-01-01)')
    .option('--client-ref <ref>', 'only this client reference')
    .option('--limit <n>', 'at most N operations', parsePositiveInt('--limit'), 50)
    .option('--after <id>', 'the next page: operations listed after this one (the last id of the previous page)')
    .option('--csv', 'CSV on stdout, one row per operation (amounts in minor units)')
    .addHelpText(
      'after',
      `
Examples:
  $ recon ops list --unresolved
  $ recon ops list --state needs_review,outcome_unknown --older-than 1h --json
  $ recon ops list --since 24h
  $ recon ops list --unresolved --limit 100 --after refund:ord_1042     # the next page
  $ recon ops list --state confirmed --csv > confirmed.csv`,
    )
    .action(action<ListOptions>(async (_args, opts, deps) => renderList(await runList(opts, deps), opts, deps)));
}

export function parseStates(text: string | undefined, unresolved: boolean | undefined): State[] | undefined {
  let states: State[] | undefined;
  if (text !== undefined) {
    states = [];
    for (const s of text
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean)) {
      if (!isState(s)) throw new UsageError(`--state: unknown state "${s}"; use one of ${STATES.join(', ')}`);
      states.push(s);
    }
    if (!states.length) throw new UsageError(`--state: give at least one of ${STATES.join(', ')}`);
  }
  if (unresolved) states = states ? states.filter((s) => UNRESOLVED_STATES.includes(s)) : [...UNRESOLVED_STATES];
  return states;
}

/** A page of operations, newest first: `total` matches in all; `more`: the next page is `--after last`. */
export interface ListResult {
  operations: OperationJson[];
  total: number;
  last: string | null;
  more: boolean;
  /** The clock the ages are measured from. */
  now: Date;
}

export async function runList(o: ListOptions, deps: Deps): Promise<ListResult> {
  // `--client-ref ''` (an unset variable in a script) would match nothing, or everything: refused.
  for (const [flag, value] of [
    ['--state', o.state],
    ['--provider', o.provider],
    ['--older-than', o.olderThan],
    ['--since', o.since],
    ['--client-ref', o.clientRef],
    ['--after', o.after],
  ] as const)
    if (value !== undefined && value.trim() === '')
      throw new UsageError(`${flag}: empty; give a value or leave the flag out`);
  const states = parseStates(o.state, o.unresolved);
  const now = deps.now();
  const createdBefore = o.olderThan ? new Date(now.getTime() - parseDuration(o.olderThan, '--older-than')) : undefined;
  const createdSince = o.since ? parseSinceOrDate(o.since, '--since', now) : undefined;
  if (o.csv && deps.globals.json) throw new UsageError('--csv and --json: choose one');
  const core = await deps.core();
  if (o.after) await getOperation(core.db, validateId(o.after, '--after'));
  const filter = { states, provider: o.provider, createdBefore, createdSince, clientReference: o.clientRef };
  const none = states !== undefined && states.length === 0;
  const ops = none ? [] : await listOperations(core.db, { ...filter, limit: o.limit, after: o.after });
  // A first page that is not full holds every match: its length is the total, without a count.
  const total = none ? 0 : !o.after && ops.length < o.limit ? ops.length : await countOperations(core.db, filter);
  const json = await operationsJson(core.db, ops);
  const last = json[json.length - 1]?.id ?? null;
  // More beyond this page: the cursor a script passes as --after for the next one.
  const more = json.length === o.limit && last !== null;
  return { operations: json, total, last, more, now };
}

async function renderList(
  { operations: json, total, last, more, now }: ListResult,
  o: ListOptions,
  deps: Deps,
): Promise<void> {
  if (deps.globals.json) return printJson(deps.io, { operations: json, total, next_after: more ? last : null });
  if (o.csv) {
    println(deps.io, csvRow([...CSV_COLUMNS]));
    for (const op of json) println(deps.io, csvRow(CSV_COLUMNS.map((c) => csvValue(op, c))));
    if (more) info(deps.io, `showing ${json.length} of ${total}; next page: --after ${last}`);
    return;
  }
  if (!json.length) return info(deps.io, o.after ? `no operations after ${o.after}` : 'no operations match');
  await printPaged(deps.io, await renderOperations(deps.io, json, now));
  if (json.length < total)
    info(
      deps.io,
      `showing ${json.length} of ${total}; --limit N for more${more ? `, or the next page with --after ${last}` : ''}`,
    );
}

const CSV_COLUMNS = [
  'id',
  'provider',
  'action',
  'state',
  'amount',
  'currency',
  'attempt_count',
  'client_reference',
  'created_at',
  'updated_at',
  'provider_txn_ids',
  'review_reason',
] as const;

function csvValue(op: OperationJson, c: (typeof CSV_COLUMNS)[number]): string | number | null {
  if (c === 'provider_txn_ids') return op.provider_txn_ids.join(' ');
  return op[c];
}

/** The `ops list` table (also shown by `recon demo`). */
export async function renderOperations(io: IO, json: OperationJson[], now: Date): Promise<string> {
  const s = await styleFor(io);
  const rows = json.map((op) => [
    printable(op.id),
    printable(op.provider),
    printable(op.action),
    s.state(op.state),
    formatAmount(op.amount, op.currency),
    op.attempt_count,
    formatDuration(now.getTime() - Date.parse(op.created_at)),
    // One id a line: each stays whole, and none is cut at the edge of the column.
    op.provider_txn_ids.map(printable).join('\n'),
    printable(op.review_reason),
    printable(op.client_reference),
  ]);
  return renderTable(
    io,
    ['id', 'provider', 'action', 'state', 'amount', 'attempts', 'age', 'provider txn', 'review', 'client ref'],
    rows,
  );
}
