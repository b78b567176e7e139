/**
 * Issue 12: `recon run` finds the refunds of a large backlog from one listing of the ledger
 * (providers/stripe/scan.ts) instead of one lookup per operation. The scan may only ever answer
 * "found"; "nothing found", on which a retry is authorised, still comes from the operation's own
 * lookup. The real stripe-node SDK against the Stripe sandbox; the sandbox's ledger is what counts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedConfig, StripeProviderConfig } from '../../src/config/types.js';
import { createProvider } from '../../src/providers/index.js';
import { createClient } from '../../src/providers/stripe/client.js';
import { planLookup } from '../../src/providers/stripe/ledger.js';
import { ledgerScan, MAX_AGE_MS, MIN_OPS } from '../../src/providers/stripe/scan.js';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import type { LookupQuery } from '../../src/types.js';
import { describeWorld } from '../support/describe-world.js';
import { sandboxConfig } from '../support/stripe-config.js';
import {
  expectExit,
  PAST_WINDOW_MS,
  recordOk,
  refundOp,
  run,
  show,
  arrangeUnknownOutcomes,
} from './incidents-support.js';

const listRequests = (sb: StripeSandbox) => sb.stats.byRoute['GET /v1/refunds'] ?? 0;

describe('the ledger scan, through stripe-node against the sandbox', () => {
  let sandbox: StripeSandbox;
  let loaded: LoadedConfig;
  let config: StripeProviderConfig;
  beforeAll(async () => {
    sandbox = await startStripeSandbox();
    ({ loaded, config } = sandboxConfig(sandbox));
  });
  afterAll(() => sandbox?.close());

  let seq = 0;
  /** `n` operations recorded now, each with its payment intent; `refunds[i]` refunds carry operation i's id. */
  function backlog(n: number, refunds: (i: number) => number) {
    const tag = `s${++seq}`;
    return Array.from({ length: n }, (_, i): LookupQuery => {
      const id = `op_${tag}_${i}`;
      const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      for (let k = 0; k < refunds(i); k++)
        sandbox.seedRefund({ payment_intent, amount: 700, currency: 'usd', metadata: { recon_operation_id: id } });
      return {
        operation_id: id,
        idempotency_key: id,
        payload: { payment_intent, amount: 700, currency: 'usd' },
        recorded_at: new Date(),
      };
    });
  }

  /** `n` refunds of others' payment intents, without recon metadata: newer than what was seeded before. */
  function othersRefunds(n: number) {
    for (let i = 0; i < n; i++) {
      const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      sandbox.seedRefund({ payment_intent, amount: 100, currency: 'usd' });
    }
  }

  it('answers a batch of found operations from a few list pages, with what a lookup of each finds', async () => {
    const queries = backlog(3 * MIN_OPS, (i) => (i % 3 === 0 ? 2 : 1));
    const stripe = await createProvider('stripe', loaded);
    const before = listRequests(sandbox);
    await stripe.prepareLookups!(queries, { backlog: queries.length });
    const answers = await Promise.all(queries.map((q) => stripe.lookup(q)));
    const used = listRequests(sandbox) - before;
    // One lookup each would be 48 requests.
    expect(used).toBeLessThanOrEqual(2);

    // The same lookups one by one, by a provider that never scanned: the same transactions.
    const fresh = await createProvider('stripe', loaded);
    for (const [i, q] of queries.entries()) {
      const own = await fresh.lookup(q);
      expect(answers[i].result).toBe(own.result);
      expect(answers[i].matches.map((t) => t.provider_id).sort()).toEqual(own.matches.map((t) => t.provider_id).sort());
      expect(answers[i].matches).toHaveLength(i % 3 === 0 ? 2 : 1);
    }
  });

  it('never answers "nothing found": an operation without a refund in the scan is looked up on its own', async () => {
    const queries = backlog(MIN_OPS, (i) => (i < MIN_OPS / 2 ? 1 : 0));
    const stripe = await createProvider('stripe', loaded);
    await stripe.prepareLookups!(queries, { backlog: queries.length });
    const before = listRequests(sandbox);
    const answers = await Promise.all(queries.map((q) => stripe.lookup(q)));
    expect(answers.map((a) => a.result)).toEqual(queries.map((_, i) => (i < MIN_OPS / 2 ? 'found' : 'not_found')));
    // The found half from the scan (no request), the other half one request each.
    expect(listRequests(sandbox) - before).toBe(MIN_OPS / 2);
  });

  it('sees a refund created after the scan, before the next batch: the duplicate is found', async () => {
    const first = backlog(MIN_OPS, () => 1);
    const second = backlog(MIN_OPS, () => 1);
    const stripe = await createProvider('stripe', loaded);
    await stripe.prepareLookups!(first, { backlog: first.length + second.length });
    expect((await stripe.lookup(second[3])).matches).toHaveLength(1);

    // A late original request commits a second refund for an operation of the next batch.
    const payload = second[3].payload as { payment_intent: string };
    sandbox.seedRefund({
      payment_intent: payload.payment_intent,
      amount: 700,
      currency: 'usd',
      metadata: { recon_operation_id: second[3].operation_id! },
    });
    await stripe.prepareLookups!(second, { backlog: second.length });
    const answer = await stripe.lookup(second[3]);
    expect(answer.result).toBe('found');
    expect(answer.matches).toHaveLength(2);
  });

  it('stops at a quarter of the backlog in pages when the ledger is far larger; the rest are looked up one by one', async () => {
    const queries = backlog(MIN_OPS, () => 1);
    // 1,000 newer refunds of others: 10 pages before the first of ours.
    othersRefunds(1_000);
    const stripe = await createProvider('stripe', loaded);
    const before = listRequests(sandbox);
    await stripe.prepareLookups!(queries, { backlog: queries.length });
    expect(listRequests(sandbox) - before).toBe(MIN_OPS / 4);
    const answers = await Promise.all(queries.map((q) => stripe.lookup(q)));
    expect(answers.every((a) => a.result === 'found' && a.matches.length === 1)).toBe(true);
    expect(listRequests(sandbox) - before).toBe(MIN_OPS / 4 + MIN_OPS);
  });

  it('lists at most a quarter of the backlog in pages over a whole pass, scans started again included (a key that may not list events)', async () => {
    const queries = backlog(MIN_OPS, () => 1);
    othersRefunds(500);
    // Without events a scan is started again once MAX_AGE_MS old: every batch here.
    sandbox.forbidden.add('GET /v1/events');
    try {
      let t = 0;
      const scan = ledgerScan(createClient(config), { clock: () => t });
      const before = listRequests(sandbox);
      for (let batch = 0; batch < 4; batch++, t += MAX_AGE_MS + 1) await scan.prepare(queries, queries.length);
      expect(listRequests(sandbox) - before).toBe(MIN_OPS / 4);
    } finally {
      sandbox.forbidden.delete('GET /v1/events');
    }
  });

  it('lists a long ledger over several batches, a bounded number of pages before each', async () => {
    const queries = backlog(MIN_OPS, () => 1);
    // 600 newer refunds of others: our operations' refunds are at least 6 pages down (and the window
    // holds the refunds of the tests before: all within SKEW_S).
    othersRefunds(600);
    const perBatch = 2;
    // Refunds indexed late are not looked for here (each refresh lists again the span a refund may stay
    // invisible to lists): with that span 0, a refresh lists the refunds of the newest second again.
    const scan = ledgerScan(createClient(config), { clock: () => 0, pagesPerBatch: perBatch, indexingMs: 0 });
    const newest = Math.max(...sandbox.refunds().map((r) => r.created));
    const refreshPages = Math.ceil(sandbox.refunds().filter((r) => r.created >= newest).length / 100);
    const plan = planLookup(queries[0], config.capabilities.keyRetentionMs, new Date());
    const perPrepare: number[] = [];
    for (let batch = 0; batch < 40 && scan.answer(queries[0], plan) === null; batch++) {
      const before = listRequests(sandbox);
      await scan.prepare(queries, 100_000);
      perPrepare.push(listRequests(sandbox) - before);
    }
    expect(scan.answer(queries[0], plan)?.matches).toHaveLength(1);
    // The first batch: `perBatch` pages; each later one: the head refresh and `perBatch` more.
    expect(perPrepare[0]).toBe(perBatch);
    expect(perPrepare.length).toBeGreaterThan(2);
    for (const n of perPrepare.slice(1)) expect(n).toBeLessThanOrEqual(perBatch + refreshPages);
  });

  it(`gives no answer from a listing brought up to date more than ${MAX_AGE_MS / 1000} s before`, async () => {
    const queries = backlog(MIN_OPS, () => 1);
    let t = 0;
    const scan = ledgerScan(createClient(config), { clock: () => t });
    // Allowed to list the whole ledger of this file: it holds the refunds of the tests before.
    await scan.prepare(queries, 100_000);
    const plan = planLookup(queries[0], config.capabilities.keyRetentionMs, new Date());
    expect(scan.answer(queries[0], plan)?.result).toBe('found');
    t = MAX_AGE_MS + 1;
    expect(scan.answer(queries[0], plan)).toBeNull();
  });

  it('does not scan for a batch smaller than MIN_OPS', async () => {
    const queries = backlog(MIN_OPS - 1, () => 1);
    const stripe = await createProvider('stripe', loaded);
    const before = listRequests(sandbox);
    await stripe.prepareLookups!(queries, { backlog: 1000 });
    expect(listRequests(sandbox)).toBe(before);
  });
});

describeWorld('recon run over a backlog', (suite) => {
  it('40 unknown outcomes, half committed: confirmed from the scan, the rest retried after their own lookups; one refund each', async () => {
    const world = await suite.world();
    const w = world;
    const N = 40;
    const ops = Array.from({ length: N }, (_, i) => {
      const pi = w.stripe.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
      return refundOp(`refund:scan_${String(i).padStart(2, '0')}`, pi.payment_intent, 100 + i);
    });
    await recordOk(world, ops);
    await arrangeUnknownOutcomes(world, ops);

    const before = listRequests(world.stripe);
    const first = await run(world);
    expect(first.code).toBe(0);
    expect(first.summary.confirmed).toBe(N / 2);
    expect(first.summary.waiting).toBe(N / 2);
    // The committed half from one scan, the other half one lookup each: fewer requests than operations.
    expect(listRequests(world.stripe) - before).toBeLessThanOrEqual(N / 2 + 2);

    world.advance(PAST_WINDOW_MS);
    const second = await run(world);
    expect(second.code).toBe(0);
    expect(second.summary.retried).toBe(N / 2);
    for (const op of ops) expect(world.stripe.refunds({ payment_intent: op.payload.payment_intent })).toHaveLength(1);
    expect(world.stripe.refunds()).toHaveLength(N);
    const detail = await show(world, ops[0].id);
    expect(detail.operation.state).toBe('confirmed');
    expect(expectExit(await world.recon(['ops', 'list', '--unresolved', '--json']), 0).json).toMatchObject({
      total: 0,
    });
  });
});
