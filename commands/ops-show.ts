import type { Command } from 'commander';
import { validateId } from '../src/core/validate.js';
import { showOperation, type OperationDetail } from '../src/core/views.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { printJson, println } from './support/io.js';
import { renderTable, styleFor } from './support/style.js';
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
        const core = await deps.core();
        const detail = await showOperation(core.db, validateId(id));
        if (deps.globals.json) return printJson(deps.io, detail);
        await renderDetail(deps, detail);
      }),
    );
}

export async function renderDetail(deps: Deps, d: OperationDetail): Promise<void> {
  const s = await styleFor(deps.io);
  const op = d.operation;
  const lines = [
    `${s.bold(p(op.id))}  ${s.state(op.state)}${op.review_reason ? `  (review: ${p(op.review_reason)})` : ''}`,
    `  provider   ${p(op.provider)} ${p(op.action)}    key ${p(op.idempotency_key)}${op.client_reference ? `    client ref ${p(op.client_reference)}` : ''}`,
    `  amount     ${op.amount ?? '-'} ${p(op.currency)}    attempts ${op.attempt_count}    payload ${op.payload_hash.slice(0, 12)}…`,
    `  created    ${op.created_at}${op.resolved_at ? `    resolved ${op.resolved_at}` : ''}${op.assignee ? `    assignee ${p(op.assignee)}` : ''}`,
  ];
  println(deps.io, lines.join('\n'));
  if (d.provider_transactions.length) {
    println(deps.io, '\n' + s.bold('Provider transactions'));
    println(
      deps.io,
      await renderTable(
        deps.io,
        ['provider id', 'status', 'amount', 'linked via', 'by', 'at'],
        d.provider_transactions.map((t) => [
          p(t.provider_id),
          p(t.status),
          `${t.amount ?? ''} ${p(t.currency)}`.trim(),
          p(t.linked_via),
          p(t.linked_by),
          t.linked_at.toISOString(),
        ]),
      ),
    );
  }
  if (d.attempts.length) {
    println(deps.io, '\n' + s.bold('Attempts'));
    println(
      deps.io,
      await renderTable(
        deps.io,
        ['#', 'key', 'started', 'ended', 'outcome', 'error', 'request id'],
        d.attempts.map((a) => [
          a.number,
          p(a.idempotency_key),
          a.started_at.toISOString(),
          a.ended_at?.toISOString() ?? '(in flight)',
          a.outcome ?? '',
          p(a.error_class),
          p(a.provider_request_id),
        ]),
      ),
    );
  }
  println(deps.io, '\n' + s.bold('Timeline'));
  for (const e of d.events) {
    const move =
      e.from_state && e.to_state && e.from_state !== e.to_state
        ? `${e.from_state} → ${s.state(e.to_state)}`
        : e.to_state
          ? s.state(e.to_state)
          : '';
    const detail = summarize(e.detail);
    println(
      deps.io,
      `  ${s.dim(e.at.toISOString())}  ${String(e.seq).padStart(3)}  ${p(e.kind).padEnd(20)} ${move}${e.rule ? s.dim(`  [${p(e.rule)}]`) : ''}  ${s.dim(p(e.actor))}${detail ? `\n${' '.repeat(31)}${s.dim(detail)}` : ''}`,
    );
  }
}

function summarize(detail: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(detail)) {
    if (v === null || v === undefined || k === 'payload_hash') continue;
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    parts.push(p(`${k}=${text.length > 80 ? text.slice(0, 77) + '…' : text}`));
  }
  return parts.join('  ');
}
