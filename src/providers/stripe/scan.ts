/**
 * The ledger scan: how `recon run` finds the refunds of a large backlog without one lookup per
 * operation.
 *
 * A lookup lists one payment intent's refunds: one request per operation. After an outage the
 * backlog is thousands of operations whose refunds mostly exist (the request committed, the answer
 * was lost), and one request each is the whole cost of the pass: minutes at the account's rate
 * limit. The scan instead lists every refund created since the backlog's oldest operation was
 * recorded, 100 per page, and answers from that listing for the operations it finds carrying their
 * own `recon_operation_id`.
 *
 * It only ever answers "found" (or "pending"): a refund that exists is a fact however it was listed.
 * An operation with no refund in the scan still gets its own lookup, fresh and authoritative, because
 * "nothing found" is what a retry is authorised on (SPEC §1.4). And it answers only where it is
 * complete and fresh:
 * - covered: every refund created since the operation was recorded (minus `SKEW_S` for the two
 *   clocks; a provider whose `Date` is more than half of that off ours gets no scan) has been
 *   listed; pages are listed newest first, so the scan covers a growing span back from now, at most
 *   `backlog / 4` pages in all, where the backlog is what the pass may decide (a scan of a ledger
 *   far larger than the backlog costs at most a quarter more requests, then stops);
 * - fresh: before each batch the refunds created since the last listing are listed
 *   (`ending_before` the newest seen: usually one request), so a duplicate created before the batch
 *   was claimed is seen as a lookup would see it; a scan older than `MAX_AGE_MS` is started again,
 *   and no answer is given from a scan older than that. What such a scan can miss, and an
 *   operation's own lookup would see: a status change of a refund listed earlier (pending →
 *   succeeded), and a refund indexed late (committed before the newest one listed, visible to lists
 *   only after it was: `ending_before` never lists it). So an answer is as old as `MAX_AGE_MS` at
 *   most for those, and as fresh as its batch for refunds created since: a duplicate indexed late is
 *   found by the next scan, as a lookup made before it was indexed finds it only at the next pass.
 *
 * Only refunds carrying recon metadata are kept (memory is bounded by recon's own refunds in the
 * window). Look-alikes without metadata are listed by an operation's own lookup only: an answer from
 * the scan has no candidates, which changes nothing decided (a match decides; candidates are shown).
 */
import { performance } from 'node:perf_hooks';
import type Stripe from 'stripe';
import type { LookupQuery, LookupResult, ProviderTxn } from '../../types.js';
import { idOf, refundToTxn } from './classify.js';
import type { StripeClient } from './client.js';
import { refundPage, resultOf, type LookupPlan } from './ledger.js';

/** Seconds a refund's `created` (Stripe's clock) may precede its operation's `created_at` (ours). */
const SKEW_S = 300;
/** Fewer operations than this in a batch: their own lookups cost less than any scan. */
export const MIN_OPS = 16;
/** A scan is started again after this long: status changes of refunds already listed are not followed. */
export const MAX_AGE_MS = 30_000;
/**
 * Pages listed before one batch is looked up: the batch is claimed under its lease meanwhile (2
 * minutes by default), and 200 pages take 8 s at Stripe's test-mode 25 reads/s. A ledger longer than
 * that is walked on over the next batches, whose operations it covers by then.
 */
const PAGES_PER_BATCH = 200;

interface Scanned {
  txn: ProviderTxn;
  paymentIntent: string | null;
  charge: string | null;
}

interface Scan {
  /** Lists `created >= since` (Stripe seconds). */
  since: number;
  startedAt: number;
  /** When the refunds newer than `head` were last listed. */
  refreshedAt: number;
  /** The newest refund listed: the cursor for the next head refresh. */
  head: string | null;
  /** The oldest refund listed by the walk back: its cursor, and its `created`. */
  tail: string | null;
  tailCreated: number;
  complete: boolean;
  pages: number;
  byOperation: Map<string, Map<string, Scanned>>;
}

export interface LedgerScan {
  /** Lists what a batch of lookups will need; provider trouble is swallowed (the lookups then ask on their own). */
  prepare(queries: LookupQuery[], backlog: number): Promise<void>;
  /** The answer for one lookup, or null when the scan cannot give it (not covered, stale, nothing found). */
  answer(query: LookupQuery, plan: LookupPlan): (LookupResult & { note: string }) | null;
}

/** The seconds back to which an operation's refunds can reach: it was recorded before any was created. */
const reach = (q: LookupQuery) => Math.floor(q.recorded_at!.getTime() / 1000) - SKEW_S;

export function ledgerScan(
  client: StripeClient,
  clock: () => number = () => performance.now(),
  pagesPerBatch = PAGES_PER_BATCH,
): LedgerScan {
  let scan: Scan | null = null;
  /**
   * Pages the walks back may still list, in all (scans started again included): a quarter of the
   * backlog of the first batch prepared, so that scanning costs at most a quarter more requests
   * than looking each operation up, whatever the ledger and however long the pass.
   */
  let budget: number | null = null;
  /** The provider's clock too far off ours for coverage to be judged (walkBack): no scan this pass. */
  let skewed = false;
  // One listing at a time: `recon run` prepares the next batch while the current one is decided.
  let queue: Promise<void> = Promise.resolve();

  /** Whether every refund created since `from` (Stripe seconds) has been listed. */
  const covers = (s: Scan, from: number) => (s.complete ? from >= s.since : from > s.tailCreated);

  const keep = (s: Scan, refunds: Stripe.Refund[]) => {
    for (const refund of refunds) {
      const txn = refundToTxn(refund);
      if (txn.operation_id === null) continue;
      let mine = s.byOperation.get(txn.operation_id);
      if (!mine) s.byOperation.set(txn.operation_id, (mine = new Map<string, Scanned>()));
      mine.set(txn.provider_id, {
        txn,
        paymentIntent: idOf(refund.payment_intent),
        charge: idOf(refund.charge),
      });
    }
  };

  const list = async (params: Stripe.RefundListParams) => {
    const page = await refundPage(client, params);
    if (scan) scan.pages++;
    return page;
  };

  /** One more page back in time. */
  const walkBack = async (s: Scan) => {
    const first = s.pages === 0;
    const page = await list({ created: { gte: s.since }, ...(s.tail ? { starting_after: s.tail } : {}) });
    // Coverage compares the operation's `created_at` (our clock) with refunds' `created` (Stripe's):
    // with the clocks further apart than SKEW_S allows for, it could call covered a span that is
    // not, and miss an older refund of a duplicate. Then no scan this pass: lookups one by one.
    const date = first ? Date.parse(page.lastResponse?.headers?.date ?? '') : NaN;
    if (Number.isFinite(date) && Math.abs(Date.now() - date) > (SKEW_S * 1000) / 2) {
      skewed = true;
      throw new Error(`the provider's clock is ${Math.round((date - Date.now()) / 1000)} s off ours`);
    }
    keep(s, page.data);
    const last = page.data[page.data.length - 1];
    if (s.head === null && page.data[0]) s.head = page.data[0].id;
    if (last) [s.tail, s.tailCreated] = [last.id, last.created];
    if (!page.has_more || !last) s.complete = true;
  };

  /** The refunds created since the newest one listed, newest page last. */
  const refreshHead = async (s: Scan) => {
    const began = clock();
    if (s.head === null) {
      // Nothing listed yet (an empty window): the walk back from now is the refresh.
      s.tail = null;
      s.complete = false;
      s.tailCreated = Infinity;
      await walkBack(s);
    } else {
      for (;;) {
        const page = await list({ ending_before: s.head });
        keep(s, page.data);
        if (!page.data[0]) break;
        s.head = page.data[0].id;
        if (!page.has_more) break;
      }
    }
    s.refreshedAt = began;
  };

  const prepareNow = async (queries: LookupQuery[], backlog: number) => {
    if (skewed) return;
    const eligible = queries.filter((q) => q.operation_id && q.recorded_at);
    const now = clock();
    if (eligible.length < MIN_OPS) {
      // Too few to start a scan for, but one made for an earlier batch still answers what it covers:
      // fresh as before any batch, or not at all (a duplicate created since that batch was claimed).
      if (scan !== null && now - scan.startedAt > MAX_AGE_MS) scan = null;
      else if (scan !== null) await refreshHead(scan);
      return;
    }
    const since = Math.min(...eligible.map(reach));
    if (scan === null || now - scan.startedAt > MAX_AGE_MS || since < scan.since) {
      scan = {
        since,
        startedAt: now,
        refreshedAt: now,
        head: null,
        tail: null,
        tailCreated: Infinity,
        complete: false,
        pages: 0,
        byOperation: new Map(),
      };
    } else {
      await refreshHead(scan);
    }
    const s = scan;
    budget ??= Math.ceil(Math.max(backlog, eligible.length) / 4);
    for (let pages = 0; !s.complete && budget > 0 && pages < pagesPerBatch; pages++) {
      if (covers(s, since)) break; // `since` is the batch's earliest reach: all of it is covered
      budget--;
      await walkBack(s);
    }
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
      if (!s || !query.operation_id || !query.recorded_at || s.head === null) return null;
      // Older than MAX_AGE_MS since it began: what it listed then may have changed since (a status,
      // a refund indexed late), and the next batch starts it again.
      if (clock() - s.startedAt > MAX_AGE_MS || !covers(s, reach(query))) return null;
      const scope = plan.params;
      const since = typeof scope.created === 'object' ? scope.created.gte : undefined;
      const matches = [...(s.byOperation.get(query.operation_id)?.values() ?? [])]
        .filter(
          (x) =>
            (!scope.payment_intent || x.paymentIntent === scope.payment_intent) &&
            (!scope.charge || x.charge === scope.charge) &&
            (since === undefined || (x.txn.created !== null && x.txn.created.getTime() / 1000 >= since)) &&
            plan.isMatch(x.txn),
        )
        .map((x) => x.txn);
      if (matches.length === 0) return null;
      return {
        result: resultOf(matches, []),
        matches,
        candidates: [],
        note:
          `${plan.note}; answered from recon run's ledger scan (all refunds created since ` +
          `${new Date(s.since * 1000).toISOString()}, ${s.pages} pages, newest listed ` +
          `${Math.max(0, Math.round(clock() - s.refreshedAt))} ms before; look-alikes without recon metadata are listed by recon lookup ID)`,
      };
    },
  };
}
