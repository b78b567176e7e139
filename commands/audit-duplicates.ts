import type { Command } from 'commander';
import { parseDuration, parseSinceOrDate } from '../src/lib/durations.js';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import {
  findDuplicates,
  forEachDuplicate,
  scanLedger,
  type Duplicate,
  type DuplicateScan,
  type FindOptions,
} from '../src/core/audit/duplicates.js';
import type { Db } from '../src/store/db.js';
import { ResultExit, UsageError } from '../src/errors.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printPaged } from './support/io.js';
import { renderTable } from './support/style.js';
import { csvRow } from './support/csv.js';
import { formatAmount } from './support/format.js';
import { shellQuote } from './support/shell.js';
import { printable } from './support/terminal.js';

export interface DuplicatesOptions {
  provider?: string;
  since?: string;
  until?: string;
  csv?: boolean;
  full?: boolean;
  window: string;
}

export function register(audit: Command): void {
  audit
    .command('duplicates')
    .description(
      'find provider-side duplicates: several transactions for one operation or client reference, same-charge same-amount refunds close in time',
    )
    .option('--provider <name>', 'only this provider (default: every provider that can list its ledger)')
    .option('--since <duration|date>', 'scan transactions created since (e.g. 365d, 2026-01-01)')
    .option('--until <date>', 'scan transactions created until')
    .option('--full', 're-read the whole ledger instead of only what is new since the last audit')
    .option('--window <duration>', 'same charge + same amount within this counts as a duplicate', '24h')
    .option('--csv', 'CSV on stdout, one row per transaction')
    .addHelpText(
      'after',
      `
Incremental: without --since or --full, only transactions created since the last audit are read
(the earlier ledger is remembered), so a nightly audit costs a few API reads.
Exit 8 when duplicates are found, so a scheduled audit can alert.

Examples:
  $ recon audit duplicates --since 365d --csv > duplicates.csv
  $ recon audit duplicates --json`,
    )
    .action(action<DuplicatesOptions>(async (_a, opts, deps) => runDuplicates(opts, deps)));
}

export async function runDuplicates(o: DuplicatesOptions, deps: Deps): Promise<void> {
  if (o.csv && deps.globals.json) throw new UsageError('--csv and --json: choose one output format');
  const now = deps.now();
  const since = o.since ? parseSinceOrDate(o.since, '--since', now) : undefined;
  const until = o.until ? parseSinceOrDate(o.until, '--until', now) : undefined;
  // An inverted range reads nothing, yet would still be stored as scanned and skipped by the next incremental audit.
  if (since && until && since.getTime() > until.getTime()) {
    throw new UsageError(
      `--since ${since.toISOString()} is after --until ${until.toISOString()}; give the earlier date to --since`,
    );
  }
  const windowMs = parseDuration(o.window, '--window');
  const config = await deps.config();
  const names = o.provider ? [o.provider] : Object.keys(config.providers);
  const core = await deps.core();
  const scans: DuplicateScan[] = [];
  const progress = deps.io.isStderrTTY && !deps.io.quiet && !deps.globals.json && !o.csv;
  for (const name of names) {
    const provider = await deps.provider(name);
    if (!provider.list) {
      if (o.provider) throw new UsageError(`--provider: ${name} cannot list its ledger for audits`);
      continue;
    }
    scans.push(
      await scanLedger(core, provider, {
        since,
        until,
        full: o.full,
        onPage: progress
          ? (p) => deps.io.err.write(`\r  ${p.provider}: page ${p.page}, ${p.transactions} transactions scanned`)
          : undefined,
      }),
    );
    if (progress) deps.io.err.write('\r\x1b[K');
  }
  const find = { provider: o.provider, since, until, windowMs };
  // JSON and CSV are written as the groups are found: a ledger of millions holds thousands of groups,
  // and a report held whole in memory grows with it. A person's table is short enough to collect.
  let found: number;
  if (deps.globals.json) found = await streamJson(deps.io.out, core.db, find, scans);
  else if (o.csv) found = await streamCsv(deps.io.out, core.db, find);
  else {
    const duplicates = await findDuplicates(core.db, find);
    await render(deps, duplicates, scans);
    found = duplicates.length;
  }
  if (found) throw new ResultExit(8, 'duplicates found');
}

/** Writes, waiting for the stream to drain when its buffer is full (stdout piped to a slow reader). */
async function write(out: Writable, text: string): Promise<void> {
  if (!out.write(text)) await once(out, 'drain');
}

const indent = (json: string, by: string) => json.replace(/\n/g, `\n${by}`);

/** Groups per JSON.stringify and write: about 1 KB each, so each text stays well under 128 KB. */
const JSON_GROUPS = 32;

/** What `JSON.stringify({ duplicates: [...] }, null, 2)` writes around the array's elements. */
const OPEN = '{\n  "duplicates": [';
const CLOSE = '\n  ]\n}';

/** The same document `printJson` writes for `{ duplicates, scans }`, byte for byte, one batch of groups at a time. */
async function streamJson(out: Writable, db: Db, find: FindOptions, scans: DuplicateScan[]): Promise<number> {
  await write(out, OPEN);
  let n = 0;
  const total = await forEachDuplicate(db, find, async (batch) => {
    // The batch's elements as they stand in the whole document, in one JSON.stringify: no per-group
    // string re-indented by a regular expression (4 bytes allocated per byte written, node --heap-prof).
    // A few dozen groups at a time: a string over 128 KB is a large object, kept beside the young
    // generation's semi-space rather than in it, where such strings pile up until a minor GC; 200
    // groups' text per write held 6 MB there at a million refunds, 3 MB at 200,000 (node --trace-gc-nvp,
    // v8.getHeapSpaceStatistics).
    for (let i = 0; i < batch.length; i += JSON_GROUPS) {
      const text = JSON.stringify({ duplicates: batch.slice(i, i + JSON_GROUPS) }, null, 2).slice(
        OPEN.length,
        -CLOSE.length,
      );
      await write(out, n ? `,${text}` : text);
      n += Math.min(JSON_GROUPS, batch.length - i);
    }
  });
  await write(out, `${total ? '\n  ' : ''}],\n  "scans": ${indent(JSON.stringify(scans, null, 2), '  ')}\n}\n`);
  return total;
}

async function streamCsv(out: Writable, db: Db, find: FindOptions): Promise<number> {
  await write(out, csvRow(CSV_HEAD));
  const total = await forEachDuplicate(db, find, async (batch) => {
    const rows = csvRows(batch);
    if (rows.length) await write(out, `\n${rows.join('\n')}`);
  });
  await write(out, '\n');
  return total;
}

const CSV_HEAD = [
  'provider',
  'kind',
  'key',
  'provider_id',
  'amount',
  'currency',
  'status',
  'created',
  'operation_id',
  'client_reference',
  'recon_operation',
  'recon_state',
];

function csvRows(duplicates: Duplicate[]): string[] {
  const rows: string[] = [];
  for (const d of duplicates) {
    for (const t of d.transactions) {
      rows.push(
        csvRow([
          d.provider,
          d.kind,
          d.key,
          t.provider_id,
          t.amount,
          t.currency,
          t.status,
          t.created,
          t.operation_id,
          t.client_reference,
          t.recon_operation,
          t.recon_state,
        ]),
      );
    }
  }
  return rows;
}

async function render(deps: Deps, duplicates: Duplicate[], scans: DuplicateScan[]): Promise<void> {
  for (const s of scans) {
    info(
      deps.io,
      `${s.provider}: read ${s.transactions} transaction(s) in ${s.pages} page(s)${s.incremental ? ' (new since the last audit)' : ''}${s.since ? ` since ${s.since}` : ''}`,
    );
  }
  if (!duplicates.length) return info(deps.io, 'no duplicates found');
  await printPaged(
    deps.io,
    await renderTable(
      deps.io,
      ['provider', 'kind', 'key', 'transactions', 'recon operation', 'total', 'recon knows'],
      duplicates.map((d) => [
        printable(d.provider),
        d.kind,
        printable(d.key),
        d.transactions.map((t) => printable(t.provider_id)).join('\n'),
        // Which transaction is recon's: the operation it is linked to, on the same line as its id.
        d.transactions.map((t) => (t.recon_operation ? printable(t.recon_operation) : '-')).join('\n'),
        formatAmount(d.amount_total, d.currency),
        d.recon_knows ? 'yes' : 'no',
      ]),
    ),
  );
  info(deps.io, `${duplicates.length} duplicate group(s) found`);
  // What to type next: the operation in front of people (or already there), else the transactions.
  const next = new Set<string>();
  for (const d of duplicates) {
    const op = d.transactions.find((t) => t.recon_operation);
    if (!op) continue;
    const id = shellQuote(op.recon_operation!);
    next.add(
      op.recon_state === 'needs_review'
        ? `recon ops show ${id}`
        : `recon escalate ${id} --reason "provider-side duplicate: ${d.transactions.map((t) => t.provider_id).join(', ')}"`,
    );
  }
  if (next.size) info(deps.io, `next:\n${[...next].map((n) => `  ${printable(n)}`).join('\n')}`);
}
