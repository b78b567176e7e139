/**
 * The ledger scan (providers/stripe/scan.ts) against ledgers that try to make it hide a duplicate:
 * whatever `recon run` asks, an answer from the scan must hold every refund an operation's own
 * lookup finds at that moment (two or more are a duplicate, `needs_review`), or there must be no
 * answer and the operation is looked up on its own. The real stripe-node SDK against the Stripe
 * sandbox; the sandbox's ledger is what counts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedConfig, StripeProviderConfig } from '../../src/config/types.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { runPass } from '../../src/core/reconcile/run.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import { createProvider } from '../../src/providers/index.js';
import { createClient } from '../../src/providers/stripe/client.js';
import { planLookup } from '../../src/providers/stripe/ledger.js';
import { ledgerScan, MAX_AGE_MS, MAX_LIFE_MS, MIN_OPS } from '../../src/providers/stripe/scan.js';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import type { Db } from '../../src/store/db.js';
import type { LookupQuery, Provider } from '../../src/types.js';
import { backends, removeTempStores } from '../support/backends.js';
import { sandboxConfig } from '../support/stripe-config.js';

afterAll(() => removeTempStores());

describe('the ledger scan, against hostile ledgers', () => {
  let sandbox: StripeSandbox;
  let loaded: LoadedConfig;
  let config: StripeProviderConfig;
  // The sandbox's clock (object timestamps, `hide`): moved forward by the delayed-indexing case.
  let offsetMs = 0;
  const sandboxNow = () => Date.now() + offsetMs;
  beforeAll(async () => {
    sandbox = await startStripeSandbox({ now: sandboxNow });
    ({ loaded, config } = sandboxConfig(sandbox));
  });
  afterAll(() => sandbox?.close());

  const nowS = () => Math.floor(sandboxNow() / 1000);
  let seq = 0;
  /** `n` operations, each with its payment intent and one refund carrying its id (created `createdS`, default now). */
  function backlog(n: number, o: { recordedAt?: Date; createdS?: number; status?: string } = {}) {
    const tag = `h${++seq}`;
    return Array.from({ length: n }, (_, i): LookupQuery => {
      const id = `op_${tag}_${i}`;
      const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      sandbox.seedRefund({
        payment_intent,
        amount: 700,
        currency: 'usd',
        metadata: { recon_operation_id: id },
        created: o.createdS,
        status: o.status,
      });
      return {
        operation_id: id,
        idempotency_key: id,
        payload: { payment_intent, amount: 700, currency: 'usd' },
        recorded_at: o.recordedAt ?? new Date(sandboxNow()),
      };
    });
  }

  /** A second refund for `q`'s operation: a late original request committed after all. */
  function duplicate(q: LookupQuery, createdS?: number) {
    const { payment_intent } = q.payload as { payment_intent: string };
    return sandbox.seedRefund({
      payment_intent,
      amount: 700,
      currency: 'usd',
      metadata: { recon_operation_id: q.operation_id! },
      created: createdS,
    });
  }

  const ids = (r: { matches: { provider_id: string }[] }) => r.matches.map((t) => t.provider_id).sort();

  it('a batch too small to scan for is not answered from the listing made before the last batch: the duplicate is found', async () => {
    // `recon run`'s last batch is often small (the backlog's remainder): prepareLookups with fewer
    // than MIN_OPS operations. The scan made for the batch before covers them all the same.
    const first = backlog(MIN_OPS);
    const last = backlog(MIN_OPS - 1);
    const stripe = await createProvider('stripe', loaded);
    await stripe.prepareLookups!(first, { backlog: first.length + last.length });
    expect((await stripe.lookup(first[0])).result).toBe('found');

    // While the first batch is decided, a late original request commits a second refund for an
    // operation of the last batch.
    duplicate(last[3]);
    expect(sandbox.refunds({ metadataOperationId: last[3].operation_id! })).toHaveLength(2);

    await stripe.prepareLookups!(last, { backlog: last.length });
    const answer = await stripe.lookup(last[3]);
    const own = await (await createProvider('stripe', loaded)).lookup(last[3]);
    expect(own.matches).toHaveLength(2);
    expect(answer.result).toBe('found');
    expect(ids(answer)).toEqual(ids(own));
  });

  it('an operation whose older refund lies past where the walk back stopped gets its own lookup: both refunds are found', async () => {
    // Recorded 10 minutes ago; its first refund 100 s ago, then 1,000 refunds of others, then a
    // second refund of it now. A batch of MIN_OPS may list MIN_OPS / 4 pages: the newer refund is
    // listed, the older one is not, so the scan does not cover the operation and must not answer.
    // Its payment made an hour before (the payment intent's creation is where its refunds can begin).
    offsetMs -= 3600_000;
    const [q] = backlog(1, { recordedAt: new Date(sandboxNow() + 3000_000), createdS: nowS() + 3500 });
    offsetMs += 3600_000;
    for (let i = 0; i < 1000; i++) {
      const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      sandbox.seedRefund({ payment_intent, amount: 100, currency: 'usd', created: nowS() - 50 });
    }
    const others = backlog(MIN_OPS - 1);
    duplicate(q);
    expect(sandbox.refunds({ metadataOperationId: q.operation_id! })).toHaveLength(2);

    const stripe = await createProvider('stripe', loaded);
    await stripe.prepareLookups!([q, ...others], { backlog: MIN_OPS });
    const answer = await stripe.lookup(q);
    expect(answer.result).toBe('found');
    expect(answer.matches).toHaveLength(2);
  });

  const events = () => sandbox.stats.byRoute['GET /v1/events'] ?? 0;

  /**
   * MIN_OPS operations whose refunds (`status`, made 100 s ago) a scan with an uncertainty window of
   * 1 s has listed (allowed to list the whole ledger of this file); what it answered for operation
   * `i`; then that operation's refund changes to `to`, and the scan's clock moves 1 s on. A refresh
   * does not list those refunds again: only their events say what changed.
   */
  async function listedThenChanged(i: number, status: string, to: string) {
    const queries = backlog(MIN_OPS, { status, createdS: nowS() - 100 });
    const clock = { t: 0 };
    const scan = ledgerScan(createClient(config), { clock: () => clock.t, indexingMs: 1000 });
    await scan.prepare(queries, 100_000);
    const plan = planLookup(queries[i], config.capabilities.keyRetentionMs, new Date());
    const first = scan.answer(queries[i], plan);
    const [refund] = sandbox.refunds({ metadataOperationId: queries[i].operation_id! });
    sandbox.setRefundStatus(refund.id, to);
    clock.t = 1000;
    return { queries, scan, plan, first, clock };
  }

  it("a refund that fails after it was listed: the next batch reads its event, and the operation's own lookup says failed", async () => {
    // Without its status change the scan would confirm an operation whose refund has failed.
    const { queries, scan, plan, first } = await listedThenChanged(0, 'succeeded', 'failed');
    expect(first?.matches.map((m) => m.state)).toEqual(['confirmed']);
    const before = events();
    await scan.prepare(queries, 100_000);
    expect(events() - before).toBe(1);
    // No answer from the scan for it: its own lookup reads the refund as it is now.
    expect(scan.answer(queries[0], plan)).toBeNull();
    const own = await (await createProvider('stripe', loaded)).lookup(queries[0]);
    expect(own.matches.map((m) => m.state)).toEqual(['failed']);
    // The others, unchanged, are still answered from the scan.
    const other = planLookup(queries[1], config.capabilities.keyRetentionMs, new Date());
    expect(scan.answer(queries[1], other)?.matches.map((m) => m.state)).toEqual(['confirmed']);
  });

  it('a pending refund that succeeds, named only by its event: the operation is not answered from the scan', async () => {
    const { queries, scan, plan, first } = await listedThenChanged(5, 'pending', 'succeeded');
    expect(first?.result).toBe('pending');
    await scan.prepare(queries, 100_000);
    expect(scan.answer(queries[5], plan)).toBeNull();
  });

  it(`a walk longer than ${MAX_AGE_MS / 2000} s is brought up to date before its batch is answered`, async () => {
    // The walk may take a quarter of the lease (30 s at 25/s): its first page would be too old to
    // answer from by the time the batch is looked up. Here each request takes a second by the scan's clock.
    for (let i = 0; i < 3500; i++) {
      const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      sandbox.seedRefund({ payment_intent, amount: 100, currency: 'usd', created: nowS() - 200 });
    }
    const queries = backlog(MIN_OPS, { createdS: nowS() - 100 });
    // One operation with no refund, recorded an hour ago: the walk lists the whole ledger for it.
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const lost: LookupQuery = {
      operation_id: 'op_lost',
      idempotency_key: 'op_lost',
      payload: { payment_intent, amount: 700, currency: 'usd' },
      recorded_at: new Date(sandboxNow() - 3600_000),
    };
    const scan = ledgerScan(createClient(config), { clock: () => sandbox.stats.requests * 1000, indexingMs: 1000 });
    const [before, pages] = [events(), sandbox.stats.byRoute['GET /v1/refunds'] ?? 0];
    await scan.prepare([...queries, lost], 100_000);
    expect((sandbox.stats.byRoute['GET /v1/refunds'] ?? 0) - pages).toBeGreaterThan(35);
    expect(events() - before).toBe(1);
    const plan = planLookup(queries[0], config.capabilities.keyRetentionMs, new Date());
    expect(scan.answer(queries[0], plan)?.result).toBe('found');
  });

  it(`outlives ${MAX_AGE_MS / 1000} s when it follows status changes: answers from one walk, a status change ${(5 * MAX_AGE_MS) / 1000} s on included`, async () => {
    const queries = backlog(MIN_OPS);
    let t = 0;
    // An uncertainty window of 1 s: a refresh lists again what was created in the second before the last.
    const scan = ledgerScan(createClient(config), { clock: () => t, indexingMs: 1000 });
    await scan.prepare(queries, 100_000);
    const lists = () => sandbox.stats.byRoute['GET /v1/refunds'] ?? 0;
    const walked = lists();
    // A batch every 20 s for 150 s: each brings the listing up to date (the window's pages and the
    // events), none walks the ledger again.
    for (t = 20_000; t <= 5 * MAX_AGE_MS; t += 20_000) {
      await scan.prepare(queries, 100_000);
      const plan = planLookup(queries[2], config.capabilities.keyRetentionMs, new Date());
      expect(scan.answer(queries[2], plan)?.result).toBe('found');
    }
    const [refund] = sandbox.refunds({ metadataOperationId: queries[2].operation_id! });
    sandbox.setRefundStatus(refund.id, 'failed');
    await scan.prepare(queries, 100_000);
    const plan = planLookup(queries[2], config.capabilities.keyRetentionMs, new Date());
    expect(scan.answer(queries[2], plan)).toBeNull();
    // No answer from a listing not brought up to date for MAX_AGE_MS.
    const p3 = planLookup(queries[3], config.capabilities.keyRetentionMs, new Date());
    expect(scan.answer(queries[3], p3)?.result).toBe('found');
    t += MAX_AGE_MS + 1;
    expect(scan.answer(queries[3], p3)).toBeNull();
    // Past MAX_LIFE_MS from its start the next batch starts it again (for a change whose event never
    // came): the failed refund is listed as it is now, and answered from the new listing.
    t = MAX_LIFE_MS + 1;
    await scan.prepare(queries, 100_000);
    expect(scan.answer(queries[2], plan)?.matches.map((m) => m.state)).toEqual(['failed']);
    expect(scan.answer(queries[3], p3)?.result).toBe('found');
    // Eight refreshes, each the page of the last second's refunds (and the scan was not started again:
    // a new one would have answered the failed refund from its listing, as below).
    expect(lists() - walked).toBeLessThanOrEqual(16);
  });

  it(`with a key that may not list events (403): follows a status change only once the scan is ${MAX_AGE_MS / 1000} s old, as before`, async () => {
    sandbox.forbidden.add('GET /v1/events');
    try {
      const refused = sandbox.stats.status[403] ?? 0;
      const { queries, scan, plan, first, clock } = await listedThenChanged(0, 'pending', 'succeeded');
      expect(first?.result).toBe('pending');
      await scan.prepare(queries, 100_000);
      // Asked once, refused: the listing cannot follow the change (the window's refresh does not list it again).
      expect((sandbox.stats.status[403] ?? 0) - refused).toBe(1);
      expect(scan.answer(queries[0], plan)?.result).toBe('pending');
      // Past MAX_AGE_MS from its start: no answer, and the next batch starts the scan again.
      clock.t = MAX_AGE_MS + 1;
      expect(scan.answer(queries[0], plan)).toBeNull();
      await scan.prepare(queries, 100_000);
      const answer = scan.answer(queries[0], plan);
      expect(answer?.result).toBe('found');
      expect(answer?.matches.map((m) => m.state)).toEqual(['confirmed']);
      // Not asked again.
      expect((sandbox.stats.status[403] ?? 0) - refused).toBe(1);
    } finally {
      sandbox.forbidden.delete('GET /v1/events');
    }
  });

  // A refund committed before the newest one listed but visible to lists only after it (delayed
  // indexing): the next refresh, which lists the uncertainty window again, holds it; a listing not
  // brought up to date for MAX_AGE_MS gives no answer meanwhile.
  it(`a duplicate indexed late is in the answer after the next refresh, as its own lookup finds it; none from a listing ${MAX_AGE_MS / 1000} s old`, async () => {
    const queries = backlog(MIN_OPS);
    let t = 0;
    const scan = ledgerScan(createClient(config), { clock: () => t });
    await scan.prepare(queries, 100_000);
    const q = queries[3];
    const plan = planLookup(q, config.capabilities.keyRetentionMs, new Date());
    const { payment_intent } = q.payload as { payment_intent: string };
    // A second refund for the operation, committed but not yet visible to lists for 2 s...
    sandbox.faults.inject({ kind: 'hide', ms: 2000 });
    await createClient(config).stripe.refunds.create({
      payment_intent,
      amount: 700,
      metadata: { recon_operation_id: q.operation_id! },
    });
    // ... and a refund of someone else's, visible at once, listed by the next batch's refresh.
    const other = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.seedRefund({ payment_intent: other.payment_intent, amount: 100, currency: 'usd' });
    t = 1000;
    await scan.prepare(queries, 100_000);
    // The duplicate is indexed; batches are prepared until the scan is old enough to start again.
    offsetMs += 3000;
    expect(sandbox.refunds({ metadataOperationId: q.operation_id! })).toHaveLength(2);
    const own = await (await createProvider('stripe', loaded)).lookup(q);
    expect(own.matches).toHaveLength(2);
    t = 1000 + MAX_AGE_MS + 1;
    // No answer from a listing brought up to date more than MAX_AGE_MS before, whatever it holds ...
    expect(scan.answer(q, plan)).toBeNull();
    // ... and the next batch's refresh, which lists the uncertainty window again, holds both.
    await scan.prepare(queries, 100_000);
    expect(ids(scan.answer(q, plan)!)).toEqual(ids(own));
  });
  it('a refresh lists again what was created in the uncertainty window before the last one, not a ledger made long before', async () => {
    // The backlog's refunds and 500 of others', made within a second or two, now an hour old by
    // Stripe's clock: an incident's refunds, reconciled later.
    const queries = backlog(MIN_OPS);
    for (let i = 0; i < 500; i++) {
      const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      sandbox.seedRefund({ payment_intent, amount: 100, currency: 'usd' });
    }
    offsetMs += 3600_000;
    try {
      const lists = () => sandbox.stats.byRoute['GET /v1/refunds'] ?? 0;
      // An uncertainty window of 1 s: each refresh lists again what was created in the second before.
      const scan = ledgerScan(createClient(config), { clock: () => 0, pagesPerBatch: 200, indexingMs: 1000 });
      await scan.prepare(queries, 100_000);
      const perRefresh: number[] = [];
      for (let batch = 0; batch < 3; batch++) {
        const before = lists();
        await scan.prepare(queries, 100_000);
        perRefresh.push(lists() - before);
      }
      // The first refresh starts from when the walk's first page was read (its answer's Date less the
      // time the request took), not from the newest refund's time (an hour ago, shared by 500 others,
      // which it listed again before): one page, empty, as the later ones.
      expect(perRefresh).toEqual([1, 1, 1]);
      const plan = planLookup(queries[0], config.capabilities.keyRetentionMs, new Date(sandboxNow()));
      expect(scan.answer(queries[0], plan)?.result).toBe('found');
    } finally {
      offsetMs -= 3600_000;
    }
  });
});

describe("the ledger scan, against a provider whose clock is 10 minutes behind recon's", () => {
  let sandbox: StripeSandbox;
  beforeAll(async () => {
    sandbox = await startStripeSandbox({ now: () => Date.now() - 600_000 });
  });
  afterAll(() => sandbox?.close());

  it("does not scan: an operation's first refund, older than the window by Stripe's clock, is not hidden", async () => {
    const queries = Array.from({ length: MIN_OPS }, (_, i): LookupQuery => {
      const id = `op_skew_${i}`;
      const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      // The first attempt's refund, stamped by Stripe's (late) clock ...
      sandbox.seedRefund({ payment_intent, amount: 700, currency: 'usd', metadata: { recon_operation_id: id } });
      // ... and a late duplicate, stamped 10 minutes on (a request that committed later).
      sandbox.seedRefund({
        payment_intent,
        amount: 700,
        currency: 'usd',
        metadata: { recon_operation_id: id },
        created: Math.floor(Date.now() / 1000),
      });
      return {
        operation_id: id,
        idempotency_key: id,
        payload: { payment_intent, amount: 700, currency: 'usd' },
        recorded_at: new Date(),
      };
    });
    const { loaded } = sandboxConfig(sandbox);
    const stripe = await createProvider('stripe', loaded);
    await stripe.prepareLookups!(queries, { backlog: queries.length });
    for (const q of queries) {
      const answer = await stripe.lookup(q);
      expect(answer.matches).toHaveLength(2);
      expect(sandbox.refunds({ metadataOperationId: q.operation_id! })).toHaveLength(2);
    }
  });
});

describe.each(backends)('recon run when a provider fails to prepare its lookups, store on $name', (backend) => {
  let db: Db | undefined;
  let sandbox: StripeSandbox | undefined;
  afterEach(async () => {
    await db?.close();
    await sandbox?.close();
  });

  it('decides each operation from its own lookup: a prepareLookups that throws is not the end of the pass', async () => {
    // prepareLookups "never throws" (types.ts), but a module provider (SPEC §6) may: that is only
    // lookups one by one, as run.ts says, never a pass that stops with its batch claimed.
    db = await backend.open();
    sandbox = await startStripeSandbox();
    const sb = sandbox;
    const ctx: CoreContext = { db, actor: 'test', now: () => new Date() };
    const ops = Array.from({ length: MIN_OPS }, (_, i) => {
      const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      const id = `refund:prep_${i}`;
      sb.seedRefund({ payment_intent, amount: 700, currency: 'usd', metadata: { recon_operation_id: id } });
      return validateOperation(
        {
          id,
          provider: 'stripe',
          action: 'refund',
          payload: { payment_intent, amount: 700, currency: 'usd' },
          approval: 'T-1',
        },
        ['stripe'],
      );
    });
    await recordOperations(ctx, ops);
    // Each first attempt ended without an answer (the refund committed all the same).
    await db.query(
      `UPDATE recon.operations SET state = 'outcome_unknown', attempt_count = 1, first_attempt_at = now()`,
    );
    const stripe = await createProvider('stripe', sandboxConfig(sb).loaded);
    const failing: Provider = { ...stripe, prepareLookups: () => Promise.reject(new Error('cannot prepare')) };

    const summary = await runPass(ctx, async () => failing);
    expect(summary.errors).toEqual([]);
    expect(summary.confirmed).toBe(MIN_OPS);
    for (const op of ops) expect(sb.refunds({ metadataOperationId: op.id })).toHaveLength(1);
  });
});
