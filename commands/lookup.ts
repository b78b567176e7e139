import type { Command } from 'commander';
import { parseSinceOrDate } from '../src/core/durations.js';
import { applyLookupFindings, isReconcilable } from '../src/core/found.js';
import { evaluate, lookupDetail, safeLookup } from '../src/core/reconcile.js';
import { getOperation } from '../src/core/repo.js';
import { note, recordObservation } from '../src/core/transition.js';
import { validateId } from '../src/core/validate.js';
import { UsageError } from '../src/errors.js';
import type { LookupResult, ProviderTxn } from '../src/types.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, println } from './support/io.js';
import { renderTable } from './support/style.js';
import { printable } from './support/terminal.js';

export interface LookupOptions {
  key?: string;
  clientRef?: string;
  provider?: string;
  since?: string;
}

export function register(program: Command): void {
  program
    .command('lookup')
    .description('ask the provider what it holds (read-only at the provider)')
    .argument('[id]', 'operation id: looks it up and records the observation')
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
    .action(action<LookupOptions>(async ([id], opts, deps) => runLookup(id, opts, deps)));
}

export async function runLookup(id: string | undefined, o: LookupOptions, deps: Deps): Promise<number | void> {
  if (id && (o.key || o.clientRef))
    throw new UsageError('give an operation ID, or --key/--client-ref with --provider, not both');
  if (!id) {
    if (!o.key && !o.clientRef)
      throw new UsageError('give an operation ID, or --key K / --client-ref R with --provider P');
    if (!o.provider) throw new UsageError('--provider: required with --key or --client-ref');
    const provider = await deps.provider(o.provider);
    const since = o.since ? parseSinceOrDate(o.since, '--since', deps.now()) : undefined;
    const lookup = await provider.lookup({
      idempotency_key: o.key,
      operation_id: o.key,
      client_reference: o.clientRef,
      since,
    });
    if (deps.globals.json)
      return printJson(deps.io, {
        query: {
          key: o.key ?? null,
          client_reference: o.clientRef ?? null,
          provider: o.provider,
          since: since?.toISOString() ?? null,
        },
        ...lookupDetail(lookup),
      });
    await renderLookup(deps, lookup);
    return lookup.result === 'unavailable' ? 5 : 0;
  }
  const core = await deps.core();
  const op = await getOperation(core.db, validateId(id));
  const provider = await deps.provider(op.provider);
  if (!isReconcilable(op.state)) {
    // Not the rule's to decide: what is found is linked as evidence (a duplicate for a confirmed operation).
    const lookup = await safeLookup(provider, op);
    const state = await applyLookupFindings(core, provider, op, lookup);
    if (deps.globals.json) return printJson(deps.io, { id: op.id, state, ...lookupDetail(lookup), conclusion: null });
    await renderLookup(deps, lookup);
    info(
      deps.io,
      `${op.id} is ${state}${state !== op.state ? ` (was ${op.state})` : ''}; the rule decides only unresolved operations`,
    );
    return lookup.result === 'unavailable' ? 5 : 0;
  }
  const { lookup, decision } = await evaluate(core, provider, op);
  // Read-only at the provider; recon records what it saw, as evidence for the rule.
  await core.db
    .transaction(async (tx) => {
      await recordObservation(tx, op.id, { at: core.now(), result: lookup.result, detail: lookupDetail(lookup) });
      await note(tx, op.id, {
        actor: core.actor,
        now: core.now(),
        kind: 'lookup',
        rule: null,
        detail: { ...lookupDetail(lookup), would: decision.rule },
      });
    })
    .catch((err) => {
      if ((err as Error).name !== 'NotFoundError') throw err;
    });
  const conclusion = {
    decision: decision.decision,
    rule: decision.rule,
    state: decision.state,
    explanation: decision.explanation,
  };
  if (deps.globals.json) return printJson(deps.io, { id: op.id, state: op.state, ...lookupDetail(lookup), conclusion });
  await renderLookup(deps, lookup);
  info(deps.io, `recon would conclude: ${decision.decision} (${decision.rule}): ${decision.explanation}`);
  return lookup.result === 'unavailable' ? 5 : 0;
}

async function renderLookup(deps: Deps, l: LookupResult): Promise<void> {
  const rows = (list: ProviderTxn[], kind: string) =>
    list.map((t) => [
      kind,
      printable(t.provider_id),
      printable(t.status),
      `${t.amount ?? ''} ${printable(t.currency)}`.trim(),
      printable(t.operation_id),
      printable(t.client_reference),
      t.created?.toISOString() ?? '',
    ]);
  const all = [...rows(l.matches, 'match'), ...rows(l.candidates, 'candidate (no recon metadata)')];
  if (all.length)
    println(
      deps.io,
      await renderTable(deps.io, ['', 'provider id', 'status', 'amount', 'operation', 'client ref', 'created'], all),
    );
  info(deps.io, `lookup: ${l.result}${l.error ? ` (${printable(l.error)})` : ''}`);
}
