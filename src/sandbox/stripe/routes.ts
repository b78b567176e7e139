/**
 * The Stripe API routes of the sandbox: refunds (create, retrieve, list), payment intents and
 * charges (enough to seed and inspect), the events it made (list: events.ts), each answering with
 * Stripe's objects and error envelope.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { runCreate, type CreateOutcome, type Fault, type SandboxFaults } from '../faults.js';
import { fingerprint, type FormObject } from '../http.js';
import type { IdempotencyStore } from '../idempotency.js';
import { listEvents } from './events.js';
import type { StripeLedger } from './ledger.js';
import {
  isError,
  missingResource,
  paramError,
  stripeError,
  type EndpointError,
  type Refund,
  type StripeEvent,
} from './types.js';

export interface StripeRouteContext {
  ledger: StripeLedger;
  idempotency: IdempotencyStore;
  faults: SandboxFaults;
  now: () => number;
  apiKey: string;
  defaultRefundStatus: string;
  onListPage(): void;
  onRefundCreated(refund: Refund, requestId: string, idempotencyKey: string | undefined): void;
  /** Every event the sandbox made, in the order made (`GET /v1/events`). */
  events(): readonly StripeEvent[];
}

interface ApiRequest {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  idempotencyKey: string | undefined;
  params: FormObject;
  /** Path parameter (`:id`), when the route has one. */
  id?: string;
  send(status: number, body: unknown, headers?: Record<string, string>): void;
}

type Handler = (ctx: StripeRouteContext, r: ApiRequest) => Promise<void> | void;

const ROUTES: Array<{ method: string; pattern: RegExp; name: string; handler: Handler }> = [
  { method: 'POST', pattern: /^\/v1\/refunds$/, name: 'POST /v1/refunds', handler: createRefund },
  { method: 'GET', pattern: /^\/v1\/refunds$/, name: 'GET /v1/refunds', handler: listRefunds },
  { method: 'GET', pattern: /^\/v1\/refunds\/([^/]+)$/, name: 'GET /v1/refunds/:id', handler: getRefund },
  {
    method: 'POST',
    pattern: /^\/v1\/payment_intents$/,
    name: 'POST /v1/payment_intents',
    handler: createPaymentIntent,
  },
  {
    method: 'GET',
    pattern: /^\/v1\/payment_intents\/([^/]+)$/,
    name: 'GET /v1/payment_intents/:id',
    handler: getPaymentIntent,
  },
  { method: 'GET', pattern: /^\/v1\/charges\/([^/]+)$/, name: 'GET /v1/charges/:id', handler: getCharge },
  {
    method: 'GET',
    pattern: /^\/v1\/events$/,
    name: 'GET /v1/events',
    handler: (ctx, r) => {
      const result = listEvents(ctx.events(), r.params);
      if (isError(result)) return r.send(result.status, result.body);
      r.send(200, { object: 'list', data: result.data, has_more: result.has_more, url: '/v1/events' });
    },
  },
];

export function matchRoute(method: string, path: string): { name: string; handler: Handler; id?: string } | null {
  for (const route of ROUTES) {
    const m = route.method === method ? route.pattern.exec(path) : null;
    if (m) return { name: route.name, handler: route.handler, id: m[1] ? decodeURIComponent(m[1]) : undefined };
  }
  return null;
}

/** The answer for an injected `status` fault: what Stripe's front door sends when no endpoint ran. */
export function faultBody(status: number): unknown {
  if (status === 429) {
    return stripeError(
      'invalid_request_error',
      'Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.',
      { code: 'rate_limit' },
    );
  }
  if (status >= 500) return stripeError('api_error', 'An unknown error occurred (sandbox fault).');
  return stripeError('invalid_request_error', `Sandbox fault: HTTP ${status}.`);
}

async function createRefund(ctx: StripeRouteContext, r: ApiRequest): Promise<void> {
  await runCreate({
    faults: ctx.faults,
    req: r.req,
    res: r.res,
    idempotencyKey: r.idempotencyKey,
    now: () => ctx.now(),
    send: (status, body, headers) => r.send(status, body, headers),
    faultResponse: (status) => ({ body: faultBody(status) }),
    // eslint-disable-next-line @typescript-eslint/require-await -- async so that a synchronous throw becomes a rejection
    execute: async (fault: Fault | undefined) => {
      let created: Refund | undefined;
      const outcome = idempotent(ctx, r, 'POST /v1/refunds', () => {
        const status = fault?.kind === 'initial_status' ? fault.status : ctx.defaultRefundStatus;
        const result = ctx.ledger.createRefund(r.params, status);
        if (isError(result)) return result;
        created = result;
        return { status: 200, body: result, stored: true };
      });
      if (created) {
        const refund = created;
        ctx.onRefundCreated(refund, r.requestId, r.idempotencyKey);
        outcome.hideUntil = (untilMs) => ctx.ledger.hide(refund.id, untilMs);
      }
      return outcome;
    },
  });
}

function listRefunds(ctx: StripeRouteContext, r: ApiRequest): void {
  const result = ctx.ledger.list(r.params);
  if (isError(result)) return r.send(result.status, result.body);
  ctx.onListPage();
  // `expand[]=data.payment_intent`: each refund's payment intent as the object (its `created` bounds
  // where a refund of it can be), as Stripe expands list items.
  const expand = r.params.expand;
  const expanded = (Array.isArray(expand) ? expand : [expand]).includes('data.payment_intent');
  const data = expanded
    ? result.data.map((refund) => {
        const pi = refund.payment_intent ? ctx.ledger.paymentIntents.get(refund.payment_intent) : undefined;
        return pi ? { ...refund, payment_intent: structuredClone(pi) } : refund;
      })
    : result.data;
  r.send(200, { object: 'list', data, has_more: result.has_more, url: '/v1/refunds' });
}

function getRefund(ctx: StripeRouteContext, r: ApiRequest): void {
  const refund = ctx.ledger.getRefund(r.id!);
  if (!refund) return sendError(r, missingResource('refund', r.id!, 'id'));
  r.send(200, refund);
}

function createPaymentIntent(ctx: StripeRouteContext, r: ApiRequest): void {
  const outcome = idempotent(ctx, r, 'POST /v1/payment_intents', () => {
    const amount = r.params.amount;
    const currency = r.params.currency;
    if (typeof amount !== 'string' || !/^\d+$/.test(amount) || Number(amount) <= 0) {
      return paramError('Invalid positive integer', 'amount', 'parameter_invalid_integer');
    }
    if (typeof currency !== 'string' || !/^[a-zA-Z]{3}$/.test(currency)) {
      return paramError('Invalid currency: must be a three-letter ISO code', 'currency', 'parameter_invalid');
    }
    // The sandbox confirms at once, as if paid with a test card: recon only refunds succeeded payments.
    const { payment_intent } = ctx.ledger.seedPaymentIntent({ amount: Number(amount), currency });
    const pi = ctx.ledger.paymentIntents.get(payment_intent)!;
    const metadata = r.params.metadata;
    if (metadata && typeof metadata === 'object' && !Array.isArray(metadata)) {
      pi.metadata = Object.fromEntries(
        Object.entries(metadata).filter(([, v]) => typeof v === 'string' && v !== ''),
      ) as Record<string, string>;
    }
    return { status: 200, body: structuredClone(pi), stored: true };
  });
  outcome.finish();
  r.send(outcome.status, outcome.body, outcome.headers);
}

function getPaymentIntent(ctx: StripeRouteContext, r: ApiRequest): void {
  const pi = ctx.ledger.paymentIntents.get(r.id!);
  if (!pi) return sendError(r, missingResource('payment_intent', r.id!, 'intent'));
  r.send(200, pi);
}

function getCharge(ctx: StripeRouteContext, r: ApiRequest): void {
  const ch = ctx.ledger.charges.get(r.id!);
  if (!ch) return sendError(r, missingResource('charge', r.id!, 'id'));
  r.send(200, ch);
}

interface EndpointResult {
  status: number;
  body: unknown;
  stored: boolean;
}

/**
 * Stripe's idempotency layer around one endpoint run. Without a key the endpoint just runs.
 * Replays carry `Idempotent-Replayed: true` and the original `Request-Id` as `Original-Request`.
 */
function idempotent(
  ctx: StripeRouteContext,
  r: ApiRequest,
  route: string,
  run: () => EndpointResult | EndpointError,
): CreateOutcome {
  const key = r.idempotencyKey;
  const headers: Record<string, string> = key ? { 'Idempotency-Key': key } : {};
  const noop = () => {};
  if (key === undefined) {
    const result = run();
    return { status: result.status, body: result.body, headers, finish: noop };
  }
  if (key.length > 255) {
    const e = paramError(
      'Idempotency keys may be at most 255 characters long.',
      'idempotency_key',
      'parameter_invalid',
    );
    return { status: e.status, body: e.body, headers, finish: noop };
  }
  const begun = ctx.idempotency.begin(ctx.apiKey, key, route, fingerprint(r.params));
  switch (begun.kind) {
    case 'mismatch': {
      const message =
        begun.reason === 'endpoint'
          ? `Keys for idempotent requests can only be used for the same endpoint they were first used for ('${begun.firstRoute}' vs '${route}'). Try using a key other than '${key}' if you meant to execute a different request.`
          : `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`;
      return { status: 400, body: stripeError('idempotency_error', message), headers, finish: noop };
    }
    case 'in_progress':
      return {
        status: 409,
        body: stripeError(
          'idempotency_error',
          `There is currently another in-progress request using this Idempotency Key (that probably means you submitted twice, and the other request is still going through): ${key}. Please try again later.`,
          { code: 'idempotency_key_in_use' },
        ),
        headers,
        finish: noop,
      };
    case 'replay':
      return {
        status: begun.response.status,
        body: begun.response.body,
        headers: { ...headers, 'Idempotent-Replayed': 'true', 'Original-Request': begun.response.requestId },
        finish: noop,
      };
    case 'new': {
      let result: EndpointResult | EndpointError;
      try {
        result = run();
      } catch (err) {
        begun.abandon();
        throw err;
      }
      const snapshot = { status: result.status, body: structuredClone(result.body), requestId: r.requestId };
      const finish = result.stored ? () => begun.complete(snapshot) : () => begun.abandon();
      return { status: result.status, body: result.body, headers, finish };
    }
  }
}

function sendError(r: ApiRequest, e: EndpointError): void {
  r.send(e.status, e.body);
}
