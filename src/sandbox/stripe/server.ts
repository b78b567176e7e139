/**
 * A local Stripe for recon's tests, benchmarks and `recon demo`, driven by the real stripe-node SDK
 * (`new Stripe(key, { host: '127.0.0.1', port, protocol: 'http' })`). It follows Stripe's documented
 * behaviour for refunds, idempotency, pagination, errors and webhook signatures, and adds fault
 * injection and a ledger the tests count (SPEC §1.7: assert on the provider's ledger).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { handleAdmin } from '../admin.js';
import { SandboxFaults, type FaultQueue } from '../faults.js';
import {
  closeServer,
  countStatus,
  listen,
  newStats,
  parseForm,
  parseQuery,
  readBody,
  requestId,
  sendJson,
  sleep,
  TokenBucket,
  type SandboxStats,
} from '../http.js';
import { IdempotencyStore } from '../idempotency.js';
import { StripeLedger, type RefundFilter, type SeedRefund } from './ledger.js';
import { faultBody, matchRoute, type StripeRouteContext } from './routes.js';
import { SANDBOX_API_VERSION, stripeError, type Refund, type StripeEvent } from './types.js';
import { buildEvent, deliver, signPayload } from './webhooks.js';

export type { Refund, StripeEvent } from './types.js';

export interface StripeSandboxOptions {
  /** 0 (default) = a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 'sk_test_sandbox'; requests with another key get 401. */
  apiKey?: string;
  /** Default 'whsec_sandbox'. */
  webhookSecret?: string;
  /** Added to every API request. Default 0. */
  latencyMs?: number;
  /** Requests per second; over it → 429 with `Retry-After` (seconds). Default: unlimited. */
  rateLimit?: number;
  /** When set, refund.created / refund.updated (and refund.failed) events are POSTed there, signed. */
  webhookUrl?: string;
  /** Status of refunds created through the API. Default 'succeeded'. */
  refundStatus?: string;
  /** How long idempotency keys are kept. Default 24h, as Stripe. */
  keyRetentionMs?: number;
  /** Clock (ms) for object timestamps, key retention and `hide`. Default Date.now. */
  now?: () => number;
  /** A refund of an unknown `pi_…` creates it, as stripe-mock accepts any id (see StripeLedger). Default false. */
  acceptAnyPaymentIntent?: boolean;
  /**
   * Routes (as named in `stats.byRoute`, e.g. 'GET /v1/events') the key may not call: answered 403
   * with Stripe's permission error, as for a restricted key without that permission. Default none.
   */
  forbid?: string[];
  /**
   * Called as each API request arrives, before latency and the rate limit (the bench times arrivals),
   * with its `Idempotency-Key` if it has one (the demo counts one operation's requests among others').
   */
  onRequest?: (route: string, idempotencyKey: string | undefined) => void;
}

export interface StripeSandbox {
  url: string;
  port: number;
  apiKey: string;
  webhookSecret: string;
  /** Seed a succeeded payment intent with its charge. */
  seedPaymentIntent(p: { amount: number; currency: string; id?: string }): { payment_intent: string; charge: string };
  /** Insert a refund straight into the ledger (old duplicates, bulk ledgers for audits); no idempotency involved. */
  seedRefund(r: SeedRefund): Refund;
  /** The ledger: every refund the "provider" holds, hidden ones included, oldest first. Tests count this. */
  refunds(filter?: RefundFilter): Refund[];
  faults: FaultQueue;
  /** The routes answered 403 (`forbid`); tests add and remove routes while it runs. */
  forbidden: Set<string>;
  stats: SandboxStats;
  /** Every event the sandbox made (`GET /v1/events` lists them; POSTed to `webhookUrl` when set), in order. */
  events(): StripeEvent[];
  /** Builds a Stripe-Signature header for a payload (for webhook tests). */
  signPayload(payload: string, timestamp?: number): string;
  /** Builds a Stripe Event for a refund (refund.created|refund.updated|refund.failed|charge.refund.updated). */
  eventFor(type: string, refund: Refund): StripeEvent;
  /** POSTs an event to a URL, signed; `times` > 1 delivers the same event id again (duplicate delivery). */
  deliverWebhook(url: string, event: StripeEvent, times?: number): Promise<number[]>;
  /** e.g. pending → succeeded; makes refund.updated (and refund.failed), POSTed when webhookUrl is set. */
  setRefundStatus(id: string, status: string): Refund;
  close(): Promise<void>;
}

export async function startStripeSandbox(opts: StripeSandboxOptions = {}): Promise<StripeSandbox> {
  const now = opts.now ?? Date.now;
  const nowSeconds = () => Math.floor(now() / 1000);
  const apiKey = opts.apiKey ?? 'sk_test_sandbox';
  const webhookSecret = opts.webhookSecret ?? 'whsec_sandbox';
  const ledger = new StripeLedger(now, opts.acceptAnyPaymentIntent ?? false);
  const faults = new SandboxFaults();
  const stats = newStats();
  const bucket = opts.rateLimit ? new TokenBucket(opts.rateLimit) : null;
  const emitted: StripeEvent[] = [];
  const forbidden = new Set(opts.forbid ?? []);
  const deliveries = new Set<Promise<unknown>>();

  const emit = (event: StripeEvent) => {
    // Listed by GET /v1/events whether or not a webhook endpoint is set, as Stripe keeps them.
    emitted.push(event);
    if (!opts.webhookUrl) return;
    // Fire and forget, as Stripe does: a slow webhook endpoint never slows the API answer.
    const p = deliver(opts.webhookUrl, event, webhookSecret, nowSeconds).finally(() => deliveries.delete(p));
    deliveries.add(p);
  };

  const ctx: StripeRouteContext = {
    ledger,
    idempotency: new IdempotencyStore(opts.keyRetentionMs ?? 24 * 3600_000, now),
    faults,
    now,
    apiKey,
    defaultRefundStatus: opts.refundStatus ?? 'succeeded',
    onListPage: () => stats.listPages++,
    onRefundCreated: (refund, reqId, idempotencyKey) =>
      emit(buildEvent('refund.created', refund, nowSeconds(), { requestId: reqId, idempotencyKey })),
    events: () => emitted,
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const reqId = requestId();
    res.setHeader('Request-Id', reqId);
    // The provider's clock, as its objects' `created` (Node would send this machine's).
    res.setHeader('Date', new Date(now()).toUTCString());
    res.setHeader('Stripe-Version', String(req.headers['stripe-version'] ?? SANDBOX_API_VERSION));
    const { path, query } = parseQuery(req.url ?? '/');
    if (path.startsWith('/_sandbox/')) {
      await handleAdmin(req, res, faults, {
        'GET /ledger': (_b, q) => ({ data: ledger.refunds(Object.fromEntries(q)) }),
        'GET /stats': () => stats,
        'GET /events': () => ({ data: emitted }),
        'POST /seed/payment_intent': (b) => ledger.seedPaymentIntent(b as never),
        'POST /seed/refund': (b) => ledger.seedRefund(b as never),
        'POST /refund_status': (b) => api.setRefundStatus(String(b.id), String(b.status)),
      });
      return;
    }
    const method = req.method ?? 'GET';
    const route = matchRoute(method, path);
    const name = route?.name ?? `${method} (unknown)`;
    stats.requests++;
    stats.byRoute[name] = (stats.byRoute[name] ?? 0) + 1;
    const key = req.headers['idempotency-key'];
    const idempotencyKey = typeof key === 'string' && key !== '' ? key : undefined;
    opts.onRequest?.(name, idempotencyKey);
    countStatus(stats, res);
    if (opts.latencyMs) await sleep(opts.latencyMs);
    const send = (status: number, body: unknown, headers?: Record<string, string>) =>
      sendJson(res, status, body, headers);

    const presented = bearerKey(req.headers.authorization);
    if (presented !== apiKey) {
      const message = presented
        ? `Invalid API Key provided: ${presented.slice(0, 8)}${'*'.repeat(Math.max(0, presented.length - 12))}${presented.slice(-4)}`
        : "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').";
      return send(401, stripeError('invalid_request_error', message));
    }
    const wait = bucket?.take() ?? 0;
    if (wait > 0) return send(429, faultBody(429), { 'Retry-After': String(wait) });
    if (route && forbidden.has(route.name)) {
      return send(
        403,
        stripeError(
          'invalid_request_error',
          `The provided key '${presented.slice(0, 8)}…' does not have the required permissions for this endpoint on account 'acct_sandbox'.`,
        ),
      );
    }
    if (!route) {
      return send(
        404,
        stripeError(
          'invalid_request_error',
          `Unrecognized request URL (${method}: ${path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
        ),
      );
    }
    const body = method === 'POST' ? parseForm(await readBody(req)) : query;
    await route.handler(ctx, {
      req,
      res,
      requestId: reqId,
      params: body,
      id: route.id,
      send,
      idempotencyKey,
    });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      sendJson(res, 500, stripeError('api_error', `Sandbox error: ${(err as Error).message}`));
    });
  });
  const host = opts.host ?? '127.0.0.1';
  const port = await listen(server, opts.port ?? 0, host);

  const api: StripeSandbox = {
    url: `http://${host}:${port}`,
    port,
    apiKey,
    webhookSecret,
    seedPaymentIntent: (p) => ledger.seedPaymentIntent(p),
    seedRefund: (r) => ledger.seedRefund(r),
    refunds: (filter) => ledger.refunds(filter),
    faults,
    forbidden,
    stats,
    events: () => [...emitted],
    signPayload: (payload, timestamp) => signPayload(payload, webhookSecret, timestamp ?? nowSeconds()),
    eventFor: (type, refund) => buildEvent(type, refund, nowSeconds()),
    deliverWebhook: (url, event, times = 1) => deliver(url, event, webhookSecret, nowSeconds, times),
    setRefundStatus(id, status) {
      const { refund, previous } = ledger.setStatus(id, status);
      emit(buildEvent('refund.updated', refund, nowSeconds(), { previous }));
      if (status === 'failed') emit(buildEvent('refund.failed', refund, nowSeconds(), { previous }));
      return refund;
    },
    async close() {
      faults.clear();
      await Promise.allSettled([...deliveries]);
      await closeServer(server);
    },
  };
  return api;
}

/** stripe-node sends `Authorization: Bearer KEY`; curl's `-u KEY:` sends Basic. Stripe takes both. */
function bearerKey(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const [scheme, value] = header.split(' ', 2);
  if (scheme?.toLowerCase() === 'bearer') return value;
  if (scheme?.toLowerCase() === 'basic' && value) return Buffer.from(value, 'base64').toString('utf8').split(':')[0];
  return undefined;
}

/** Lines for `recon sandbox stripe` to print: where it listens and how to point recon at it. */
export function stripeSandboxSummary(sb: StripeSandbox): string[] {
  return [
    `Stripe sandbox listening on ${sb.url}`,
    `  point recon at it (the environment wins over recon.config.json for the provider "stripe"):`,
    `  export STRIPE_API_BASE=${sb.url} STRIPE_API_KEY=${sb.apiKey} STRIPE_WEBHOOK_SECRET=${sb.webhookSecret}`,
    `  API key:        ${sb.apiKey}`,
    `  webhook secret: ${sb.webhookSecret}`,
    `  provider config: {"type": "stripe", "apiKey": "${sb.apiKey}", "apiBase": "${sb.url}", "webhookSecret": "${sb.webhookSecret}"}`,
    `  control: POST ${sb.url}/_sandbox/faults · POST ${sb.url}/_sandbox/release · GET ${sb.url}/_sandbox/ledger`,
    `           POST ${sb.url}/_sandbox/seed/payment_intent · POST ${sb.url}/_sandbox/seed/refund`,
  ];
}
