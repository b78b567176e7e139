/**
 * What the Stripe sandbox holds: payment intents, their charges and refunds, with Stripe's rules
 * for refundable amounts and list pagination (docs.stripe.com/api/refunds, /api/pagination).
 */
import { randomId, type FormObject } from '../http.js';
import { endpointError, inRange, listParams, money, parseMetadata, positiveInt, str } from './params.js';
import {
  isError,
  missingResource,
  paramError,
  type Charge,
  type EndpointError,
  type PaymentIntent,
  type Refund,
} from './types.js';

export interface SeedRefund {
  /** Default: a new random `re_…`. */
  id?: string;
  payment_intent?: string;
  charge?: string;
  amount: number;
  currency?: string;
  metadata?: Record<string, string>;
  /** Unix seconds. */
  created?: number;
  status?: string;
}

export interface RefundFilter {
  payment_intent?: string;
  charge?: string;
  metadataOperationId?: string;
}

const CREATE_PARAMS = new Set([
  'amount',
  'charge',
  'currency',
  'customer',
  'expand',
  'instructions_email',
  'metadata',
  'origin',
  'payment_intent',
  'reason',
  'refund_application_fee',
  'reverse_transfer',
]);
const LIST_PARAMS = new Set([
  'charge',
  'created',
  'ending_before',
  'expand',
  'limit',
  'payment_intent',
  'starting_after',
]);
const REASONS = new Set(['duplicate', 'fraudulent', 'requested_by_customer']);
/** Statuses whose amount no longer counts as refunded (Stripe gives the money back to the charge). */
const RETURNED = new Set(['failed', 'canceled']);

interface Stored {
  refund: Refund;
  seq: number;
  hiddenUntil: number;
}

/** The amount (minor units) of a payment intent made up by `acceptAnyPaymentIntent`, at least. */
const ANY_PAYMENT_INTENT_AMOUNT = 1_000_000;

export class StripeLedger {
  readonly paymentIntents = new Map<string, PaymentIntent>();
  readonly charges = new Map<string, Charge>();
  private readonly byId = new Map<string, Stored>();
  /** Newest first by (created, insertion): the order Stripe lists in. */
  private readonly sorted: Stored[] = [];
  private readonly inOrder: Stored[] = [];
  /** The same order per payment intent and per charge, so a filtered list does not scan the whole ledger. */
  private readonly byPaymentIntent = new Map<string, Stored[]>();
  private readonly byCharge = new Map<string, Stored[]>();
  private seq = 0;

  /**
   * `acceptAnyPaymentIntent`: a refund of an unknown `pi_…` creates that payment intent first
   * (succeeded, in the refund's currency, for at least `ANY_PAYMENT_INTENT_AMOUNT`), and listing
   * the refunds of an unknown one is an empty page, as stripe-mock accepts any id. For trying recon
   * by hand with the ids of one's own examples; tests seed what they use.
   */
  constructor(
    private readonly now: () => number,
    private readonly acceptAnyPaymentIntent = false,
  ) {}

  private acceptsUnknown(piId: string): boolean {
    return this.acceptAnyPaymentIntent && /^pi_[A-Za-z0-9_]+$/.test(piId);
  }

  private nowSeconds(): number {
    return Math.floor(this.now() / 1000);
  }

  seedPaymentIntent(p: { amount: number; currency: string; id?: string }): { payment_intent: string; charge: string } {
    if (!Number.isInteger(p.amount) || p.amount <= 0) throw new Error('amount must be a positive integer');
    const created = this.nowSeconds();
    const pi = p.id ?? randomId('pi');
    const ch = randomId('ch');
    const currency = p.currency.toLowerCase();
    this.paymentIntents.set(pi, {
      id: pi,
      object: 'payment_intent',
      amount: p.amount,
      amount_received: p.amount,
      created,
      currency,
      latest_charge: ch,
      livemode: false,
      metadata: {},
      status: 'succeeded',
    });
    this.charges.set(ch, {
      id: ch,
      object: 'charge',
      amount: p.amount,
      amount_captured: p.amount,
      amount_refunded: 0,
      captured: true,
      created,
      currency,
      livemode: false,
      metadata: {},
      paid: true,
      payment_intent: pi,
      refunded: false,
      status: 'succeeded',
    });
    return { payment_intent: pi, charge: ch };
  }

  /** Inserts a refund without Stripe's checks (old duplicates, bulk ledgers); unknown parents are created. */
  seedRefund(r: SeedRefund): Refund {
    let charge = r.charge ? this.charges.get(r.charge) : undefined;
    if (!charge && r.payment_intent) {
      const pi = this.paymentIntents.get(r.payment_intent);
      if (pi) charge = this.charges.get(pi.latest_charge);
    }
    if (!charge) {
      const seeded = this.seedPaymentIntent({ amount: r.amount, currency: r.currency ?? 'usd', id: r.payment_intent });
      charge = this.charges.get(seeded.charge)!;
    }
    if (r.id !== undefined && (!/^re_[A-Za-z0-9_]+$/.test(r.id) || this.byId.has(r.id)))
      throw new Error(`id ${r.id} is taken or not shaped like re_…`);
    return this.insert({
      id: r.id,
      charge,
      amount: r.amount,
      currency: (r.currency ?? charge.currency).toLowerCase(),
      metadata: r.metadata ?? {},
      reason: null,
      status: r.status ?? 'succeeded',
      created: r.created ?? this.nowSeconds(),
    });
  }

  /** `POST /v1/refunds`: validates like Stripe, then commits. */
  createRefund(params: FormObject, status: string): Refund | EndpointError {
    for (const key of Object.keys(params)) {
      if (!CREATE_PARAMS.has(key)) return paramError(`Received unknown parameter: ${key}`, key, 'parameter_unknown');
    }
    const amount = params.amount === undefined ? undefined : positiveInt(params.amount);
    if (amount === null) return paramError('Invalid positive integer', 'amount', 'parameter_invalid_integer');
    const metadata = parseMetadata(params.metadata);
    if (typeof metadata === 'object' && 'error' in metadata) return paramError(metadata.error, 'metadata');
    if (params.reason !== undefined && !(typeof params.reason === 'string' && REASONS.has(params.reason))) {
      return paramError(`Invalid reason: must be one of ${[...REASONS].join(', ')}`, 'reason');
    }
    const piId = str(params.payment_intent);
    const chId = str(params.charge);
    if (!piId && !chId) {
      return paramError(
        'One of the following params should be provided for this request: payment_intent or charge.',
        'payment_intent',
        'parameter_missing',
      );
    }
    // From here on the endpoint is executing: Stripe saves these answers under the idempotency key.
    let charge: Charge | undefined;
    if (piId) {
      if (!this.paymentIntents.has(piId) && this.acceptsUnknown(piId)) {
        const currency = str(params.currency) ?? 'usd';
        this.seedPaymentIntent({ amount: Math.max(amount ?? 0, ANY_PAYMENT_INTENT_AMOUNT), currency, id: piId });
      }
      const pi = this.paymentIntents.get(piId);
      if (!pi) return missingResource('payment_intent', piId, 'payment_intent');
      charge = this.charges.get(pi.latest_charge);
    }
    if (chId) {
      const byCharge = this.charges.get(chId);
      if (!byCharge) return missingResource('charge', chId, 'charge');
      if (charge && charge.id !== byCharge.id) {
        return endpointError(`Charge ${chId} does not belong to PaymentIntent ${piId}.`, 'charge', 'parameter_invalid');
      }
      charge = byCharge;
    }
    const ch = charge!;
    const currency = str(params.currency)?.toLowerCase();
    if (currency && currency !== ch.currency) {
      return endpointError(
        `The currency ${currency} does not match the charge currency ${ch.currency}.`,
        'currency',
        'parameter_invalid',
      );
    }
    const remaining = ch.amount - ch.amount_refunded;
    if (remaining <= 0)
      return endpointError(`Charge ${ch.id} has already been refunded.`, 'charge', 'charge_already_refunded');
    const refundAmount = amount ?? remaining;
    if (refundAmount > remaining) {
      return endpointError(
        `Refund amount (${money(refundAmount, ch.currency)}) is greater than unrefunded amount on charge (${money(remaining, ch.currency)})`,
        'amount',
        'amount_too_large',
      );
    }
    return this.insert({
      charge: ch,
      amount: refundAmount,
      currency: ch.currency,
      metadata: metadata,
      reason: params.reason ?? null,
      status,
      created: this.nowSeconds(),
    });
  }

  private insert(r: {
    id?: string;
    charge: Charge;
    amount: number;
    currency: string;
    metadata: Record<string, string>;
    reason: string | null;
    status: string;
    created: number;
  }): Refund {
    const refund: Refund = {
      id: r.id ?? randomId('re'),
      object: 'refund',
      amount: r.amount,
      balance_transaction: randomId('txn'),
      charge: r.charge.id,
      created: r.created,
      currency: r.currency,
      customer: null,
      metadata: { ...r.metadata },
      payment_intent: r.charge.payment_intent,
      payment_method: null,
      reason: r.reason,
      receipt_number: null,
      source_transfer_reversal: null,
      status: r.status,
      transfer_reversal: null,
    };
    if (!RETURNED.has(r.status)) this.adjustRefunded(r.charge, r.amount);
    const stored: Stored = { refund, seq: ++this.seq, hiddenUntil: 0 };
    this.byId.set(refund.id, stored);
    this.inOrder.push(stored);
    insertNewestFirst(this.sorted, stored);
    if (refund.charge) insertNewestFirst(listFor(this.byCharge, refund.charge), stored);
    if (refund.payment_intent) insertNewestFirst(listFor(this.byPaymentIntent, refund.payment_intent), stored);
    return structuredClone(refund);
  }

  private adjustRefunded(charge: Charge, delta: number): void {
    charge.amount_refunded += delta;
    charge.refunded = charge.amount_refunded >= charge.amount;
  }

  getRefund(id: string): Refund | undefined {
    const s = this.byId.get(id);
    return s ? structuredClone(s.refund) : undefined;
  }

  /** Changes a refund's status; returns the refund after and the fields before (for `previous_attributes`). */
  setStatus(id: string, status: string): { refund: Refund; previous: Partial<Refund> } {
    const s = this.byId.get(id);
    if (!s) throw new Error(`no refund ${id}`);
    const previous: Partial<Refund> = { status: s.refund.status };
    const charge = s.refund.charge ? this.charges.get(s.refund.charge) : undefined;
    if (charge && RETURNED.has(status) !== RETURNED.has(s.refund.status)) {
      this.adjustRefunded(charge, RETURNED.has(status) ? -s.refund.amount : s.refund.amount);
    }
    s.refund.status = status;
    if (status === 'failed') s.refund.failure_reason = 'unknown';
    return { refund: structuredClone(s.refund), previous };
  }

  hide(id: string, untilMs: number): void {
    const s = this.byId.get(id);
    if (s) s.hiddenUntil = untilMs;
  }

  /** The provider's truth, hidden refunds included, in creation order. */
  refunds(filter: RefundFilter = {}): Refund[] {
    return this.inOrder
      .map((s) => s.refund)
      .filter(
        (r) =>
          (!filter.payment_intent || r.payment_intent === filter.payment_intent) &&
          (!filter.charge || r.charge === filter.charge) &&
          (!filter.metadataOperationId || r.metadata.recon_operation_id === filter.metadataOperationId),
      )
      .map((r) => structuredClone(r));
  }

  /** `GET /v1/refunds`: Stripe's cursor pagination over the visible refunds, newest first. */
  list(params: FormObject): { data: Refund[]; has_more: boolean } | EndpointError {
    const common = listParams(params, LIST_PARAMS);
    if (isError(common)) return common;
    const { limit, range, after, before } = common;
    const piId = str(params.payment_intent);
    const chId = str(params.charge);
    if (piId && !this.paymentIntents.has(piId) && !this.acceptsUnknown(piId))
      return { ...missingResource('payment_intent', piId, 'payment_intent'), stored: false };
    if (chId && !this.charges.has(chId)) return { ...missingResource('charge', chId, 'charge'), stored: false };
    const cursorId = after ?? before;
    const cursor = cursorId ? this.byId.get(cursorId) : undefined;
    if (cursorId && !cursor)
      return { ...missingResource('refund', cursorId, after ? 'starting_after' : 'ending_before'), stored: false };

    const t = this.now();
    const matches = (s: Stored) =>
      s.hiddenUntil <= t &&
      (!piId || s.refund.payment_intent === piId) &&
      (!chId || s.refund.charge === chId) &&
      inRange(s.refund.created, range);
    const source = piId ? (this.byPaymentIntent.get(piId) ?? []) : chId ? (this.byCharge.get(chId) ?? []) : this.sorted;
    // Positions are found by binary search on (created, insertion), so a page costs the same at any
    // depth: walking from the head on every page made an audit of a large ledger time the sandbox.
    if (before) {
      // ending_before: the page just newer than the cursor, still newest first.
      const end = prefixLength(source, (s) => newer(s, cursor!));
      const page: Stored[] = [];
      for (let i = end - 1; i >= 0 && page.length <= limit; i--) if (matches(source[i])) page.push(source[i]);
      const has_more = page.length > limit;
      return {
        data: page
          .slice(0, limit)
          .reverse()
          .map((x) => structuredClone(x.refund)),
        has_more,
      };
    }
    const upper = Math.min(range.lt === undefined ? Infinity : range.lt - 1, range.lte ?? Infinity);
    const lower = Math.max(range.gt === undefined ? -Infinity : range.gt + 1, range.gte ?? -Infinity);
    let start = prefixLength(source, (s) => s.refund.created > upper);
    if (cursor)
      start = Math.max(
        start,
        prefixLength(source, (s) => !newer(cursor, s)),
      );
    const data: Refund[] = [];
    let has_more = false;
    for (let i = start; i < source.length; i++) {
      const s = source[i];
      if (s.refund.created < lower) break;
      if (!matches(s)) continue;
      if (data.length === limit) {
        has_more = true;
        break;
      }
      data.push(structuredClone(s.refund));
    }
    return { data, has_more };
  }
}

/** The length of the prefix of `list` whose entries satisfy `inPrefix` (true for a prefix, then false). */
function prefixLength(list: Stored[], inPrefix: (s: Stored) => boolean): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (inPrefix(list[mid])) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Binary insertion keeps a list newest first even when seeds carry older `created` values. */
function insertNewestFirst(list: Stored[], stored: Stored): void {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (newer(list[mid], stored)) lo = mid + 1;
    else hi = mid;
  }
  list.splice(lo, 0, stored);
}

function listFor(index: Map<string, Stored[]>, key: string): Stored[] {
  let list = index.get(key);
  if (!list) index.set(key, (list = []));
  return list;
}

function newer(a: Stored, b: Stored): boolean {
  return a.refund.created !== b.refund.created ? a.refund.created > b.refund.created : a.seq > b.seq;
}
