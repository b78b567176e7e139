/**
 * The Stripe sandbox, driven by the real stripe-node SDK: every behaviour recon relies on is checked
 * the way recon will meet it, and every side effect is counted on the sandbox's ledger.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { afterEach, describe, expect, it } from 'vitest';
import { startStripeSandbox, type StripeSandbox, type StripeSandboxOptions } from '../../src/sandbox/stripe/server.js';

const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function sandbox(opts: StripeSandboxOptions = {}): Promise<StripeSandbox> {
  const sb = await startStripeSandbox(opts);
  open.push(sb);
  return sb;
}

function client(sb: StripeSandbox, config: Partial<Stripe.StripeConfig> = {}, key = sb.apiKey): Stripe {
  return new Stripe(key, {
    host: '127.0.0.1',
    port: sb.port,
    protocol: 'http',
    maxNetworkRetries: 0,
    telemetry: false,
    ...config,
  });
}

async function caught(p: Promise<unknown>): Promise<Stripe.errors.StripeError> {
  try {
    await p;
  } catch (err) {
    return err as Stripe.errors.StripeError;
  }
  throw new Error('expected the call to fail');
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function header(obj: { lastResponse?: unknown }, name: string): unknown {
  return (obj.lastResponse as { headers: Record<string, unknown> }).headers[name];
}

/** A webhook endpoint that keeps what it receives. */
async function receiver(status = 200): Promise<{ url: string; got: Array<{ body: string; signature: string }> }> {
  const got: Array<{ body: string; signature: string }> = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      got.push({ body, signature: String(req.headers['stripe-signature']) });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  open.push({ close: () => new Promise<void>((r) => server.close(() => r())) });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got };
}

describe('stripe sandbox: refunds and idempotency', () => {
  it('creates a refund once and replays it for the same key and parameters', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent, charge } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const params = { payment_intent, amount: 1200, metadata: { recon_operation_id: 'op-1' } };
    const first = await stripe.refunds.create(params, { idempotencyKey: 'op-1' });
    const again = await stripe.refunds.create(params, { idempotencyKey: 'op-1' });

    expect(first).toMatchObject({
      object: 'refund',
      amount: 1200,
      currency: 'usd',
      status: 'succeeded',
      payment_intent,
      charge,
    });
    expect(first.id).toMatch(/^re_/);
    expect(again.id).toBe(first.id);
    expect(header(first, 'idempotent-replayed')).toBeUndefined();
    expect(header(again, 'idempotent-replayed')).toBe('true');
    expect(first.lastResponse.requestId).toMatch(/^req_/);
    expect(sb.refunds({ metadataOperationId: 'op-1' })).toHaveLength(1);
    expect((await stripe.charges.retrieve(charge)).amount_refunded).toBe(1200);
    expect((await stripe.refunds.retrieve(first.id)).metadata).toEqual({ recon_operation_id: 'op-1' });
  });

  it('rejects the same key with other parameters as StripeIdempotencyError (400) and creates nothing', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await stripe.refunds.create({ payment_intent, amount: 1000 }, { idempotencyKey: 'k1' });
    const err = await caught(stripe.refunds.create({ payment_intent, amount: 1001 }, { idempotencyKey: 'k1' }));

    expect(err).toBeInstanceOf(Stripe.errors.StripeIdempotencyError);
    expect(err.rawType).toBe('idempotency_error');
    expect(err.statusCode).toBe(400);
    expect(err.message).toContain('can only be used with the same parameters they were first used with');
    expect(sb.refunds({ payment_intent })).toHaveLength(1);
  });

  it('answers 409 idempotency_key_in_use while the first request is still running', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'delay', ms: 1500 });
    const params = { payment_intent, amount: 700 };
    const first = stripe.refunds.create(params, { idempotencyKey: 'slow' });
    await until(() => sb.refunds().length === 1, 'the first request to commit');

    const err = await caught(stripe.refunds.create(params, { idempotencyKey: 'slow' }));
    // stripe-node has no class for it: a 409 becomes a plain StripeAPIError (SPEC §3).
    expect(err).toBeInstanceOf(Stripe.errors.StripeAPIError);
    expect(err.statusCode).toBe(409);
    expect(err.rawType).toBe('idempotency_error');
    expect(err.code).toBe('idempotency_key_in_use');

    // With retries on, the SDK retries the 409 itself and ends with the replayed answer.
    const retrying = stripe.refunds.create(params, { idempotencyKey: 'slow', maxNetworkRetries: 5 });
    const [original, replayed] = await Promise.all([first, retrying]);
    expect(replayed.id).toBe(original.id);
    expect(header(replayed, 'idempotent-replayed')).toBe('true');
    expect(sb.refunds()).toHaveLength(1);
  });

  it('refuses more than the refundable amount and unknown payments, and replays stored errors', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 1000, currency: 'eur' });
    await stripe.refunds.create({ payment_intent, amount: 600 });
    const tooLarge = await caught(stripe.refunds.create({ payment_intent, amount: 500 }, { idempotencyKey: 'big' }));
    expect(tooLarge).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(tooLarge).toMatchObject({
      statusCode: 400,
      code: 'amount_too_large',
      param: 'amount',
      rawType: 'invalid_request_error',
    });
    // Stripe saves an endpoint's error under the key and replays it.
    const replayed = await caught(stripe.refunds.create({ payment_intent, amount: 500 }, { idempotencyKey: 'big' }));
    expect(replayed.code).toBe('amount_too_large');
    expect(replayed.headers?.['idempotent-replayed']).toBe('true');

    const missing = await caught(stripe.refunds.create({ payment_intent: 'pi_nope', amount: 1 }));
    expect(missing).toMatchObject({ statusCode: 404, code: 'resource_missing', param: 'payment_intent' });
    const unknownRefund = await caught(stripe.refunds.retrieve('re_nope'));
    expect(unknownRefund).toMatchObject({ statusCode: 404, code: 'resource_missing' });

    const full = await stripe.refunds.create({ payment_intent });
    expect(full.amount).toBe(400);
    const again = await caught(stripe.refunds.create({ payment_intent, amount: 1 }));
    expect(again.code).toBe('charge_already_refunded');
    expect(sb.refunds({ payment_intent }).map((r) => r.amount)).toEqual([600, 400]);
  });

  it('does not save parameter validation errors, so the key stays usable', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 1000, currency: 'usd' });
    const bad = await caught(stripe.refunds.create({ payment_intent, amount: -5 }, { idempotencyKey: 'v' }));
    expect(bad).toMatchObject({ statusCode: 400, param: 'amount' });
    const good = await stripe.refunds.create({ payment_intent, amount: 5 }, { idempotencyKey: 'v' });
    expect(header(good, 'idempotent-replayed')).toBeUndefined();
    expect(sb.refunds()).toHaveLength(1);
  });

  it('rejects a wrong API key with 401', async () => {
    const sb = await sandbox();
    const err = await caught(client(sb, {}, 'sk_test_wrong_key_123').refunds.list());
    expect(err).toBeInstanceOf(Stripe.errors.StripeAuthenticationError);
    expect(err.statusCode).toBe(401);
    expect(err.requestId).toMatch(/^req_/);
  });

  it('answers 403 for a route the key may not call (a restricted key), as StripePermissionError, and serves the rest', async () => {
    const sb = await sandbox({ forbid: ['GET /v1/events'] });
    const stripe = client(sb);
    const err = await caught(stripe.events.list({ types: ['refund.updated'] }));
    expect(err).toBeInstanceOf(Stripe.errors.StripePermissionError);
    expect(err.statusCode).toBe(403);
    expect((await stripe.refunds.list()).data).toEqual([]);
    sb.forbidden.delete('GET /v1/events');
    expect((await stripe.events.list()).data).toEqual([]);
  });

  it('forgets keys after 24h: the same key then creates a new refund', async () => {
    let t = Date.UTC(2026, 0, 1);
    const sb = await sandbox({ now: () => t });
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 1000, currency: 'usd' });
    const a = await stripe.refunds.create({ payment_intent, amount: 10 }, { idempotencyKey: 'old' });
    t += 24 * 3600_000 + 1;
    const b = await stripe.refunds.create({ payment_intent, amount: 10 }, { idempotencyKey: 'old' });
    expect(b.id).not.toBe(a.id);
    expect(sb.refunds({ payment_intent })).toHaveLength(2);
  });
});

describe('stripe sandbox: lists', () => {
  it('pages through more than 100 refunds of one payment intent with auto-pagination, newest first', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 1_000_000, currency: 'usd' });
    const other = sb.seedPaymentIntent({ amount: 1000, currency: 'usd' });
    for (let i = 0; i < 250; i++)
      sb.seedRefund({ payment_intent, amount: 1, created: 1_700_000_000 + Math.floor(i / 7) });
    sb.seedRefund({ payment_intent: other.payment_intent, amount: 1 });

    const ids: string[] = [];
    for await (const r of stripe.refunds.list({ payment_intent, limit: 100 })) ids.push(r.id);

    const expected = sb
      .refunds({ payment_intent })
      .reverse()
      .map((r) => r.id);
    expect(ids).toEqual(expected);
    expect(new Set(ids).size).toBe(250);
    expect(sb.stats.listPages).toBe(3);

    const firstPage = await stripe.refunds.list({ payment_intent });
    expect(firstPage).toMatchObject({ object: 'list', has_more: true, url: '/v1/refunds' });
    expect(firstPage.data).toHaveLength(10);
    const before = await stripe.refunds.list({ payment_intent, ending_before: expected[15], limit: 5 });
    expect(before.data.map((r) => r.id)).toEqual(expected.slice(10, 15));
    expect(before.has_more).toBe(true);

    const tooMany = await caught(stripe.refunds.list({ limit: 101 }));
    expect(tooMany).toMatchObject({ statusCode: 400, param: 'limit' });
  });

  it('filters by created[gte|lte|gt|lt] and by charge', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent, charge } = sb.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
    for (const created of [1000, 2000, 3000, 4000, 5000]) sb.seedRefund({ charge, amount: created / 1000, created });
    const amounts = async (params: Stripe.RefundListParams) => {
      const out: number[] = [];
      for await (const r of stripe.refunds.list(params)) out.push(r.amount);
      return out;
    };
    expect(await amounts({ charge, created: { gte: 2000, lte: 4000 } })).toEqual([4, 3, 2]);
    expect(await amounts({ payment_intent, created: { gt: 2000, lt: 5000 } })).toEqual([4, 3]);
    expect(await amounts({ created: 3000 })).toEqual([3]);
  });
});

describe('stripe sandbox: rate limit', () => {
  it('answers 429 with Retry-After when over the configured rate', async () => {
    const sb = await sandbox({ rateLimit: 1 });
    const stripe = client(sb);
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => stripe.refunds.list()));
    const limited = results
      .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      .map((r) => r.reason as Stripe.errors.StripeError);
    expect(limited.length).toBeGreaterThan(0);
    for (const err of limited) {
      expect(err).toBeInstanceOf(Stripe.errors.StripeRateLimitError);
      expect(err.statusCode).toBe(429);
      expect(Number(err.headers?.['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect(sb.stats.status[429]).toBe(limited.length);
  });
});

describe('stripe sandbox: faults', () => {
  it('commit_then_drop on the request and the SDK retry: a connection error, and one refund exists', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
    const err = await caught(stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'drop' }));
    expect(err).toBeInstanceOf(Stripe.errors.StripeConnectionError);
    expect(sb.stats.byRoute['POST /v1/refunds']).toBe(2);
    expect(sb.refunds({ payment_intent })).toHaveLength(1);
    expect(sb.faults.pending()).toBe(0);
  });

  it('commit_then_drop once: the SDK retries the closed connection and gets the replayed refund', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'commit_then_drop' });
    const refund = await stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'drop-once' });
    expect(header(refund, 'idempotent-replayed')).toBe('true');
    expect(sb.refunds({ payment_intent }).map((r) => r.id)).toEqual([refund.id]);
  });

  it('a sticky fault by idempotency key drops every try with that key until cleared', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'commit_then_drop' }, { idempotencyKey: 'sticky' });
    await caught(stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'sticky' }));
    await caught(stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'sticky' }));
    const other = await stripe.refunds.create({ payment_intent, amount: 200 }, { idempotencyKey: 'other' });
    sb.faults.clear();
    const later = await stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'sticky' });
    expect(header(later, 'idempotent-replayed')).toBe('true');
    expect(sb.refunds({ payment_intent }).map((r) => r.id)).toEqual([later.id, other.id]);
  });

  it('drop_before_commit creates nothing, and the key is still free afterwards', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    const err = await caught(stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'lost' }));
    expect(err).toBeInstanceOf(Stripe.errors.StripeConnectionError);
    expect(sb.refunds()).toHaveLength(0);
    const retried = await stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'lost' });
    expect(header(retried, 'idempotent-replayed')).toBeUndefined();
    expect(sb.refunds()).toHaveLength(1);
  });

  it('a status fault answers without committing or saving the key', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'status', status: 503 });
    const err = await caught(stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 's' }));
    expect(err).toBeInstanceOf(Stripe.errors.StripeAPIError);
    expect(err.statusCode).toBe(503);
    expect(sb.refunds()).toHaveLength(0);
    sb.faults.inject({ kind: 'status', status: 429 });
    const limited = await caught(stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 's' }));
    expect(limited).toBeInstanceOf(Stripe.errors.StripeRateLimitError);
    expect(limited.headers?.['retry-after']).toBe('1');
    await stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 's' });
    expect(sb.refunds()).toHaveLength(1);
  });

  it('hide: the refund is missing from lists until the time passes, while GET by id works', async () => {
    let t = Date.UTC(2026, 0, 1);
    const sb = await sandbox({ now: () => t });
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'hide', ms: 60_000 });
    const refund = await stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'h' });
    expect((await stripe.refunds.list({ payment_intent })).data).toHaveLength(0);
    expect((await stripe.refunds.retrieve(refund.id)).id).toBe(refund.id);
    expect(sb.refunds({ payment_intent })).toHaveLength(1);
    t += 60_000;
    expect((await stripe.refunds.list({ payment_intent })).data.map((r) => r.id)).toEqual([refund.id]);
  });

  it('hold keeps the answer until release(), after the refund is committed', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'hold' });
    let settled = false;
    const pending = stripe.refunds
      .create({ payment_intent, amount: 100 }, { idempotencyKey: 'held' })
      .finally(() => (settled = true));
    await until(() => sb.faults.held() === 1, 'the response to be held');
    expect(sb.refunds()).toHaveLength(1);
    expect(settled).toBe(false);
    sb.faults.release();
    const refund = await pending;
    expect(refund.id).toBe(sb.refunds()[0].id);
    expect(sb.faults.held()).toBe(0);
  });

  it('hold: a client that gives up frees the key, and its retry gets the replay', async () => {
    const sb = await sandbox();
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'hold' });
    const impatient = client(sb, { timeout: 300 });
    const err = await caught(impatient.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'gone' }));
    expect(err).toBeInstanceOf(Stripe.errors.StripeConnectionError);
    await until(() => sb.faults.held() === 0, 'the held response to end with its client');
    const retried = await client(sb).refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'gone' });
    expect(header(retried, 'idempotent-replayed')).toBe('true');
    expect(sb.refunds()).toHaveLength(1);
  });

  it('initial_status makes a refund pending; setRefundStatus moves it on', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const { payment_intent, charge } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'initial_status', status: 'pending' });
    const refund = await stripe.refunds.create({ payment_intent, amount: 100 });
    expect(refund.status).toBe('pending');
    sb.setRefundStatus(refund.id, 'failed');
    expect((await stripe.refunds.retrieve(refund.id)).status).toBe('failed');
    expect((await stripe.charges.retrieve(charge)).amount_refunded).toBe(0);
  });

  it('is steerable over the admin HTTP API', async () => {
    const sb = await sandbox();
    const stripe = client(sb);
    const post = (path: string, body: unknown) =>
      fetch(`${sb.url}/_sandbox${path}`, { method: 'POST', body: JSON.stringify(body) }).then((r) => r.json());
    const seeded = (await post('/seed/payment_intent', { amount: 900, currency: 'usd' })) as { payment_intent: string };
    await post('/seed/refund', {
      payment_intent: seeded.payment_intent,
      amount: 300,
      metadata: { recon_operation_id: 'old' },
    });
    expect(await post('/faults', { kind: 'commit_then_drop', times: 2 })).toEqual({ pending: 2 });
    await caught(stripe.refunds.create({ payment_intent: seeded.payment_intent, amount: 100 }));
    const ledger = (await fetch(`${sb.url}/_sandbox/ledger?payment_intent=${seeded.payment_intent}`).then((r) =>
      r.json(),
    )) as { data: unknown[] };
    expect(ledger.data).toHaveLength(2);
    const bad = await fetch(`${sb.url}/_sandbox/faults`, { method: 'POST', body: JSON.stringify({ kind: 'explode' }) });
    expect(bad.status).toBe(400);
    expect(sb.stats.byRoute['POST /v1/refunds']).toBe(2);
  });
});

describe('stripe sandbox: webhooks', () => {
  it('signs events so stripe.webhooks.constructEvent accepts them, and rejects another secret', async () => {
    const hook = await receiver();
    const sb = await sandbox({ webhookUrl: hook.url });
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    sb.faults.inject({ kind: 'initial_status', status: 'pending' });
    const refund = await stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: 'wh' });
    sb.setRefundStatus(refund.id, 'succeeded');
    await until(() => hook.got.length === 2, 'two webhook deliveries');

    const events = hook.got.map((d) => stripe.webhooks.constructEvent(d.body, d.signature, sb.webhookSecret));
    expect(events.map((e) => e.type)).toEqual(['refund.created', 'refund.updated']);
    expect(events.map((e) => (e.data.object as Stripe.Refund).id)).toEqual([refund.id, refund.id]);
    expect((events[1].data.object as Stripe.Refund).status).toBe('succeeded');
    expect(events[1].data.previous_attributes).toEqual({ status: 'pending' });
    expect(events[0].request).toEqual({ id: refund.lastResponse.requestId, idempotency_key: 'wh' });
    expect(sb.events().map((e) => e.id)).toEqual(events.map((e) => e.id));
    expect(() => stripe.webhooks.constructEvent(hook.got[0].body, hook.got[0].signature, 'whsec_other')).toThrow(
      Stripe.errors.StripeSignatureVerificationError,
    );
    const manual = sb.signPayload('{"a":1}', 1_700_000_000);
    expect(manual).toMatch(/^t=1700000000,v1=[0-9a-f]{64}$/);
  });

  it('delivers the same event twice on request (duplicate delivery)', async () => {
    const hook = await receiver();
    const sb = await sandbox();
    const stripe = client(sb);
    const refund = sb.seedRefund({ amount: 100, currency: 'usd', metadata: { recon_operation_id: 'op-9' } });
    const event = sb.eventFor('charge.refund.updated', refund);
    expect(await sb.deliverWebhook(hook.url, event, 2)).toEqual([200, 200]);
    const parsed = hook.got.map((d) => stripe.webhooks.constructEvent(d.body, d.signature, sb.webhookSecret));
    expect(parsed.map((e) => e.id)).toEqual([event.id, event.id]);
    expect(parsed[0]).toMatchObject({ object: 'event', type: 'charge.refund.updated', livemode: false });
    expect(() => sb.eventFor('refund.exploded', refund)).toThrow(/event type/);
  });
});

describe('stripe sandbox: GET /v1/events', () => {
  it('lists the events it made, newest first, by type and created, page by page, with or without a webhook endpoint', async () => {
    let clock = 1_800_000_000_000;
    const sb = await sandbox({ now: () => clock });
    const stripe = client(sb);
    const { payment_intent } = sb.seedPaymentIntent({ amount: 50_000, currency: 'usd' });
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      sb.faults.inject({ kind: 'initial_status', status: 'pending' });
      const refund = await stripe.refunds.create({ payment_intent, amount: 100 }, { idempotencyKey: `ev${i}` });
      made.push(refund.id);
      clock += 1000;
    }
    const since = Math.floor(clock / 1000);
    sb.setRefundStatus(made[1], 'succeeded');
    sb.setRefundStatus(made[3], 'failed');
    const all = sb.events();
    // 5 created, 2 updated, 1 failed: kept though no webhook endpoint was set.
    expect(all.map((e) => e.type)).toEqual([
      ...Array<string>(5).fill('refund.created'),
      'refund.updated',
      'refund.updated',
      'refund.failed',
    ]);

    const updates = await stripe.events.list({ types: ['refund.updated', 'refund.failed'], created: { gte: since } });
    expect(updates.data.map((e) => [e.type, (e.data.object as Stripe.Refund).id])).toEqual([
      ['refund.failed', made[3]],
      ['refund.updated', made[3]],
      ['refund.updated', made[1]],
    ]);
    expect((updates.data[1].data.object as Stripe.Refund).status).toBe('failed');
    expect(updates.has_more).toBe(false);

    // Two at a time, newest first, as the SDK pages with starting_after: every event once.
    const paged = await stripe.events.list({ type: 'refund.*', limit: 2 }).autoPagingToArray({ limit: 100 });
    expect(paged.map((e) => e.id)).toEqual([...all].reverse().map((e) => e.id));
    const created = await stripe.events.list({ type: 'refund.created', created: { lt: since - 2 } });
    expect(created.data.map((e) => (e.data.object as Stripe.Refund).id)).toEqual([made[2], made[1], made[0]]);
    const newer = await stripe.events.list({ ending_before: all[0].id, limit: 3 });
    expect(newer.data.map((e) => e.id)).toEqual([all[3].id, all[2].id, all[1].id]);
    expect(newer.has_more).toBe(true);

    const both = await caught(stripe.events.list({ type: 'refund.created', types: ['refund.updated'] }));
    expect([both.statusCode, both.type, both.param]).toEqual([400, 'StripeInvalidRequestError', 'types']);
    const missing = await caught(stripe.events.list({ starting_after: 'evt_missing' }));
    expect([missing.statusCode, missing.code]).toEqual([404, 'resource_missing']);
    // 1 + 4 pages of 2 + 4.
    expect(sb.stats.byRoute['GET /v1/events']).toBe(9);
  });
});
