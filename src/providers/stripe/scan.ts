/**
 * The ledger scan: how `recon run` finds the refunds of a large backlog without one lookup per
 * operation.
 *
 * A lookup lists one payment intent's refunds: one request per operation. After an outage the
 * backlog is thousands of operations whose refunds mostly exist (the request committed, the answer
 * was lost), and one request each is the whole cost of the pass: minutes at the account's rate
 * limit. The scan instead lists the account's refunds newest first, 100 per page, and answers from
 * that listing for the operations it finds carrying their own `recon_operation_id`.
 *
 * It is an optimisation, never a second rule (SPEC §4): every answer it gives is the answer the
 * operation's own lookup would give. So it only ever answers "found" (or "pending"): an operation
 * with no refund in the scan still gets its own lookup, because "nothing found" is what a retry is
 * authorised on (SPEC §1.4). And it answers only where it is complete and fresh:
 * - covered: every refund that could be the operation's has been listed. A refund of a payment
 *   intent cannot be older than the payment intent (the pages expand `data.payment_intent`, whose
 *   `created` is on the same clock as the refunds'); a refund without one has no such bound, and is
 *   covered only by a scan that listed the whole ledger. Not the operation's `created_at`: a
 *   duplicate can predate the record (an earlier run of the same job), and its own lookup lists
 *   the payment intent's refunds of all time. Pages are listed newest first, so the scan covers a
 *   growing span back from now, at most `backlog / 4` pages in all, where the backlog is what the
 *   pass may decide (a scan of a ledger far larger than the backlog costs at most a quarter more
 *   requests, then stops: the operations it does not cover are looked up on their own);
 * - fresh: an answer is given only to an operation announced by a `prepare` (claimed by then) and
 *   from a listing refreshed after it. Each refresh lists again every refund created since
 *   `indexing` before the last refresh began on Stripe's clock (a response's `Date`; or before the
 *   newest one listed, when that is later), as well as the newer ones: a refund committed before a
 *   page was read but visible to lists only after it (indexed late; the rule's own uncertainty
 *   window is how late a lookup may see a write) is in the next answer, as in a lookup made then.
 *   These pages are listed without the payment intents (the refunds in them were mostly listed
 *   before, and keep the bound of that listing; a refund of a payment never seen expanded has none).
 *   A refund listed once is not listed again past that span, so its status changes (pending →
 *   succeeded or failed, succeeded → failed) are followed through Stripe's events: each refresh also
 *   lists the `refund.updated`, `refund.failed` and `charge.refund.updated` events created since the same uncertainty window
 *   before the last such listing began (before the scan's first page, at first), and an operation
 *   with a refund named by one, or named by one's metadata, is no longer answered from the scan: its
 *   own lookup reads the status (status changes are rare; an event's snapshot is not applied, since
 *   its order against a page read in the same second is unknown). A key that may not list events (a
 *   restricted key: 403, or a Stripe-compatible server without them: 404) cannot follow them: its
 *   scan is started again once older than `MAX_AGE_MS`, and no answer is given from it past that age.
 *   No answer is given from a listing brought up to date more than `MAX_AGE_MS` before, and a scan
 *   that follows events is still started again after `MAX_LIFE_MS` (5 minutes): a change whose
 *   event never comes (an account's API version or payment method) is stale for at most that long.
 *   What an answer can miss, and a lookup made at the same moment could not: a refund that became
 *   visible, or changed, between the batch's refresh and its decision (seconds); the next pass sees
 *   it, as the next lookup would.
 *
 * Only refunds carrying recon metadata are kept, and converted (memory is bounded by recon's own
 * refunds in the window; one listed again unchanged is not converted again). Look-alikes without metadata are listed by an operation's own lookup only: an answer from
 * the scan has no candidates, which changes nothing decided (a match decides; candidates are shown).
 * Every answer says it came from the scan (`source: 'ledger_scan'` and its note, recorded with the
 * observation): a person can tell it from a lookup.
 */
import { performance } from 'node:perf_hooks';
import type Stripe from 'stripe';
import type { LookupQuery, LookupResult, ProviderTxn } from '../../types.js';
import { dateOf, idOf, refundToTxn } from './classify.js';
import type { StripeClient } from './client.js';
import { refundPage, type LookupPlan } from './ledger.js';
import { StripeSdk } from './sdk.js';
import { lookupResultOf } from '../../core/found/lookup-result.js';

/**
 * Seconds a refund's `created` (Stripe's clock) may precede its operation's `created_at` (ours): how
 * far back the walk looks for the refunds of operations it has not found yet (only what it walks,
 * never what it answers: coverage is judged on Stripe's clock alone).
 */
const SKEW_S = 300;
/** Fewer operations than this in a batch: their own lookups cost less than any scan. */
export const MIN_OPS = 16;
/**
 * No answer from a listing brought up to date longer ago than this; where events cannot be listed, a
 * scan is started again after this long (status changes of refunds older than the re-listed span
 * are not followed otherwise).
 */
export const MAX_AGE_MS = 30_000;
/**
 * A scan that follows status changes is still started again after this long: a change whose event
 * never came (an account's API version, a payment method that sends none) or came late is stale in
 * its answers for at most this long, as a duplicate a refresh missed is.
 */
export const MAX_LIFE_MS = 5 * 60_000;
/**
 * The status changes of a refund: each one's event makes its operation's own lookup answer
 * (`charge.refund.updated` is what accounts on API versions before refund.updated receive). With
 * `refund.created`, the events whose object is a refund (index.ts, parseWebhook).
 */
export const REFUND_STATUS_EVENTS = ['refund.updated', 'refund.failed', 'charge.refund.updated'];
/**
 * Pages listed before one batch is looked up, when the rate limit and lease are not known: 200 pages
 * take 8 s at Stripe's test-mode 25 reads/s. A ledger longer than that is walked on over the next
 * batches, whose operations it covers by then.
 */
const PAGES_PER_BATCH = 200;

/**
 * Pages listed before one batch is looked up, for a provider's rate limit and lease: the batch is
 * claimed under its lease meanwhile, and `recon run` sizes its batches so that this one and the next,
 * looked up one by one at the rate limit, take at most half the lease (run.ts batchSize); the walk
 * may take a quarter (25/s and 2 minutes: 750 pages, 30 s), so that a ledger of that length is
 * listed for the first batch rather than over several, whose first ones it would not cover yet.
 */
export function pagesPerBatchFor(c: { rateLimit: number; leaseMs: number }): number {
  return Math.max(1, Math.floor((c.rateLimit * c.leaseMs) / 1000 / 4));
}
/** Each refund with its payment intent as an object: its `created` is where the refunds of it can begin. */
const EXPAND = ['data.payment_intent'];

interface Scanned {
  txn: ProviderTxn;
  paymentIntent: string | null;
  charge: string | null;
  /** The payment intent's `created` (Stripe seconds): no refund of it is older. null: no payment intent, no bound. */
  paidAt: number | null;
}

interface Scan {
  startedAt: number;
  /** When the listing was last brought up to date (the start of that refresh). */
  refreshedAt: number;
  /** The newest refund listed, and its `created`. */
  head: string | null;
  headCreated: number;
  /**
   * Stripe's clock (seconds) no later than the first page of the last refresh (or of the walk, before
   * any refresh) was read: the `Date` of a response received before that page was asked for. null:
   * none was (the first scan's walk).
   */
  listedSince: number | null;
  /** The oldest refund listed by the walk back: its cursor, and its `created`. */
  tail: string | null;
  tailCreated: number;
  /** The walk reached the oldest refund of the account. */
  complete: boolean;
  pages: number;
  byOperation: Map<string, Map<string, Scanned>>;
  /** Each payment intent's `created` (Stripe seconds), from the pages that expanded it. */
  paidAt: Map<string, number>;
  /** Operations announced by a `prepare` and listed for since: the only ones answered. */
  announced: Set<string>;
  /**
   * Stripe's clock (seconds) from which events are still to be listed: none created before it can
   * be missing from the listings made so far. null: nothing received yet (set by the first page).
   */
  eventsFrom: number | null;
  /** Event pages listed. */
  eventPages: number;
  /** Refunds, and operations (from a refund's metadata), named by a status change event since the scan began. */
  changed: Set<string>;
  changedOperations: Set<string>;
}

export interface LedgerScan {
  /** Lists what a batch of lookups will need; provider trouble is swallowed (the lookups then ask on their own). */
  prepare(queries: LookupQuery[], backlog: number): Promise<void>;
  /** The answer for one lookup, or null when the scan cannot give it (not covered, stale, nothing found). */
  answer(query: LookupQuery, plan: LookupPlan): (LookupResult & { note: string }) | null;
}

/** How far back (Stripe seconds) the walk looks for an operation whose refunds it has not listed yet. */
const recordedReach = (q: LookupQuery) => Math.floor(q.recorded_at!.getTime() / 1000) - SKEW_S;

export interface LedgerScanOptions {
  /** Milliseconds, monotonic (tests move it). */
  clock?: () => number;
  /** Pages the walk back may list before one batch. */
  pagesPerBatch?: number;
  /**
   * How long a committed refund (or event) may stay invisible to lists: the provider's uncertainty
   * window; each refresh lists that span again. Default 10 minutes.
   */
  indexingMs?: number;
}

export function ledgerScan(client: StripeClient, opts: LedgerScanOptions = {}): LedgerScan {
  const clock = opts.clock ?? (() => performance.now());
  const pagesPerBatch = opts.pagesPerBatch ?? PAGES_PER_BATCH;
  const indexingS = Math.ceil((opts.indexingMs ?? 10 * 60_000) / 1000);
  /**
   * Status changes are followed through events; false once the key was refused them (403) or the
   * server has none (404): not asked again, and a scan is started again at `MAX_AGE_MS`.
   */
  let followsEvents = true;
  /** Begun too long ago to answer from, or to bring up to date: the next batch starts a new one. */
  const outlived = (s: Scan, now: number) => now - s.startedAt > (followsEvents ? MAX_LIFE_MS : MAX_AGE_MS);
  let scan: Scan | null = null;
  /**
   * Pages the walks back may still list, in all (scans started again included): a quarter of the
   * backlog of the first batch prepared, so that scanning costs at most a quarter more requests
   * than looking each operation up, whatever the ledger and however long the pass.
   */
  let budget: number | null = null;
  // One listing at a time: `recon run` prepares the next batch while the current one is decided.
  let queue: Promise<void> = Promise.resolve();

  /** Whether every refund created since `from` (Stripe seconds; -Infinity: of all time) has been listed. */
  const covers = (s: Scan, from: number) => s.complete || from > s.tailCreated;

  /** Where the refunds an answer would be given from can begin: the oldest payment of them, or no bound. */
  const reachOf = (found: Iterable<Scanned>) => {
    let from = Infinity;
    for (const x of found) from = Math.min(from, x.paidAt ?? -Infinity);
    return from;
  };

  const keep = (s: Scan, refunds: Stripe.Refund[]) => {
    for (const refund of refunds) {
      // Only recon's own refunds are kept: the others are not converted at all.
      const metadata = refund.metadata;
      const operationId = metadata?.['recon_operation_id'] ?? null;
      if (operationId === null) continue;
      const pi = refund.payment_intent;
      // An expanded payment intent: its `created` bounds its refunds, listed again later without it.
      if (typeof pi === 'object' && pi !== null && typeof pi.created === 'number') s.paidAt.set(pi.id, pi.created);
      let mine = s.byOperation.get(operationId);
      if (!mine) s.byOperation.set(operationId, (mine = new Map<string, Scanned>()));
      const known = mine.get(refund.id);
      // Listed again unchanged (the window's pages list the same refunds at every refresh): kept as it is.
      if (
        known &&
        known.txn.status === refund.status &&
        known.txn.client_reference === (metadata?.['recon_client_reference'] ?? null) &&
        known.paidAt !== null
      )
        continue;
      const txn = refundToTxn(refund);
      const paymentIntent = idOf(pi);
      mine.set(txn.provider_id, {
        txn,
        paymentIntent,
        charge: idOf(refund.charge),
        // Not expanded (the window listed again) and its payment never seen expanded: no bound.
        paidAt: paymentIntent === null ? null : (s.paidAt.get(paymentIntent) ?? null),
      });
    }
  };

  /** The newest `Date` of a page's response (Stripe's clock, seconds), null before the first. */
  let lastDate: number | null = null;
  /** A response's `Date` in Stripe seconds (null: none), kept in `lastDate` when it is the newest. */
  const noteDate = (headers: Record<string, unknown> | undefined) => {
    const date = dateOf(headers);
    const dateS = date ? Math.floor(date.getTime() / 1000) : null;
    if (dateS !== null) lastDate = Math.max(lastDate ?? -Infinity, dateS);
    return dateS;
  };
  /**
   * A page, and Stripe's clock (seconds) no later than it was read: it was read after the request
   * was sent and before its answer's `Date` (truncated to the second), so no earlier than that
   * `Date` less the time the request took here. null: no `Date`.
   */
  const list = async (params: Stripe.RefundListParams, expand = true) => {
    const sent = performance.now();
    const page = await refundPage(client, expand ? { ...params, expand: EXPAND } : params);
    const tookS = Math.ceil((performance.now() - sent) / 1000);
    if (scan) scan.pages++;
    const dateS = noteDate(page.lastResponse?.headers);
    return { page, readFrom: dateS === null ? null : dateS - tookS };
  };

  const newHead = (s: Scan, refund: Stripe.Refund | undefined) => {
    if (refund && (s.head === null || refund.created >= s.headCreated))
      [s.head, s.headCreated] = [refund.id, refund.created];
  };

  /** One more page back in time; its refunds. */
  const walkBack = async (s: Scan): Promise<Stripe.Refund[]> => {
    const { page, readFrom } = await list(s.tail ? { starting_after: s.tail } : {});
    // The first page of a scan begun before any answer was received: when it was read bounds both
    // what the next refresh lists again and the events it lists.
    if (s.listedSince === null) s.listedSince = readFrom;
    if (s.eventsFrom === null && readFrom !== null) s.eventsFrom = readFrom - indexingS;
    keep(s, page.data);
    if (s.tail === null) newHead(s, page.data[0]);
    const last = page.data[page.data.length - 1];
    if (last) [s.tail, s.tailCreated] = [last.id, last.created];
    if (!page.has_more || !last) s.complete = true;
    return page.data;
  };

  /**
   * The refunds created since `indexingS` before the last refresh (or before the newest one listed,
   * whichever is later), newer ones included: those created since, and those committed before a page
   * was read that lists could not see yet. A refund the last refresh did not list was not visible when
   * its first page was read (at Stripe's `listedSince` or later), so it was created at most
   * `indexingS` before that; and no later than the newest refund listed then, which was visible. Either
   * bound alone is enough; the later one lists less: when the window's refunds were created long
   * before the pass, a refresh no longer lists all of them again.
   */
  const refresh = async (s: Scan): Promise<boolean> => {
    const began = clock();
    // Received before this refresh asks for its first page: no later than that page is read.
    const mark = lastDate;
    // The events first: a scan that cannot follow them, and is too old to answer without, is not
    // brought up to date (the next one starts again).
    if (followsEvents) await followEvents(s);
    if (!followsEvents && began - s.startedAt > MAX_AGE_MS) return false;
    if (s.head === null) {
      // Nothing listed yet (an empty ledger): the walk back from now is the refresh.
      s.tail = null;
      s.complete = false;
      s.tailCreated = Infinity;
      await walkBack(s);
    } else {
      const created = { gte: Math.max(s.headCreated, s.listedSince ?? -Infinity) - indexingS };
      let after: string | undefined;
      for (;;) {
        // Without the payment intents (a third of a page's bytes): the refunds listed again keep the
        // bound of their first listing, and a new refund of a payment never seen expanded has none
        // (answered only by a scan of the whole ledger, else by its own lookup).
        const { page } = await list({ created, ...(after ? { starting_after: after } : {}) }, false);
        keep(s, page.data);
        if (after === undefined) newHead(s, page.data[0]);
        const last = page.data[page.data.length - 1];
        if (!page.has_more || !last) break;
        after = last.id;
      }
    }
    s.refreshedAt = began;
    s.listedSince = mark;
    return true;
  };

  /**
   * The status change events created since `eventsFrom`: each names a refund (and, in its metadata,
   * an operation) that is no longer answered from the scan. An event not listed now was not visible
   * when this listing's first page was read (at `mark` or later), so it was created at most the
   * uncertainty window before: the next listing begins there.
   */
  const followEvents = async (s: Scan) => {
    const mark = lastDate;
    const created = s.eventsFrom === null ? undefined : { gte: s.eventsFrom };
    let after: string | undefined;
    for (;;) {
      let page: Stripe.Response<Stripe.ApiList<Stripe.Event>>;
      try {
        page = await client.call(
          () =>
            client.stripe.events.list({
              types: REFUND_STATUS_EVENTS,
              limit: 100,
              ...(created ? { created } : {}),
              ...(after ? { starting_after: after } : {}),
            }),
          'read',
        );
      } catch (err) {
        if (!cannotListEvents(err)) throw err;
        // A restricted key, or a server without events: what was listed cannot be followed.
        followsEvents = false;
        return;
      }
      s.eventPages++;
      noteDate(page.lastResponse?.headers);
      for (const event of page.data) {
        const refund = event.data.object as Partial<Stripe.Refund>;
        if (typeof refund.id === 'string') s.changed.add(refund.id);
        const operationId = refund.metadata?.['recon_operation_id'];
        if (typeof operationId === 'string') s.changedOperations.add(operationId);
      }
      const last = page.data[page.data.length - 1];
      if (!page.has_more || !last) break;
      after = last.id;
    }
    if (mark !== null) s.eventsFrom = Math.max(s.eventsFrom ?? -Infinity, mark - indexingS);
  };

  /** How far back an operation of the batch needs the listing: its payments where found, else where it was recorded. */
  const reachFor = (s: Scan, q: LookupQuery) => {
    const found = s.byOperation.get(q.operation_id!);
    return found ? reachOf(found.values()) : recordedReach(q);
  };

  /**
   * How far back the batch needs the listing (the least of its operations' reaches), kept up to date
   * page by page: a page changes the reach of the batch's operations it lists only, so only theirs
   * are worked out again, and the whole batch only when the one furthest back moved forward. (Worked
   * out for the whole batch after each page that listed one of its operations, it was 450,000 reads
   * of the batch's operations for a walk of 150 pages over a batch of 3,000: each page lists some.)
   */
  const batchReach = (s: Scan, queries: LookupQuery[]) => {
    const byOp = new Map<string, { q: LookupQuery; reach: number }>();
    for (const q of queries) byOp.set(q.operation_id!, { q, reach: reachFor(s, q) });
    const least = () => {
      let min = Infinity;
      for (const { reach } of byOp.values()) min = Math.min(min, reach);
      return min;
    };
    let from = least();
    return {
      get from() {
        return from;
      },
      /** After a page: the reaches of the batch's operations it lists. */
      listed(refunds: Stripe.Refund[]) {
        let stale = false;
        for (const r of refunds) {
          const mine = byOp.get(r.metadata?.['recon_operation_id'] ?? '');
          if (!mine) continue;
          const [before, reach] = [mine.reach, reachFor(s, mine.q)];
          mine.reach = reach;
          // As Math.min over the batch would have it, NaN (an unreadable time) included.
          if (Number.isNaN(reach) || reach < from) from = Math.min(from, reach);
          else if ((before === from && reach > before) || Number.isNaN(from)) stale = true;
        }
        if (stale) from = least();
      },
    };
  };

  const prepareNow = async (queries: LookupQuery[], backlog: number) => {
    const eligible = queries.filter((q) => q.operation_id && q.recorded_at);
    const now = clock();
    if (scan !== null && outlived(scan, now)) scan = null;
    // One made for an earlier batch answers these operations too, once brought up to date.
    if (scan !== null && !(await refresh(scan))) scan = null;
    if (eligible.length < MIN_OPS) {
      // Too few to start a scan for: answered from the earlier one only, for what it covers.
      if (scan !== null) for (const q of eligible) scan.announced.add(q.operation_id!);
      return;
    }
    if (scan === null) {
      scan = {
        startedAt: now,
        refreshedAt: now,
        head: null,
        headCreated: -Infinity,
        // The walk's first page is asked for after this response was received: its read is no earlier.
        listedSince: lastDate,
        tail: null,
        tailCreated: Infinity,
        complete: false,
        pages: 0,
        byOperation: new Map(),
        paidAt: new Map(),
        announced: new Set(),
        // Events created before the walk's first page changed what it lists; those within the
        // uncertainty window before it may not show in it yet.
        eventsFrom: lastDate === null ? null : lastDate - indexingS,
        eventPages: 0,
        changed: new Set(),
        changedOperations: new Set(),
      };
    }
    const s = scan;
    budget ??= Math.ceil(Math.max(backlog, eligible.length) / 4);
    // A scan that cannot follow status changes answers for MAX_AGE_MS from its start only: its walk is
    // kept to what it was before a batch could list a quarter of the lease.
    const perBatch = followsEvents ? pagesPerBatch : Math.min(pagesPerBatch, PAGES_PER_BATCH);
    const reach = batchReach(s, eligible);
    for (let pages = 0; !s.complete && budget > 0 && pages < perBatch; pages++) {
      if (s.tail !== null && covers(s, reach.from)) break;
      budget--;
      reach.listed(await walkBack(s));
    }
    // A long walk (up to a quarter of the lease): brought up to date again, so that the batch is not
    // answered from a listing as old as the walk's first page.
    if (followsEvents && clock() - s.refreshedAt > MAX_AGE_MS / 2 && !(await refresh(s))) {
      scan = null;
      return;
    }
    for (const q of eligible) s.announced.add(q.operation_id!);
  };

  return {
    async prepare(queries, backlog) {
      const run = queue.then(() => prepareNow(queries, backlog));
      queue = run.catch(() => {
        // The provider failed mid-scan: forget it (each lookup asks on its own, and reports the trouble).
        scan = null;
      });
      await queue;
    },

    answer(query, plan) {
      const s = scan;
      if (!s || !query.operation_id || s.head === null || !s.announced.has(query.operation_id)) return null;
      const now = clock();
      // Not brought up to date for MAX_AGE_MS, or outlived (the next batch starts it again).
      if (now - s.refreshedAt > MAX_AGE_MS || outlived(s, now)) return null;
      // A status changed since the scan began: the operation's own lookup reads it.
      const mine = [...(s.byOperation.get(query.operation_id)?.values() ?? [])];
      if (s.changedOperations.has(query.operation_id) || mine.some((x) => s.changed.has(x.txn.provider_id)))
        return null;
      const scope = plan.params;
      const since = typeof scope.created === 'object' ? scope.created.gte : undefined;
      const found = mine.filter(
        (x) =>
          (!scope.payment_intent || x.paymentIntent === scope.payment_intent) &&
          (!scope.charge || x.charge === scope.charge) &&
          (since === undefined || (x.txn.created !== null && x.txn.created.getTime() / 1000 >= since)) &&
          plan.isMatch(x.txn),
      );
      // Every refund that could be the operation's must have been listed: back to its payment intent's creation.
      if (found.length === 0 || !covers(s, reachOf(found))) return null;
      const matches = found.map((x) => x.txn);
      return {
        result: lookupResultOf(matches, []),
        matches,
        candidates: [],
        source: 'ledger_scan',
        note:
          `${plan.note}; answered from recon run's ledger scan (${s.complete ? 'every refund of the account' : `every refund created after ${new Date(s.tailCreated * 1000).toISOString()}`}, ` +
          `${s.pages} pages, brought up to date ${Math.max(0, Math.round(now - s.refreshedAt))} ms before` +
          `${followsEvents ? `, status changes followed through ${s.eventPages} pages of events` : ''}; ` +
          `look-alikes without recon metadata are listed by recon lookup ID)`,
      };
    },
  };
}

/** 403 (a restricted key without the events permission) or 404 (a Stripe-compatible server without events). */
function cannotListEvents(err: unknown): boolean {
  return err instanceof StripeSdk.errors.StripeError && (err.statusCode === 403 || err.statusCode === 404);
}
