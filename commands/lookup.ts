import type { Command } from 'commander';
import { parseSinceOrDate } from '../src/lib/durations.js';
import { lookupClientReference, lookupOperation } from '../src/core/reconcile/lookup.js';
import { lookupDetail } from '../src/core/journal/decision-json.js';
import { getOperation } from '../src/core/journal/operations.js';
import { validateId } from '../src/core/intake/validate.js';
import { ResultExit, UsageError } from '../src/errors.js';
import type { LookupResult, ProviderTxn } from '../src/types.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, println } from './support/io.js';
import { formatAmount, formatTime, waitingLine } from './support/format.js';
import { nextCommands } from './support/next.js';
import { renderTable, styleFor } from './support/style.js';
import { printable } from './support/terminal.js';

export interface LookupOptions {
  /** The operation id, as typed; or look up by key/client reference with the provider. */
  id?: string;
  key?: string;
  clientRef?: string;
  provider?: string;
  since?: string;
}

export function register(program: Command): void {
  program
    .command('lookup')
    .description('ask the provider what it holds, in any state (read-only at the provider)')
    .argument(
      '[id]',
      'operation id: an unresolved one gets one step of `recon run` (the rule applied; never a retry), one in review gets evidence, a resolved one nothing',
    )
    .option('--key <key>', 'look up by idempotency key (with --provider)')
    .option('--client-ref <ref>', 'look up by client reference (with --provider)')
    .option('--provider <name>', 'provider for --key / --client-ref')
    .option('--since <duration|date>', 'with --client-ref: only transactions created since (e.g. 7d, 2026-11-01)')
    .addHelpText(
      'after',
      `
Examples:
  $ recon lookup refund:ord_1042
  $ recon lookup --client-ref ord_1042 --provider stripe --since 7d --json`,
    )
    .action(
      action<Omit<LookupOptions, 'id'>>(async ([id], opts, deps) => {
        const r = await runLookup({ id, ...opts }, deps);
        await renderLookupResult(r, deps);
        // SPEC §7: a provider that could not answer is exit 5, with or without --json (the document says `unavailable`).
        if ((r.by === 'reference' ? r.lookup : r.result.lookup).result === 'unavailable')
          throw new ResultExit(5, 'the provider was unavailable');
      }),
    );
}

/** What a lookup found: by key or client reference (with recon's operations that carry it), or for one operation. */
export type LookupOutcome =
  | {
      by: 'reference';
      query: { key: string | null; client_reference: string | null; provider: string; since: string | null };
      lookup: LookupResult;
      operations: { id: string; state: string }[];
    }
  | { by: 'operation'; id: string; result: Awaited<ReturnType<typeof lookupOperation>>; next: string[] };

export async function runLookup(o: LookupOptions, deps: Deps): Promise<LookupOutcome> {
  const { id } = o;
  if (id && (o.key || o.clientRef))
    throw new UsageError('give an operation ID, or --key/--client-ref with --provider, not both');
  if (!id) {
    if (!o.key && !o.clientRef)
      throw new UsageError('give an operation ID, or --key K / --client-ref R with --provider P');
    if (!o.provider) throw new UsageError('--provider: required with --key or --client-ref');
    const provider = await deps.provider(o.provider);
    const since = o.since ? parseSinceOrDate(o.since, '--since', deps.now()) : undefined;
    // recon's own operations with this reference tell the adapter which charge and amount to
    // compare look-alikes with (a refund made by hand in the dashboard has no recon metadata).
    const core = await deps.coreIfStore();
    const { lookup, operations } = await lookupClientReference(core, provider, {
      clientReference: o.clientRef,
      key: o.key,
      since,
    });
    return {
      by: 'reference',
      query: {
        key: o.key ?? null,
        client_reference: o.clientRef ?? null,
        provider: o.provider,
        since: since?.toISOString() ?? null,
      },
      lookup,
      operations: operations.map((op) => ({ id: op.id, state: op.state })),
    };
  }
  const core = await deps.core();
  const op = await getOperation(core.db, validateId(id));
  const provider = await deps.provider(op.provider);
  const r = await lookupOperation(core, provider, op.id);
  const next = nextCommands({
    id: op.id,
    state: r.operation.state,
    review_reason: r.operation.review_reason,
    linked: r.linked.map((t) => t.provider_id),
    candidates: r.lookup.candidates.map((t) => t.provider_id),
  });
  return { by: 'operation', id: op.id, result: r, next };
}

async function renderLookupResult(out: LookupOutcome, deps: Deps): Promise<void> {
  if (out.by === 'reference') {
    const { query, lookup, operations } = out;
    if (deps.globals.json) return printJson(deps.io, { query, ...lookupDetail(lookup), operations });
    await renderLookup(deps, lookup, []);
    if (operations.length)
      info(
        deps.io,
        `recon operations with this reference: ${operations.map((op) => `${op.id} (${op.state})`).join(', ')}`,
      );
    return;
  }
  const { id, result: r, next } = out;
  if (deps.globals.json)
    return printJson(deps.io, {
      id,
      state: r.operation.state,
      state_before: r.before,
      ...lookupDetail(r.lookup),
      conclusion: r.decision,
      wrote: r.wrote,
      note: r.note,
      provider_txn_ids: r.linked.map((t) => t.provider_id),
      next,
    });
  const s = await styleFor(deps.io);
  const moved =
    r.before !== r.operation.state ? `${r.before} → ${s.state(r.operation.state)}` : s.state(r.operation.state);
  println(
    deps.io,
    `${s.bold(id)}  ${moved}${r.operation.review_reason ? `  (review: ${printable(r.operation.review_reason)})` : ''}`,
  );
  await renderLookup(
    deps,
    r.lookup,
    r.linked.map((t) => t.provider_id),
  );
  if (r.decision) {
    println(deps.io, `rule: ${r.decision.decision} (${r.decision.rule}): ${r.decision.explanation}`);
    if (r.decision.retry_at) println(deps.io, waitingLine(r.decision.retry_at, deps.now()));
  }
  if (r.note) println(deps.io, printable(r.note));
  if (next.length) println(deps.io, `next: ${next.map(printable).join('\n      ')}`);
}

async function renderLookup(deps: Deps, l: LookupResult, linked: string[]): Promise<void> {
  const rows = (list: ProviderTxn[], kind: (t: ProviderTxn) => string) =>
    list.map((t) => [
      kind(t),
      printable(t.provider_id),
      printable(t.status),
      formatAmount(t.amount, t.currency),
      formatTime(t.created),
      t.operation_id === null ? '(no recon metadata)' : printable(t.operation_id),
      printable(t.client_reference),
    ]);
  const all = [
    ...rows(l.matches, (t) => (linked.includes(t.provider_id) ? 'match, linked' : 'match')),
    ...rows(l.candidates, () => 'ambiguous'),
  ];
  const found = `provider: ${l.result}${l.error ? ` (${printable(l.error)})` : ''}${l.matches.length || l.candidates.length ? `, ${l.matches.length} match(es), ${l.candidates.length} ambiguous candidate(s)` : ''}`;
  println(deps.io, found);
  if (l.note) info(deps.io, `(${printable(l.note)})`);
  // The client reference column only when some transaction carries one.
  const head = ['', 'provider id', 'status', 'amount', 'created', 'operation', 'client ref'];
  const keep = head.map((_, i) => i < 6 || all.some((r) => r[i]));
  if (all.length)
    println(
      deps.io,
      await renderTable(
        deps.io,
        head.filter((_, i) => keep[i]),
        all.map((r) => r.filter((_, i) => keep[i])),
      ),
    );
}
