/**
 * The stripe adapter through the real stripe-node SDK against the Stripe sandbox: every row of the
 * SPEC §3 classification, asserted on the sandbox's ledger, plus lookup, list and webhooks.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { LoadedConfig, StripeProviderConfig } from '../../src/config/types.js';
import { UsageError } from '../../src/errors.js';
import { createProvider } from '../../src/providers/index.js';
import { createClient } from '../../src/providers/stripe/client.js';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import type { Provider, SubmitRequest } from '../../src/types.js';

let sandbox: StripeSandbox;
let stripe: Provider;
/** Every delay the adapter asked for (Retry-After, backoff): recorded, not waited. */
let slept: number[];

function configFor(
  sb: { url: string; apiKey: string; webhookSecret: string },
  extra: Record<string, unknown> = {},
): LoadedConfig {
  const text = JSON.stringify({
    providers: {
      stripe: {
        type: 'stripe',
        apiKey: sb.apiKey,
        apiBase: sb.url,
        webhookSecret: sb.webhookSecret,
        rateLimit: 10_000,
        ...extra,
      },
    },
  });
  return parseConfig(text, { path: '/nowhere/recon.config.json', env: {} });
}

async function providerFor(extra: Record<string, unknown> = {}): Promise<Provider> {
  return createProvider('stripe', configFor(sandbox, extra), {
    sleep: async (ms) => {
      slept.push(ms);
    },
    random: () => 0.5,
  });
}

let seq = 0;
function refundOp(pi: string, amount: number, extra: Partial<SubmitRequest> = {}): SubmitRequest {
  const id = `op_${Date.now()}_${++seq}`;
  return {
    operation_id: id,
    action: 'refund',
    payload: { payment_intent: pi, amount, currency: 'usd' },
    idempotency_key: id,
    client_reference: null,
    ...extra,
  };
}

beforeAll(async () => {
  sandbox = await startStripeSandbox();
});
afterAll(async () => {
  await sandbox?.close();
});
beforeEach(async () => {
  slept = [];
  sandbox.faults.clear();
  stripe = await providerFor();
});

describe('submit classification (SPEC §3)', () => {
  it('2xx succeeded → confirmed, metadata written; the same key again is a replay, still one refund', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const op = refundOp(payment_intent, 1200, { client_reference: 'order-1' });
    const first = await stripe.submit(op);
    expect(first).toMatchObject({ outcome: 'confirmed', http_status: 200, replayed: false });
    expect(first.txn).toMatchObject({
      status: 'succeeded',
      amount: 1200,
      currency: 'usd',
      operation_id: op.operation_id,
      client_reference: 'order-1',
    });
    expect(first.provider_request_id).toMatch(/^req_/);
    const again = await stripe.submit(op);
    expect(again).toMatchObject({ outcome: 'confirmed', replayed: true });
    expect(again.txn?.provider_id).toBe(first.txn?.provider_id);
    const ledger = sandbox.refunds({ payment_intent });
    expect(ledger).toHaveLength(1);
    expect(ledger[0].metadata).toEqual({ recon_operation_id: op.operation_id, recon_client_reference: 'order-1' });
  });

  it('a pending refund → pending', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.faults.inject({ kind: 'initial_status', status: 'pending' });
    expect(await stripe.submit(refundOp(payment_intent, 100))).toMatchObject({ outcome: 'pending' });
  });

  it('committed, then the connection dropped (and the SDK retry dropped too) → unknown; the ledger has one refund', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
    const result = await stripe.submit(refundOp(payment_intent, 700));
    expect(result).toMatchObject({ outcome: 'unknown', error_class: 'connection' });
    expect(sandbox.refunds({ payment_intent })).toHaveLength(1);
  });

  it("the SDK's wait before it retries a closed connection: 0.5 s, or what networkRetryDelayS says (the demo's 0); the retry is the same", async () => {
    const config = configFor(sandbox).providers.stripe as StripeProviderConfig;
    expect(createClient(config).stripe.getInitialNetworkRetryDelay()).toBe(0.5);
    expect(createClient(config, { networkRetryDelayS: 0 }).stripe.getInitialNetworkRetryDelay()).toBe(0);
    // Without the wait, the same story: the SDK's retry carries the same key, so one refund.
    const quick = await createProvider('stripe', configFor(sandbox), { networkRetryDelayS: 0 });
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
    expect(await quick.submit(refundOp(payment_intent, 700))).toMatchObject({
      outcome: 'unknown',
      error_class: 'connection',
    });
    expect(sandbox.refunds({ payment_intent })).toHaveLength(1);
  });

  it('dropped before commit, twice → unknown; the ledger has none', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expect(await stripe.submit(refundOp(payment_intent, 700))).toMatchObject({
      outcome: 'unknown',
      error_class: 'connection',
    });
    expect(sandbox.refunds({ payment_intent })).toHaveLength(0);
  });

  it('400 amount_too_large → failed, nothing created', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 500, currency: 'usd' });
    const result = await stripe.submit(refundOp(payment_intent, 501));
    expect(result).toMatchObject({ outcome: 'failed', http_status: 400, error_class: 'invalid_request_error' });
    expect(result.message).toMatch(/greater than unrefunded amount/);
    expect(sandbox.refunds({ payment_intent })).toHaveLength(0);
  });

  it('the same key with another amount → conflict; still one refund', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const op = refundOp(payment_intent, 1000);
    expect((await stripe.submit(op)).outcome).toBe('confirmed');
    const changed = await stripe.submit({ ...op, payload: { ...op.payload, amount: 2000 } });
    expect(changed).toMatchObject({ outcome: 'conflict', http_status: 400, error_class: 'idempotency_error' });
    expect(sandbox.refunds({ payment_intent })).toHaveLength(1);
  });

  it('503 → unknown (recon, not the SDK, decides on retries); nothing created', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.faults.inject({ kind: 'status', status: 503 });
    expect(await stripe.submit(refundOp(payment_intent, 300))).toMatchObject({
      outcome: 'unknown',
      http_status: 503,
      error_class: 'http_503',
    });
    expect(sandbox.refunds({ payment_intent })).toHaveLength(0);
    expect(sandbox.faults.pending()).toBe(0);
  });

  it('409 while the first request with the key is in flight → unknown; the first one confirms; one refund', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const op = refundOp(payment_intent, 400);
    sandbox.faults.inject({ kind: 'hold' }, { idempotencyKey: op.idempotency_key, times: 1 });
    const first = stripe.submit(op);
    await expect.poll(() => sandbox.faults.held()).toBe(1);
    const second = await stripe.submit(op);
    expect(second).toMatchObject({ outcome: 'unknown', http_status: 409, error_class: 'idempotency_key_in_use' });
    sandbox.faults.release();
    expect((await first).outcome).toBe('confirmed');
    expect(sandbox.refunds({ payment_intent })).toHaveLength(1);
  });

  it('429 then success → confirmed after waiting Retry-After; one refund', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.faults.inject({ kind: 'status', status: 429 });
    const result = await stripe.submit(refundOp(payment_intent, 250));
    expect(result.outcome).toBe('confirmed');
    expect(slept.some((ms) => ms >= 1000)).toBe(true);
    expect(sandbox.refunds({ payment_intent })).toHaveLength(1);
  });

  it('429 past the bounded retries → unknown', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sandbox.faults.inject({ kind: 'status', status: 429 }, { times: 10 });
    expect(await stripe.submit(refundOp(payment_intent, 250))).toMatchObject({
      outcome: 'unknown',
      http_status: 429,
      error_class: 'rate_limited',
    });
    expect(sandbox.refunds({ payment_intent })).toHaveLength(0);
  });

  it('a response slower than the timeout → unknown (timeout), never failed', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const slow = await providerFor({ timeout: '200ms', lease: '1m' });
    sandbox.faults.inject({ kind: 'delay', ms: 1500 }, { times: 2 });
    expect(await slow.submit(refundOp(payment_intent, 90))).toMatchObject({
      outcome: 'unknown',
      error_class: 'timeout',
    });
    // The delay fault commits before it waits: the refund exists, which is why timeout ≠ failed.
    await expect.poll(() => sandbox.refunds({ payment_intent }).length).toBe(1);
  });

  it('a wrong API key → unknown on submit (401 is not in the "nothing was created" list), exit 2 on lookup, and the key is not in the result', async () => {
    const key = 'sk_test_wrongKeyDoNotPrint42';
    const wrong = await createProvider('stripe', configFor({ ...sandbox, apiKey: key }));
    const result = await wrong.submit(refundOp('pi_x', 1));
    expect(result).toMatchObject({ outcome: 'unknown', http_status: 401, error_class: 'http_401' });
    // A lookup with a refused key is a configuration error (exit 2, SPEC §4 step 6), not an outage.
    const lookup = await wrong.lookup({ operation_id: 'op_x', payload: { payment_intent: 'pi_x' } }).then(
      () => null,
      (err: unknown) => err as Error & { exitCode: number },
    );
    expect(lookup).toMatchObject({
      exitCode: 2,
      message: 'the provider refused the key for stripe (401): check STRIPE_API_KEY',
    });
    for (const text of [JSON.stringify(result), String(lookup?.message)])
      expect(text).not.toContain('wrongKeyDoNotPrint');
  });

  it('an unreachable API → unknown (connection)', async () => {
    const closed = await startStripeSandbox();
    await closed.close();
    const provider = await createProvider('stripe', configFor(closed));
    expect(await provider.submit(refundOp('pi_x', 1))).toMatchObject({ outcome: 'unknown', error_class: 'connection' });
  });
});

describe('lookup', () => {
  it('finds its refund by metadata among more than 100 on one payment intent, page by page', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 1_000_000, currency: 'usd' });
    const op = refundOp(payment_intent, 777);
    expect((await stripe.submit(op)).outcome).toBe('confirmed');
    for (let i = 0; i < 150; i++)
      sandbox.seedRefund({ payment_intent, amount: 10 + i, metadata: { recon_operation_id: `other_${i}` } });
    const pagesBefore = sandbox.stats.listPages;
    const found = await stripe.lookup({
      operation_id: op.operation_id,
      idempotency_key: op.idempotency_key,
      payload: op.payload,
    });
    expect(found.result).toBe('found');
    expect(found.matches.map((t) => t.operation_id)).toEqual([op.operation_id]);
    expect(found.candidates).toEqual([]);
    // Our refund is the oldest, so it is on the second page: lookup read both.
    expect(sandbox.stats.listPages - pagesBefore).toBe(2);
    expect(found.note).toContain(`payment intent ${payment_intent}`);
  });

  it('a same-amount refund without recon metadata is an ambiguous candidate, never a match', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const stranger = sandbox.seedRefund({ payment_intent, amount: 1500 });
    sandbox.seedRefund({ payment_intent, amount: 1499 });
    const op = refundOp(payment_intent, 1500);
    const result = await stripe.lookup({ operation_id: op.operation_id, payload: op.payload });
    expect(result.result).toBe('ambiguous');
    expect(result.matches).toEqual([]);
    expect(result.candidates.map((t) => t.provider_id)).toEqual([stranger.id]);
  });

  it('not_found while the refund is not yet indexed (hide), though it exists by id', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const op = refundOp(payment_intent, 640);
    sandbox.faults.inject({ kind: 'hide', ms: 60_000 });
    const submitted = await stripe.submit(op);
    expect(submitted.outcome).toBe('confirmed');
    const result = await stripe.lookup({ operation_id: op.operation_id, payload: op.payload });
    expect(result).toMatchObject({ result: 'not_found', matches: [], candidates: [] });
    expect(await stripe.get(submitted.txn!.provider_id)).toMatchObject({
      operation_id: op.operation_id,
      state: 'confirmed',
    });
    expect(sandbox.refunds({ payment_intent })).toHaveLength(1);
  });

  it('a pending refund is reported as pending', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const op = refundOp(payment_intent, 10);
    sandbox.seedRefund({
      payment_intent,
      amount: 10,
      status: 'pending',
      metadata: { recon_operation_id: op.operation_id },
    });
    expect((await stripe.lookup({ operation_id: op.operation_id, payload: op.payload })).result).toBe('pending');
  });

  it('by key and by client reference, within the recent window, saying how it searched', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const op = refundOp(payment_intent, 55, { client_reference: `ref-${seq}` });
    await stripe.submit(op);
    const byKey = await stripe.lookup({ idempotency_key: op.idempotency_key });
    expect(byKey.matches.map((t) => t.operation_id)).toEqual([op.operation_id]);
    expect(byKey.note).toMatch(/cannot search by idempotency key/);
    const byRef = await stripe.lookup({
      client_reference: op.client_reference!,
      since: new Date(Date.now() - 3_600_000),
    });
    expect(byRef.result).toBe('found');
    expect(byRef.matches.map((t) => t.provider_id)).toEqual(byKey.matches.map((t) => t.provider_id));
    expect((await stripe.lookup({ client_reference: 'no-such-ref' })).result).toBe('not_found');
  });

  it('provider trouble is an observation (unavailable), not an exception', async () => {
    const closed = await startStripeSandbox();
    await closed.close();
    const provider = await createProvider('stripe', configFor(closed), { sleep: async () => {} });
    const result = await provider.lookup({ operation_id: 'op_1', payload: { payment_intent: 'pi_1', amount: 1 } });
    expect(result.result).toBe('unavailable');
    expect(result.error).toMatch(/^connection/);
  });
});

describe('get and list', () => {
  it('get of an unknown refund is null', async () => {
    expect(await stripe.get('re_doesnotexist')).toBeNull();
  });

  it('list streams page by page: stopping after the first page reads one page', async () => {
    const start = Math.floor(Date.now() / 1000) - 30 * 86_400;
    const { payment_intent, charge } = sandbox.seedPaymentIntent({ amount: 10_000_000, currency: 'usd' });
    for (let i = 0; i < 250; i++) sandbox.seedRefund({ payment_intent, amount: 100 + i, created: start + i });
    const range = { since: new Date(start * 1000), until: new Date((start + 249) * 1000) };

    const pages: Array<{ page: number; items: number }> = [];
    let count = 0;
    for await (const txn of stripe.list!({ ...range, onPage: (p) => pages.push(p) })) {
      expect(txn.group).toBe(charge);
      count++;
    }
    expect(count).toBe(250);
    expect(pages).toEqual([
      { page: 1, items: 100 },
      { page: 2, items: 100 },
      { page: 3, items: 50 },
    ]);

    const before = sandbox.stats.listPages;
    let seen = 0;
    for await (const _txn of stripe.list!(range)) if (++seen === 100) break;
    expect(sandbox.stats.listPages - before).toBe(1);
  });
});

describe('webhooks', () => {
  it('a correctly signed refund event parses into its transaction', async () => {
    const { payment_intent } = sandbox.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const refund = sandbox.seedRefund({ payment_intent, amount: 99, metadata: { recon_operation_id: 'op_hook' } });
    for (const type of ['refund.created', 'refund.updated', 'refund.failed', 'charge.refund.updated']) {
      const body = JSON.stringify(sandbox.eventFor(type, refund));
      const event = stripe.parseWebhook!(body, sandbox.signPayload(body));
      expect(event.type).toBe(type);
      expect(event.event_id).toMatch(/^evt_/);
      expect(event.txn).toMatchObject({ provider_id: refund.id, operation_id: 'op_hook', amount: 99 });
    }
  });

  it('a bad or missing signature is a usage error', async () => {
    const refund = sandbox.seedRefund({ amount: 5 });
    const body = JSON.stringify(sandbox.eventFor('refund.updated', refund));
    const tampered = body.replace('"amount":5', '"amount":500');
    expect(() => stripe.parseWebhook!(tampered, sandbox.signPayload(body))).toThrow(UsageError);
    // Named by the header: `webhook serve` has no --signature flag (issue 27).
    expect(() => stripe.parseWebhook!(tampered, sandbox.signPayload(body))).toThrow(
      /^Stripe-Signature: invalid webhook signature/,
    );
    expect(() => stripe.parseWebhook!(body, undefined)).toThrow(/^Stripe-Signature: missing/);
  });
});
