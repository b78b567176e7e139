import type { LookupResult, ProviderTxn } from '../../types.js';

/**
 * The label of a lookup that answered (issue 25: one home, for every adapter): its own transactions
 * (all pending → `pending`, else `found`), else look-alikes (`ambiguous`), else `not_found`. The
 * rule reads the label and the transactions together (rule.ts: a label that contradicts them is
 * trusted for neither), so an adapter never spells it on its own.
 */
export function lookupResultOf(matches: ProviderTxn[], candidates: ProviderTxn[]): LookupResult['result'] {
  if (matches.length > 0) return matches.every((t) => t.state === 'pending') ? 'pending' : 'found';
  return candidates.length > 0 ? 'ambiguous' : 'not_found';
}

/**
 * A lookup that got no answer (SPEC §4.6: an outage, a rate limit, an adapter that threw): it proves
 * nothing, so it carries no transactions, only why (`error`: class and message, never secrets), and
 * when the provider asked to be left alone (`retry_after_ms`, a 429's Retry-After).
 */
export function unavailableLookup(
  error: string,
  o: { retry_after_ms?: number; note?: string } = {},
): LookupResult & { error: string } {
  return {
    result: 'unavailable',
    matches: [],
    candidates: [],
    error,
    ...(o.retry_after_ms !== undefined && o.retry_after_ms > 0 ? { retry_after_ms: o.retry_after_ms } : {}),
    ...(o.note !== undefined ? { note: o.note } : {}),
  };
}
