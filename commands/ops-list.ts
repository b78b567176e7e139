import type { Command } from 'commander';
import { parseDuration, formatDuration } from '../src/core/durations.js';
import { listOperations } from '../src/core/repo.js';
import { isState } from '../src/core/states.js';
import { operationsJson, type OperationJson } from '../src/core/views.js';
import { UsageError } from '../src/errors.js';
import { STATES, UNRESOLVED_STATES, type State } from '../src/types.js';
import { action, parsePositiveInt } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, println, type IO } from './support/io.js';
import { renderTable, styleFor } from './support/style.js';
import { printable } from './support/terminal.js';

export interface ListOptions {
  state?: string;
  unresolved?: boolean;
  provider?: string;
  olderThan?: string;
  clientRef?: string;
  limit: number;
}

export function register(ops: Command): void {
  ops
    .command('list')
    .description('operations, newest first')
    .option('--state <states>', `comma-separated states (${STATES.join(', ')})`)
    .option('--unresolved', `only ${UNRESOLVED_STATES.join(', ')}`)
    .option('--provider <name>', 'only this provider')
    .option('--older-than <duration>', 'only operations created longer ago than this (e.g. 10m, 24h)')
    .option('--client-ref <ref>', 'only this client reference')
    .option('--limit <n>', 'at most N operations', parsePositiveInt('--limit'), 50)
    .addHelpText(
      'after',
      '\nExamples:\n  $ recon ops list --unresolved\n  $ recon ops list --state needs_review,outcome_unknown --older-than 1h --json',
    )
    .action(action<ListOptions>(async (_args, opts, deps) => runList(opts, deps)));
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

export async function runList(o: ListOptions, deps: Deps): Promise<void> {
  const states = parseStates(o.state, o.unresolved);
  const now = deps.now();
  const createdBefore = o.olderThan ? new Date(now.getTime() - parseDuration(o.olderThan, '--older-than')) : undefined;
  const core = await deps.core();
  const ops =
    states && states.length === 0
      ? []
      : await listOperations(core.db, {
          states,
          provider: o.provider,
          createdBefore,
          clientReference: o.clientRef,
          limit: o.limit,
        });
  const json = await operationsJson(core.db, ops);
  if (deps.globals.json) return printJson(deps.io, { operations: json });
  if (!json.length) return info(deps.io, 'no operations match');
  println(deps.io, await renderOperations(deps.io, json, now));
}

/** The `ops list` table (also shown by `recon demo`). */
export async function renderOperations(io: IO, json: OperationJson[], now: Date): Promise<string> {
  const s = await styleFor(io);
  const rows = json.map((op) => [
    printable(op.id),
    printable(op.provider),
    printable(op.action),
    s.state(op.state),
    op.amount === null ? '' : `${op.amount} ${printable(op.currency)}`.trim(),
    op.attempt_count,
    formatDuration(now.getTime() - Date.parse(op.created_at)),
    printable(op.provider_txn_ids.join(' ')),
    printable(op.review_reason),
  ]);
  return renderTable(
    io,
    ['id', 'provider', 'action', 'state', 'amount', 'attempts', 'age', 'provider txn', 'review'],
    rows,
  );
}
