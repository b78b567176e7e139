import type { Decision, LookupResult } from '../../types.js';

/** The JSON shape of a `retry`/`run` decision (SPEC §7). */
export interface DecisionJson {
  id: string;
  decision: Decision['decision'];
  rule: string;
  state: string;
  explanation: string;
  review_reason?: string;
  provider_txn_ids?: string[];
  attempt?: number;
  /** A wait: when a retry may be allowed (ISO time). */
  retry_at?: string;
}

/** A decision written (its JSON), or why it was not. */
export type Applied = { ok: true; json: DecisionJson } | { ok: false; error: Error };

export function decisionJson(id: string, d: Decision): DecisionJson {
  return {
    id,
    decision: d.decision,
    rule: d.rule,
    state: d.state,
    explanation: d.explanation,
    ...(d.review_reason ? { review_reason: d.review_reason } : {}),
    ...(d.link?.length ? { provider_txn_ids: d.link.map((t) => t.provider_id) } : {}),
    ...(d.retry_at ? { retry_at: d.retry_at.toISOString() } : {}),
  };
}

/** A lookup as recorded in an observation and an audit event, and shown by `recon lookup --json`. */
export function lookupDetail(l: LookupResult): Record<string, unknown> {
  return {
    result: l.result,
    matches: l.matches.map(txnSummary),
    candidates: l.candidates.map(txnSummary),
    ...(l.error ? { error: l.error } : {}),
    ...(l.reason ? { reason: l.reason } : {}),
    // Which answers came from `recon run`'s ledger scan rather than a lookup of the operation's own.
    source: l.source ?? 'lookup',
    ...(l.provider_date ? { provider_date: l.provider_date.toISOString() } : {}),
    ...(l.source && l.note ? { note: l.note } : {}),
  };
}

function txnSummary(t: LookupResult['matches'][number]) {
  return {
    provider_id: t.provider_id,
    status: t.status,
    amount: t.amount,
    currency: t.currency,
    operation_id: t.operation_id,
    created: t.created ? t.created.toISOString() : null,
  };
}
