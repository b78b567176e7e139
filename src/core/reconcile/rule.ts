/**
 * The reconciliation rule (SPEC §4): the only code in recon that may authorise a retry.
 *
 * `decide()` is a pure function of the operation, its observations, the fresh lookup, the
 * provider's capabilities and the clock: the same recorded state gives the same decision, and the
 * rule name it returns is written to the audit trail.
 *
 * Order of evaluation (the unit tests fix it):
 *  1. An `unavailable` lookup proves nothing, not even its partial matches (a listing that failed on
 *     page 2 may have missed a duplicate): `escalate.stale` when stale, else `provider.unavailable`.
 *     Likewise a lookup that contradicts itself (`lookup.inconsistent`, decision `unavailable`).
 *  2. Matches are classified by found/classify.ts `classifyFound` (the same answer a submit response
 *     and a webhook get): more than one live transaction → `found.duplicate` (duplicate wins over a
 *     disagreement); a match that disagrees → `found.mismatch`. These come before staleness because
 *     they are reviews too, with a more precise reason and the evidence linked (every match).
 *  3. A clean set whose live match (or, none live, failed match) is final (confirmed/failed) →
 *     `found.confirmed`/`found.failed`, however old the operation: a found transaction resolves it,
 *     a human has nothing left to decide.
 *  4. Stale (unresolved for escalateAfter since the first attempt, or since creation when never
 *     attempted) → `escalate.stale`, for everything still open: a pending match (linked), look-alikes,
 *     nothing found.
 *  5. One clean pending match → `found.pending`.
 *  6. Look-alikes without identity → `found.ambiguous` (never linked, never retried).
 *  7. Nothing found → `not_found.*`: wait while the current not_found streak (counted from after the
 *     latest attempt) is younger than the window; then a `pending` operation goes to review
 *     (`not_found.pending`: the provider once accepted it, so it is never retried); otherwise
 *     max_attempts, payload_changed and key_retention are checked, in that order, before `not_found.retry`;
 *     key_retention: the provider's clock (the lookup's `Date`) and recon's disagree by more than the
 *     margin (10% of keyRetention), or, for a lookup that is not authoritative, the key is older than
 *     keyRetention − margin on the later of the two clocks.
 *
 * Every time comparison is written as "permission is proven" (`elapsed >= window`, `age < retention`),
 * so a NaN from a bad date denies the retry instead of granting it.
 */
import { RefusedError } from '../../errors.js';
import type { Decision, LookupResult, Observation, Operation, ProviderCapabilities, ProviderTxn } from '../../types.js';
import { formatDuration } from '../../lib/durations.js';
import { classifyFound } from '../found/classify.js';
import { isDecidable, RECONCILABLE_STATES } from '../journal/states.js';

export interface RuleInput {
  operation: Pick<
    Operation,
    | 'id'
    | 'state'
    | 'amount'
    | 'currency'
    | 'payload_hash'
    | 'attempt_count'
    | 'first_attempt_at'
    | 'created_at'
    | 'client_reference'
    | 'subject'
  >;
  /** Hash of the payload the retry would send (must equal operation.payload_hash, else never retry). */
  retryPayloadHash: string;
  /** Observations recorded before this one, oldest first. */
  history: Pick<Observation, 'observed_at' | 'result'>[];
  /** The lookup just made (not yet in history). */
  lookup: LookupResult;
  capabilities: ProviderCapabilities;
  now: Date;
  /**
   * When the latest attempt started. A not_found observed before it says nothing about that
   * attempt, whose request may still be being indexed, so the streak only counts later ones.
   * Default: `operation.first_attempt_at` (pass it whenever attempt_count > 1).
   */
  lastAttemptAt?: Date | null;
  /**
   * The transactions already linked to the operation (a webhook may have linked one the lookup
   * does not show yet). A live match with another live one linked is a duplicate, never confirmed.
   */
  linked?: { provider_id: string; state: string }[];
  /**
   * The provider's clock: the `Date` of the lookup response (LookupResult.provider_date), when it
   * sent one. On the way to a retry the key's age is counted on the later of the two clocks.
   */
  providerNow?: Date | null;
}

/** Part of `keyRetention` kept in reserve, and how far the two clocks may disagree: 10% (2.4 h of Stripe's 24 h). */
const KEY_RETENTION_MARGIN = 0.1;

/** The stable rule names recorded in the audit trail. */
export const RULES = {
  stale: 'escalate.stale',
  unavailable: 'provider.unavailable',
  inconsistent: 'lookup.inconsistent',
  duplicate: 'found.duplicate',
  mismatch: 'found.mismatch',
  confirmed: 'found.confirmed',
  pending: 'found.pending',
  failed: 'found.failed',
  ambiguous: 'found.ambiguous',
  window: 'not_found.window',
  pendingNotFound: 'not_found.pending',
  maxAttempts: 'not_found.max_attempts',
  payloadChanged: 'not_found.payload_changed',
  keyRetention: 'not_found.key_retention',
  retry: 'not_found.retry',
  notReconcilable: 'state.not_reconcilable',
} as const;

export function decide(input: RuleInput): Decision {
  const { operation: op, lookup, capabilities: caps, now } = input;
  if (!isDecidable(op.state)) {
    throw new RefusedError(
      `operation ${op.id} is ${op.state}; only ${RECONCILABLE_STATES.filter(isDecidable).join(' and ')} operations are reconciled`,
      RULES.notReconcilable,
    );
  }
  const age = now.getTime() - (op.first_attempt_at ?? op.created_at).getTime();
  const stale = age >= caps.escalateAfterMs;
  const staleDecision = (link?: ProviderTxn[]): Decision =>
    review(
      RULES.stale,
      'stale',
      `unresolved for ${formatDuration(age)} (escalate after ${formatDuration(caps.escalateAfterMs)}): needs review`,
      link,
    );

  if (lookup.result === 'unavailable') {
    if (stale) return staleDecision();
    const why = lookup.error ? ` (${lookup.error})` : '';
    return stay('unavailable', RULES.unavailable, op.state, `provider unavailable${why}: staying ${op.state}`);
  }
  // A lookup whose label contradicts its content (an adapter bug) is trusted for neither: a
  // not_found must never confirm or fail, and a found without a transaction must never retry.
  const saysFound = lookup.result === 'found' || lookup.result === 'pending';
  const empty = lookup.matches.length === 0 && lookup.candidates.length === 0;
  const contradictory = (lookup.result === 'not_found' && lookup.matches.length > 0) || (saysFound && empty);
  if (contradictory) {
    if (stale) return staleDecision();
    return stay(
      'unavailable',
      RULES.inconsistent,
      op.state,
      `lookup said ${lookup.result} with ${lookup.matches.length} matching transactions: staying ${op.state}`,
    );
  }

  // Which review reason wins, and what a clean set settles: classifyFound, the one answer for a
  // lookup, a submit response and a webhook alike.
  const found = classifyFound(op, lookup.matches, input.linked ?? []);
  if (found) {
    const { txn } = found;
    if (found.review_reason === 'duplicate') {
      const carry =
        found.liveFound.length > 1
          ? `${found.liveFound.length} provider transactions carry this operation (${ids(found.liveFound)})`
          : `${txn.provider_id} carries this operation, and ${found.linkedLive.join(', ')} is linked to it already`;
      const disagrees = found.problems.length ? `; ${txn.provider_id} disagrees on ${found.problems.join(', ')}` : '';
      return review(RULES.duplicate, 'duplicate', `${carry}${disagrees}: needs review`, found.link);
    }
    if (found.review_reason === 'mismatch') {
      return review(
        RULES.mismatch,
        'mismatch',
        `${txn.provider_id} disagrees on ${found.problems.join(', ')}: needs review`,
        found.link,
      );
    }
    const seen = `found ${txn.provider_id} (${txn.status})`;
    if (found.state === 'confirmed')
      return resolved('confirm', RULES.confirmed, 'confirmed', found.link, `${seen}: confirmed`);
    if (found.state === 'failed')
      return resolved('fail', RULES.failed, 'failed', found.link, `${seen}: failed at the provider`);
    // Anything not exactly confirmed/failed is treated as not final, so an odd adapter state never confirms.
    if (stale) return staleDecision(found.link);
    return resolved('pending', RULES.pending, 'pending', found.link, `${seen}: pending at the provider`);
  }

  if (stale) return staleDecision();
  if (lookup.candidates.length > 0 || lookup.result === 'ambiguous') {
    const which = lookup.candidates.length > 0 ? ` (${ids(lookup.candidates)})` : '';
    return review(
      RULES.ambiguous,
      'ambiguous',
      `no transaction carries this operation, but ${lookup.candidates.length} look alike${which}: needs review`,
    );
  }
  return decideNotFound(input);
}

function decideNotFound(input: RuleInput): Decision {
  const { operation: op, capabilities: caps, now } = input;
  const start = streakStart(input);
  const notFoundFor = now.getTime() - start.getTime();
  const lasted = `not found for ${formatDuration(notFoundFor)}${input.lookup.reason ? ` (${input.lookup.reason})` : ''}`;
  const window = `window ${formatDuration(caps.uncertaintyWindowMs)}`;
  if (!(notFoundFor >= caps.uncertaintyWindowMs)) {
    // The window counts from the first not_found of the current streak, not from the attempt: a
    // lookup made long after the attempt still waits a whole window (delayed indexing).
    const retryAt = new Date(start.getTime() + caps.uncertaintyWindowMs);
    return { ...stay('wait', RULES.window, op.state, `${lasted}, ${window}: waiting`), retry_at: retryAt };
  }
  // The provider once reported this operation pending; its vanishing is a contradiction a retry
  // cannot settle (it might create a second one once the key has expired), so a human looks.
  if (op.state === 'pending') {
    const explanation = `${lasted} after the provider reported it pending: needs review`;
    return review(RULES.pendingNotFound, 'pending_not_found', explanation);
  }
  if (!(op.attempt_count < caps.maxAttempts)) {
    return review(
      RULES.maxAttempts,
      'max_attempts',
      `${lasted} after ${op.attempt_count} of ${caps.maxAttempts} attempts: needs review`,
    );
  }
  if (input.retryPayloadHash !== op.payload_hash) {
    return review(
      RULES.payloadChanged,
      'payload_changed',
      `${lasted}, but the payload to retry differs from the recorded one: needs review`,
    );
  }
  // The key's age on the later of recon's clock and the provider's (the Date of the lookup that
  // authorises this retry): a provider whose clock runs ahead forgets the key sooner than ours says.
  const margin = caps.keyRetentionMs * KEY_RETENTION_MARGIN;
  const theirs = input.providerNow ?? null;
  if (op.first_attempt_at && theirs !== null && !(Math.abs(theirs.getTime() - now.getTime()) <= margin)) {
    const explanation =
      `${lasted}, but the provider's clock (${theirs.toISOString()}) and recon's (${now.toISOString()}) ` +
      `disagree by more than ${formatDuration(margin)}: whether the provider still holds the key is unknown: needs review`;
    return review(RULES.keyRetention, 'key_retention', explanation);
  }
  const later = theirs !== null && theirs.getTime() > now.getTime() ? theirs : now;
  // Never attempted → the key was never sent, so it cannot have expired.
  const keyAge = op.first_attempt_at ? later.getTime() - op.first_attempt_at.getTime() : 0;
  if (!caps.lookupAuthoritative && !(keyAge < caps.keyRetentionMs - margin)) {
    const key = `the key is ${formatDuration(keyAge)} old (retention ${formatDuration(caps.keyRetentionMs)}, margin ${formatDuration(margin)})`;
    const explanation = `${lasted}, but ${key} and the lookup is not authoritative: needs review`;
    return review(RULES.keyRetention, 'key_retention', explanation);
  }
  return {
    decision: 'retry',
    rule: RULES.retry,
    state: 'submitting',
    explanation: `${lasted}, ${window}: retrying with the original key, attempt ${op.attempt_count + 1} of ${caps.maxAttempts}`,
  };
}

/**
 * Start of the current not_found streak: the oldest of the trailing run of not_found observations
 * made after the latest attempt, or `now` when this lookup starts the streak. Any other result
 * (unavailable included) breaks the run, which only ever makes the wait longer.
 */
function streakStart(input: RuleInput): Date {
  const since = input.lastAttemptAt ?? input.operation.first_attempt_at;
  const relevant = input.history
    .filter((o) => since === null || o.observed_at.getTime() > since.getTime())
    .sort((a, b) => a.observed_at.getTime() - b.observed_at.getTime());
  let start = input.now;
  for (let i = relevant.length - 1; i >= 0; i--) {
    const o = relevant[i];
    if (o.result !== 'not_found') break;
    start = o.observed_at;
  }
  return start;
}

function ids(txns: ProviderTxn[]): string {
  return txns.map((t) => t.provider_id).join(', ');
}

function review(rule: string, reason: string, explanation: string, link?: ProviderTxn[]): Decision {
  const decision: Decision = { decision: 'review', rule, state: 'needs_review', review_reason: reason, explanation };
  if (link) decision.link = link;
  return decision;
}

function resolved(
  decision: 'confirm' | 'pending' | 'fail',
  rule: string,
  state: 'confirmed' | 'pending' | 'failed',
  link: ProviderTxn[],
  explanation: string,
): Decision {
  return { decision, rule, state, link, explanation };
}

function stay(decision: 'wait' | 'unavailable', rule: string, state: Decision['state'], explanation: string): Decision {
  return { decision, rule, state, explanation };
}
