import type { Command } from 'commander';
import { validateId } from '../src/core/intake/validate.js';
import { candidatesOf } from '../src/core/review/evidence.js';
import { showOperation, type OperationDetail } from '../src/core/journal/views.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { printJson, printPaged } from './support/io.js';
import { formatAmount, formatTime } from './support/format.js';
import { nextCommands } from './support/next.js';
import { flow, renderTable, styleFor } from './support/style.js';
import { printable as p } from './support/terminal.js';

export function register(ops: Command): void {
  ops
    .command('show')
    .description('one operation: record, attempts, provider transactions, observations and the audit timeline')
    .argument('<id>', 'operation id')
    .addHelpText(
      'after',
      '\nExample:\n  $ recon ops show refund:ord_1042\n  $ recon ops show refund:ord_1042 --json | jq .events',
    )
    .action(
      action(async ([id], _opts, deps) => {
        const detail = await runShow({ id }, deps);
        if (deps.globals.json) return printJson(deps.io, detail);
        await renderDetail(deps, detail);
      }),
    );
}

export interface ShowOptions {
  /** The operation id, as typed. */
  id: string;
}

/** One operation with its attempts, transactions, observations and audit timeline. */
export async function runShow(o: ShowOptions, deps: Deps): Promise<OperationDetail> {
  const core = await deps.core();
  return showOperation(core.db, validateId(o.id));
}

export async function renderDetail(deps: Deps, d: OperationDetail): Promise<void> {
  const io = deps.io;
  const s = await styleFor(io);
  const op = d.operation;
  const out: string[] = [];
  const field = (name: string, value: string) => `  ${name.padEnd(11)}${value}`;
  out.push(
    await flow(io, [
      s.bold(p(op.id)),
      s.state(op.state),
      op.review_reason ? `(review: ${p(op.review_reason)})` : '',
      op.assignee ? `assignee ${p(op.assignee)}` : '',
    ]),
    field('provider', `${p(op.provider)} ${p(op.action)}`),
    field('key', p(op.idempotency_key)),
  );
  if (op.client_reference) out.push(field('client ref', p(op.client_reference)));
  out.push(
    field('amount', formatAmount(op.amount, op.currency) || '-'),
    field('attempts', String(op.attempt_count)),
    field('created', formatTime(op.created_at)),
  );
  if (op.resolved_at) out.push(field('resolved', formatTime(op.resolved_at)));
  out.push(field('payload', `sha256 ${op.payload_hash}`));
  if (d.provider_transactions.length) {
    out.push('', s.bold('Provider transactions'));
    out.push(
      await renderTable(
        io,
        ['provider id', 'status', 'amount', 'created', 'linked via', 'by', 'linked at'],
        d.provider_transactions.map((t) => [
          p(t.provider_id),
          p(t.status),
          formatAmount(t.amount, t.currency),
          formatTime(t.created),
          p(t.linked_via),
          p(t.linked_by),
          formatTime(t.linked_at),
        ]),
      ),
    );
  }
  if (d.attempts.length) {
    out.push('', s.bold('Attempts'));
    out.push(
      await renderTable(
        io,
        ['#', 'key', 'started', 'ended', 'outcome', 'error', 'request id'],
        d.attempts.map((a) => [
          a.number,
          p(a.idempotency_key),
          formatTime(a.started_at),
          a.ended_at ? formatTime(a.ended_at) : '(in flight)',
          a.outcome ?? '',
          p(a.error_class),
          p(a.provider_request_id),
        ]),
      ),
    );
  }
  if (d.observations.length) {
    out.push('', s.bold('Observations') + s.dim('  (provider lookups: the evidence the rule reads)'));
    const chronological = [...d.observations].sort((a, b) => a.observed_at.getTime() - b.observed_at.getTime());
    out.push(
      await renderTable(
        io,
        ['observed at', 'result', 'matches', 'ambiguous candidates', 'error'],
        chronological.map((o) => {
          const detail = o.detail as { matches?: { provider_id: string }[]; error?: string };
          return [
            formatTime(o.observed_at),
            o.result,
            (detail.matches ?? []).map((m) => p(m.provider_id)).join('\n'),
            candidatesOf(o)
              .map((c) => p(`${c.provider_id} (${formatAmount(c.amount, c.currency)}, ${c.status ?? '?'})`))
              .join('\n'),
            p(detail.error ?? ''),
          ];
        }),
        { text: ['error'] },
      ),
    );
  }
  const latest = [...d.observations].sort((a, b) => b.observed_at.getTime() - a.observed_at.getTime());
  const withCandidates = latest.find((o) => candidatesOf(o).length > 0);
  const next = nextCommands({
    id: op.id,
    state: op.state,
    review_reason: op.review_reason,
    linked: d.provider_transactions.map((t) => t.provider_id),
    candidates: withCandidates
      ? candidatesOf(withCandidates)
          .map((c) => c.provider_id)
          .filter((c) => !op.provider_txn_ids.includes(c))
      : [],
  });
  out.push('', s.bold('Timeline'));
  for (const e of d.events) {
    const move =
      e.from_state && e.to_state && e.from_state !== e.to_state
        ? `${e.from_state} → ${s.state(e.to_state)}`
        : e.to_state
          ? s.state(e.to_state)
          : '';
    // Each event: its time, number, kind and move, then rule and actor, then its detail, each
    // value whole (a provider id cut at the edge is one a person cannot paste).
    out.push(
      await flow(
        io,
        [
          `  ${s.dim(formatTime(e.at))}`,
          String(e.seq).padStart(3),
          p(e.kind).padEnd(20),
          move,
          e.rule ? s.dim(`[${p(e.rule)}]`) : '',
          s.dim(p(e.actor)),
        ],
        6,
      ),
    );
    const detail = summarize(e.detail);
    if (detail.length) out.push(await flow(io, [' '.repeat(4), ...detail.map((x) => s.dim(x))], 6));
  }
  if (next.length) out.push('', s.bold('Next'), ...next.map((n) => `  ${s.cyan(n)}`));
  await printPaged(io, out.join('\n'));
}

function summarize(detail: Record<string, unknown>): string[] {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(detail)) {
    if (v === null || v === undefined || k === 'payload_hash') continue;
    // Whole values: a cut provider id (`re_H61l…`) is one a person cannot paste.
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    parts.push(p(`${k}=${text}`));
  }
  return parts;
}
