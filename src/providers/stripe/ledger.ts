/**
 * Reading Stripe's refund ledger: lookup (SPEC §4 step 1) and the page-by-page listing audits use.
 *
 * Pages are requested one at a time with `starting_after` rather than through stripe-node's
 * auto-pager: the auto-pager fetches the next page itself, past our token bucket and 429 handling,
 * and an audit over a large ledger is exactly where throttling happens. Nothing is collected into
 * memory beyond the current page (autoPagingToArray is capped at 10,000 items anyway).
 */
import type Stripe from 'stripe';
import type { ListRange, LookupQuery, LookupResult, ProviderTxn } from '../../types.js';
import { formatDuration } from '../../lib/durations.js';
import { lookupResultOf, unavailableLookup } from '../../core/found/lookup-result.js';
import { ProviderUnavailableError } from '../../errors.js';
import { dateOf, describeError, missingParent, refundToTxn, refusedKey } from './classify.js';
import { isRateLimited, retryAfterOf, type StripeClient } from './client.js';

const PAGE_SIZE = 100;

/** One page of refunds, as many as Stripe gives at once, under the rate limit (ledger.ts's listings, scan.ts). */
export function refundPage(client: StripeClient, params: Stripe.RefundListParams) {
  return client.call(() => client.stripe.refunds.list({ ...params, limit: PAGE_SIZE }), 'read');
}

/** Each page's refunds, and the `Date` header of its response (the provider's clock), when sent. */
async function* refundPages(
  client: StripeClient,
  params: Stripe.RefundListParams,
): AsyncGenerator<{ refunds: Stripe.Refund[]; date: Date | null }> {
  let startingAfter: string | undefined;
  for (;;) {
    const page = await refundPage(client, { ...params, ...(startingAfter ? { starting_after: startingAfter } : {}) });
    yield { refunds: page.data, date: dateOf(page.lastResponse?.headers) };
    const last = page.data[page.data.length - 1];
    if (!page.has_more || !last) return;
    startingAfter = last.id;
  }
}

export async function* listRefunds(client: StripeClient, range: ListRange): AsyncGenerator<ProviderTxn> {
  const created: Stripe.RangeQueryParam = {};
  if (range.since) created.gte = Math.floor(range.since.getTime() / 1000);
  if (range.until) created.lte = Math.floor(range.until.getTime() / 1000);
  let page = 0;
  const pages = refundPages(client, Object.keys(created).length > 0 ? { created } : {});
  for (;;) {
    let next: IteratorResult<{ refunds: Stripe.Refund[] }>;
    try {
      next = await pages.next();
    } catch (err) {
      // As for lookup and get: a provider that errors is unavailable (exit 5), not an unexpected failure.
      throw new ProviderUnavailableError(`cannot list refunds (page ${page + 1}): ${describeError(err)}`, {
        cause: err,
      });
    }
    if (next.done) return;
    range.onPage?.({ page: ++page, items: next.value.refunds.length });
    for (const refund of next.value.refunds) yield refundToTxn(refund);
  }
}

export interface LookupPlan {
  params: Stripe.RefundListParams;
  isMatch: (txn: ProviderTxn) => boolean;
  /** Same charge, same amount, no recon metadata: shown to a human, never linked. */
  isCandidate: (txn: ProviderTxn) => boolean;
  note: string;
}

/**
 * Stripe cannot search refunds by idempotency key, nor search refunds at all: recon finds its own
 * refunds by the `recon_operation_id` / `recon_client_reference` metadata it writes on submit,
 * listing by the payload's payment intent or charge when it has one (complete, hence
 * authoritative), else the refunds created since `query.since` (default: the key retention window,
 * since a key older than that cannot deduplicate a retry anyway).
 */
export function planLookup(query: LookupQuery, keyRetentionMs: number, now: Date): LookupPlan {
  const payload = query.payload ?? {};
  const paymentIntent = typeof payload['payment_intent'] === 'string' ? payload['payment_intent'] : undefined;
  const charge = typeof payload['charge'] === 'string' ? payload['charge'] : undefined;
  const params: Stripe.RefundListParams = {};
  let scope: string;
  if (paymentIntent) [params.payment_intent, scope] = [paymentIntent, `refunds of payment intent ${paymentIntent}`];
  else if (charge) [params.charge, scope] = [charge, `refunds of charge ${charge}`];
  if (query.since || (!paymentIntent && !charge)) {
    const since = query.since ?? new Date(now.getTime() - keyRetentionMs);
    params.created = { gte: Math.floor(since.getTime() / 1000) };
    scope = `${paymentIntent || charge ? `${scope!}, ` : 'refunds '}created since ${since.toISOString()}${query.since ? '' : ` (key retention ${formatDuration(keyRetentionMs)})`}`;
  }

  let isMatch: (txn: ProviderTxn) => boolean;
  let how: string;
  if (query.operation_id) {
    const id = query.operation_id;
    [isMatch, how] = [(t) => t.operation_id === id, `metadata.recon_operation_id = ${id}`];
  } else if (query.idempotency_key) {
    const key = query.idempotency_key;
    isMatch = (t) => t.operation_id === key;
    how = `metadata.recon_operation_id = ${key} (Stripe cannot search by idempotency key; recon's key defaults to the operation id)`;
  } else if (query.client_reference) {
    const ref = query.client_reference;
    [isMatch, how] = [(t) => t.client_reference === ref, `metadata.recon_client_reference = ${ref}`];
  } else {
    [isMatch, how] = [() => false, 'nothing (no operation id, key or client reference given)'];
  }

  const amount = typeof payload['amount'] === 'number' ? payload['amount'] : undefined;
  const currency = typeof payload['currency'] === 'string' ? payload['currency'].toLowerCase() : undefined;
  const isCandidate = (t: ProviderTxn) =>
    amount !== undefined &&
    (paymentIntent !== undefined || charge !== undefined) &&
    t.operation_id === null &&
    t.amount === amount &&
    (currency === undefined || t.currency === currency);

  return { params, isMatch, isCandidate, note: `listed ${scope!}; matched ${how}` };
}

/** Provider trouble never throws here: it is an observation (`unavailable`) the rule backs off on. */
export async function lookupRefunds(
  client: StripeClient,
  plan: LookupPlan,
  provider = 'stripe',
): Promise<LookupResult & { note: string }> {
  const matches: ProviderTxn[] = [];
  const candidates: ProviderTxn[] = [];
  let providerDate: Date | null = null;
  try {
    for await (const { refunds, date } of refundPages(client, plan.params)) {
      providerDate = date ?? providerDate;
      for (const refund of refunds) {
        const txn = refundToTxn(refund);
        if (plan.isMatch(txn)) matches.push(txn);
        else if (plan.isCandidate(txn)) candidates.push(txn);
      }
    }
  } catch (err) {
    // A refused key is a configuration error (exit 2): thrown, never an observation to back off on.
    const refused = refusedKey(err, provider);
    if (refused) throw refused;
    const missing = missingParent(err);
    if (missing) {
      const id = String(plan.params[missing as 'payment_intent' | 'charge']);
      const date = dateOf((err as { headers?: Record<string, unknown> }).headers);
      return {
        result: 'not_found',
        matches: [],
        candidates: [],
        reason: `the ${missing === 'payment_intent' ? 'payment intent' : 'charge'} ${id} does not exist in this account (404 resource_missing): nothing can exist for it`,
        ...(date ? { provider_date: date } : {}),
        note: plan.note,
      };
    }
    const retryAfter = isRateLimited(err) ? retryAfterOf(err) : 0;
    return { ...unavailableLookup(describeError(err), { retry_after_ms: retryAfter }), note: plan.note };
  }
  return {
    result: lookupResultOf(matches, candidates),
    matches,
    candidates,
    ...(providerDate ? { provider_date: providerDate } : {}),
    note: plan.note,
  };
}
