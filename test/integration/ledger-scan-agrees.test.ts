/**
 * Issue 23: the ledger scan (providers/stripe/scan.ts) may shortcut only what the operation's own
 * lookup would decide. Its coverage starts where a refund of the operation could first exist (the
 * payment intent's creation), not where the operation was recorded; and an answer read before a
 * write it could have missed (a refund indexed late) is not used. The real stripe-node SDK against
 * the Stripe sandbox; the sandbox's ledger is what counts.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedConfig } from '../../src/config/types.js';
import { createProvider } from '../../src/providers/index.js';
import { createClient } from '../../src/providers/stripe/client.js';
import { MIN_OPS } from '../../src/providers/stripe/scan.js';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import type { LookupQuery, LookupResult } from '../../src/types.js';
import { describeWorld } from '../support/describe-world.js';
import { sandboxConfig } from '../support/stripe-config.js';
import { arrangeUnknownOutcomes, recordOk, refundOp, run, show } from './incidents-support.js';

const HOUR = 3600_000;
const ids = (r: { matches: { provider_id: string }[] }) => r.matches.map((t) => t.provider_id).sort();

describeWorld('recon run with a predated duplicate in the backlog', (suite) => {
  it('a refund carrying the operation, created an hour before it was recorded: needs_review duplicate, as its own lookup says', async () => {
    // The sandbox's clock is moved back to seed the past: payment intents paid two hours ago; then a
    // refund carrying the first operation's id, created one hour ago (an earlier run of the same job).
    let offsetMs = -2 * HOUR;
    const world = await suite.world({ stripe: { now: () => Date.now() + offsetMs } });
    const w = world;
    const N = 2 * MIN_OPS;
    const ops = Array.from({ length: N }, (_, i) => {
      const pi = w.stripe.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
      return refundOp(`refund:predated_${String(i).padStart(2, '0')}`, pi.payment_intent, 700);
    });
    offsetMs = 0;
    await recordOk(world, ops);
    // Even operations committed (ops[0] among them), odd ones never arrived.
    await arrangeUnknownOutcomes(world, ops);
    const predated = w.stripe.seedRefund({
      payment_intent: ops[0].payload.payment_intent,
      amount: 700,
      currency: 'usd',
      metadata: { recon_operation_id: ops[0].id },
      created: Math.floor((Date.now() - HOUR) / 1000),
    });
    expect(world.stripe.refunds({ payment_intent: ops[0].payload.payment_intent })).toHaveLength(2);

    const { summary } = await run(world);
    const first = summary.decisions.find((d) => d.id === ops[0].id)!;
    expect(first).toMatchObject({ decision: 'review', rule: 'found.duplicate', review_reason: 'duplicate' });
    // The other operations with one refund each: confirmed (from the scan or not). Counted on the
    // ledger: under load a first attempt that timed out may have been retried by stripe-node after all.
    const withOne = ops
      .slice(1)
      .filter((o) => w.stripe.refunds({ payment_intent: o.payload.payment_intent }).length === 1);
    expect(summary.confirmed).toBe(withOne.length);
    const detail = await show(world, ops[0].id);
    expect(detail.operation.state).toBe('needs_review');
    expect([...detail.operation.provider_txn_ids].sort()).toContain(predated.id);
    // Nothing was sent again: still the predated refund and the first attempt's.
    expect(world.stripe.refunds({ payment_intent: ops[0].payload.payment_intent })).toHaveLength(2);
  });

  it('records in the observation that an answer came from the ledger scan', async () => {
    const world = await suite.world();
    const w = world;
    const N = 2 * MIN_OPS;
    const ops = Array.from({ length: N }, (_, i) => {
      const pi = w.stripe.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
      return refundOp(`refund:noted_${String(i).padStart(2, '0')}`, pi.payment_intent, 700);
    });
    await recordOk(world, ops);
    await arrangeUnknownOutcomes(world, ops);
    await run(world);
    const db = await world.db();
    const { rows } = await db.query<{ operation_id: string; detail: Record<string, unknown> }>(
      `SELECT operation_id, detail FROM recon.observations WHERE operation_id = ANY($1::text[])`,
      [ops.map((o) => o.id)],
    );
    const bySource = (s: string) => rows.filter((r) => r.detail.source === s).map((r) => r.operation_id);
    // The committed ones answered from the scan, with its note; the others looked up on their own.
    const committed = ops.filter((o) => w.stripe.refunds({ payment_intent: o.payload.payment_intent }).length > 0);
    expect(committed.length).toBeGreaterThanOrEqual(N / 2);
    expect(bySource('ledger_scan').sort()).toEqual(committed.map((o) => o.id));
    expect(bySource('lookup').sort()).toEqual(ops.filter((o) => !committed.includes(o)).map((o) => o.id));
    const scanned = rows.find((r) => r.detail.source === 'ledger_scan')!;
    expect(String(scanned.detail.note)).toMatch(/ledger scan/);
    // The audit event of the decision says so too.
    const events = await db.query<{ detail: Record<string, unknown> }>(
      `SELECT detail FROM recon.audit_events WHERE operation_id = $1 AND kind <> 'recorded' ORDER BY seq`,
      [ops[0].id],
    );
    expect(JSON.stringify(events.rows.map((e) => e.detail))).toMatch(/ledger_scan/);
  });
});

describe('the ledger scan against ledgers written while it reads', () => {
  let sandbox: StripeSandbox;
  let loaded: LoadedConfig;
  let offsetMs = 0;
  const sandboxNow = () => Date.now() + offsetMs;
  beforeAll(async () => {
    sandbox = await startStripeSandbox({ now: sandboxNow });
    ({ loaded } = sandboxConfig(sandbox));
  });
  afterAll(() => sandbox?.close());

  let seq = 0;
  function backlog(n: number): LookupQuery[] {
    const tag = `w${++seq}`;
    return Array.from({ length: n }, (_, i) => {
      const id = `op_${tag}_${i}`;
      const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      sandbox.seedRefund({ payment_intent, amount: 700, currency: 'usd', metadata: { recon_operation_id: id } });
      return {
        operation_id: id,
        idempotency_key: id,
        payload: { payment_intent, amount: 700, currency: 'usd' },
        recorded_at: new Date(sandboxNow()),
      };
    });
  }

  it('a duplicate hidden when the pages were read and visible before the next batch: in the answer, as its own lookup finds it', async () => {
    const queries = backlog(MIN_OPS);
    const q = queries[5];
    const stripe = await createProvider('stripe', loaded);
    await stripe.prepareLookups!(queries, { backlog: 2 * queries.length });
    expect((await stripe.lookup(q)).matches).toHaveLength(1);

    // A late original request commits a second refund for q, visible to lists only 2 s later ...
    sandbox.faults.inject({ kind: 'hide', ms: 2000 });
    const { payment_intent } = q.payload as { payment_intent: string };
    const created = await createClient(sandboxConfig(sandbox).config).stripe.refunds.create({
      payment_intent,
      amount: 700,
      metadata: { recon_operation_id: q.operation_id! },
    });
    // ... while refunds of others keep arriving, visible at once, and listed by the next batch's refresh.
    const other = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.seedRefund({ payment_intent: other.payment_intent, amount: 100, currency: 'usd' });
    await stripe.prepareLookups!(queries, { backlog: queries.length });
    // The duplicate becomes visible; the batch that decides q is prepared.
    offsetMs += 3000;
    await stripe.prepareLookups!(queries, { backlog: queries.length });
    const own = await (await createProvider('stripe', loaded)).lookup(q);
    expect(ids(own)).toContain(created.id);
    const answer = await stripe.lookup(q);
    expect(ids(answer)).toEqual(ids(own));
    expect(answer.result).toBe(own.result);
  });

  it('the next batch answers from its own refresh (listed without payment intents): a status changed and a refund first listed there, as their own lookups say', async () => {
    const queries = backlog(MIN_OPS);
    const stripe = await createProvider('stripe', loaded);
    await stripe.prepareLookups!(queries, { backlog: 4 * queries.length });
    const q = queries[2];
    expect((await stripe.lookup(q)).matches.map((m) => m.state)).toEqual(['confirmed']);

    // After that batch: q's refund fails, and an operation whose payment was never listed gets its refund.
    const [refund] = sandbox.refunds({ payment_intent: (q.payload as { payment_intent: string }).payment_intent });
    sandbox.setRefundStatus(refund.id, 'failed');
    const [late] = backlog(1);
    const next = [...queries.slice(3), late];
    await stripe.prepareLookups!(next, { backlog: 4 * queries.length });
    const fresh = await createProvider('stripe', loaded);
    for (const x of [q, late]) {
      const [answer, own] = [await stripe.lookup(x), await fresh.lookup(x)];
      expect(ids(answer)).toEqual(ids(own));
      expect(answer.result).toBe(own.result);
      expect(answer.matches.map((m) => m.state)).toEqual(own.matches.map((m) => m.state));
    }
    expect((await stripe.lookup(q)).matches.map((m) => m.state)).toEqual(['failed']);
  });

  it("for random ledgers, every answer of the scan is the answer of the operation's own lookup", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          // Per operation: how long before the operation its payment intent was paid (s), and its refunds:
          // how long after the payment each was created (s), whether it carries the operation's id, status.
          ops: fc.array(
            fc.record({
              paidBeforeS: fc.integer({ min: 0, max: 3 * 86_400 }),
              refunds: fc.array(
                fc.record({
                  afterPaidS: fc.integer({ min: 0, max: 3 * 86_400 }),
                  mine: fc.boolean(),
                  status: fc.constantFrom('succeeded', 'pending', 'failed'),
                }),
                { maxLength: 3 },
              ),
            }),
            { minLength: MIN_OPS, maxLength: MIN_OPS + 8 },
          ),
          // Refunds of others between them, spread over the same days.
          others: fc.array(fc.integer({ min: 0, max: 3 * 86_400 }), { maxLength: 150 }),
        }),
        async ({ ops, others }) => {
          const tag = `p${++seq}`;
          // The provider's clock stays ours when the scan reads (only the payments are made in the past).
          const nowS = Math.floor(Date.now() / 1000);
          const queries = ops.map((o, i): LookupQuery => {
            const id = `op_${tag}_${i}`;
            const paidS = nowS - o.paidBeforeS;
            offsetMs = paidS * 1000 - Date.now();
            const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
            for (const r of o.refunds) {
              sandbox.seedRefund({
                payment_intent,
                amount: 700,
                currency: 'usd',
                metadata: r.mine ? { recon_operation_id: id } : {},
                created: Math.min(nowS, paidS + r.afterPaidS),
                status: r.status,
              });
            }
            return {
              operation_id: id,
              idempotency_key: id,
              payload: { payment_intent, amount: 700, currency: 'usd' },
              // Recorded just now: any refund of it before then is a predated duplicate.
              recorded_at: new Date(nowS * 1000),
            };
          });
          for (const s of others) {
            const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
            sandbox.seedRefund({ payment_intent, amount: 100, currency: 'usd', created: nowS - s });
          }
          offsetMs = 0;
          const stripe = await createProvider('stripe', loaded);
          const fresh = await createProvider('stripe', loaded);
          await stripe.prepareLookups!(queries, { backlog: queries.length });
          for (const q of queries) {
            const [answer, own]: LookupResult[] = [await stripe.lookup(q), await fresh.lookup(q)];
            expect(answer.result).toBe(own.result);
            expect(ids(answer)).toEqual(ids(own));
            expect(answer.matches.map((m) => m.state).sort()).toEqual(own.matches.map((m) => m.state).sort());
          }
        },
      ),
      { numRuns: 12, endOnFailure: true },
    );
  });
});
