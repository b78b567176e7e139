/**
 * What a `module` provider answers is a user's code, not an adapter recon ships: its answers are
 * checked at the boundary, so that a malformed one is an answer recon cannot use (a lookup
 * `unavailable`, a submit `unknown`) and never a TypeError in the middle of a run (exit 1), nor a
 * decision taken from half an answer.
 */
import { ProviderUnavailableError } from '../../errors.js';
import { unavailableLookup } from '../../core/found/lookup-result.js';
import { isPlainObject } from '../../lib/dict.js';
import type { LookupResult, ProviderTxn, SubmitResult } from '../../types.js';

const LOOKUP_RESULTS = new Set(['found', 'not_found', 'pending', 'unavailable', 'ambiguous']);
const SUBMIT_OUTCOMES = new Set(['confirmed', 'pending', 'failed', 'unknown', 'conflict']);
const TXN_STATES = new Set(['confirmed', 'pending', 'failed']);

const optionalString = (v: unknown) => v === undefined || v === null || typeof v === 'string';

/** What is wrong with one transaction, or null. */
function txnProblem(t: unknown): string | null {
  if (!isPlainObject(t)) return 'is not an object';
  if (typeof t.provider_id !== 'string' || t.provider_id === '') return 'has no provider_id (a non-empty string)';
  if (typeof t.state !== 'string' || !TXN_STATES.has(t.state)) return 'has no state (confirmed, pending or failed)';
  if (typeof t.status !== 'string') return 'has no status (the provider’s own status string)';
  if (t.amount !== undefined && t.amount !== null && !Number.isSafeInteger(t.amount))
    return 'has an amount that is not an integer in minor units (or null)';
  for (const f of ['currency', 'operation_id', 'client_reference', 'idempotency_key', 'group'] as const) {
    if (!optionalString(t[f])) return `has a ${f} that is not a string (or null)`;
  }
  if (t.created !== undefined && t.created !== null && !(t.created instanceof Date))
    return 'has a created that is not a Date';
  return null;
}

function listProblem(list: unknown, field: string): string | null {
  if (!Array.isArray(list)) return `${field} is not an array`;
  for (const [i, t] of list.entries()) {
    const p = txnProblem(t);
    if (p) return `${field}[${i}] ${p}`;
  }
  return null;
}

/** The same transaction with the optional fields a module may leave out filled in. */
function normalTxn(t: ProviderTxn): ProviderTxn {
  return {
    ...t,
    amount: t.amount ?? null,
    currency: t.currency ?? null,
    operation_id: t.operation_id ?? null,
    client_reference: t.client_reference ?? null,
    created: t.created ?? null,
  };
}

function lookupProblem(r: unknown): string | null {
  if (!isPlainObject(r)) return 'an answer that is not an object';
  if (typeof r.result !== 'string' || !LOOKUP_RESULTS.has(r.result))
    return `result ${JSON.stringify(r.result)} (one of ${[...LOOKUP_RESULTS].join(', ')})`;
  // "Nothing" and "could not ask" need no lists; every other answer is its lists.
  const needsLists = r.result === 'found' || r.result === 'pending' || r.result === 'ambiguous';
  for (const field of ['matches', 'candidates'] as const) {
    if (r[field] === undefined && !(needsLists && field === 'matches')) continue;
    const p = listProblem(r[field], field);
    if (p) return p;
  }
  const matches = r.matches as unknown[] | undefined;
  if ((r.result === 'found' || r.result === 'pending') && !matches?.length)
    return `result "${r.result}" with no transaction in matches`;
  if (r.result === 'not_found' && matches?.length) return 'result "not_found" with transactions in matches';
  return null;
}

/** The module's lookup answer, or `unavailable` naming what was wrong with it. */
export function checkedLookup(provider: string, r: unknown): LookupResult {
  const problem = lookupProblem(r);
  if (problem) {
    return unavailableLookup(
      `module provider ${provider}: lookup() answered with ${problem}; a lookup answers {result, matches: [transactions], candidates: [transactions]} (SPEC §6)`,
    );
  }
  const l = r as LookupResult;
  return { ...l, matches: (l.matches ?? []).map(normalTxn), candidates: (l.candidates ?? []).map(normalTxn) };
}

function submitProblem(r: unknown): string | null {
  if (!isPlainObject(r)) return 'an answer that is not an object';
  if (typeof r.outcome !== 'string' || !SUBMIT_OUTCOMES.has(r.outcome))
    return `outcome ${JSON.stringify(r.outcome)} (one of ${[...SUBMIT_OUTCOMES].join(', ')})`;
  if (r.txn !== undefined && r.txn !== null) {
    const p = txnProblem(r.txn);
    if (p) return `a txn that ${p}`;
  }
  if ((r.outcome === 'confirmed' || r.outcome === 'pending') && !r.txn)
    return `outcome "${r.outcome}" with no txn (the transaction it created)`;
  return null;
}

/**
 * The module's submit answer. The request may have been carried out whatever the answer says,
 * so an answer recon cannot read is an unknown outcome (recon looks it up), never a failure.
 */
export function checkedSubmit(provider: string, r: unknown): SubmitResult {
  const problem = submitProblem(r);
  if (problem) {
    return {
      outcome: 'unknown',
      error_class: 'malformed_answer',
      message: `module provider ${provider}: submit() answered with ${problem}; the request may have been carried out, so the outcome is unknown`,
    };
  }
  const s = r as SubmitResult;
  return s.txn ? { ...s, txn: normalTxn(s.txn) } : s;
}

/** The module's get answer: a transaction or null; anything else is a provider error (exit 5) naming the module. */
export function checkedGet(provider: string, t: unknown): ProviderTxn | null {
  if (t === null || t === undefined) return null;
  const p = txnProblem(t);
  if (p) throw new ProviderUnavailableError(`module provider ${provider}: get() answered with a transaction that ${p}`);
  return normalTxn(t as ProviderTxn);
}
