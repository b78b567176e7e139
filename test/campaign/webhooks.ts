/**
 * Webhooks as Stripe delivers them on a bad day: every event the sandbox emits (and a
 * `refund.created` for each refund planted behind recon's back) is delivered once, or two or three
 * times (sometimes at once), sometimes rounds later than newer events about the same refund, and
 * now and then a forged copy arrives: signed with another secret, tampered after signing, too old
 * for the tolerance, or with a garbage header. Signatures are computed as Stripe documents them
 * (src/sandbox/stripe/webhooks.ts: HMAC-SHA256 over `${t}.${body}`), fresh at each delivery.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { StripeEvent, StripeSandbox } from '../../src/sandbox/stripe/server.js';
import type { Prng } from './prng.js';

export type BadSignature = 'wrong_secret' | 'tampered' | 'expired' | 'garbage';
const BAD: BadSignature[] = ['wrong_secret', 'tampered', 'expired', 'garbage'];
/** Redeliveries of a refused event within a campaign (Stripe keeps trying for three days). */
const MAX_RETRIES = 3;

/** Delivers one body with one Stripe-Signature header; `accepted` = 2xx / exit 0. */
export type Deliver = (
  body: string,
  signature: string,
) => Promise<{ accepted: boolean; code: number | null; output: string }>;

interface Queued {
  event: StripeEvent;
  seq: number;
  refundId: string;
  /** Deliver in this round or later. */
  dueRound: number;
  times: number;
  concurrent: boolean;
  forged: BadSignature | null;
  /** Redeliveries after a refusal so far (Stripe retries a non-2xx answer, with backoff, for days). */
  retries: number;
}

export interface DeliveryRecord {
  event_id: string;
  refund_id: string;
  type: string;
  /** Valid deliveries made, and how many were accepted. */
  deliveries: number;
  accepted: number;
  failures: { code: number | null; output: string }[];
}

export interface ForgedRecord {
  event_id: string;
  kind: BadSignature;
  code: number | null;
  accepted: boolean;
  output: string;
}

export interface WebhookStats {
  events: number;
  deliveries: number;
  duplicate_deliveries: number;
  out_of_order: number;
  /** Redeliveries of events the receiver refused, as Stripe retries them. */
  retries: number;
  bad_signature: number;
  bad_signature_by_kind: Record<string, number>;
}

export class WebhookDesk {
  private emittedSeen = 0;
  private seq = 0;
  private queue: Queued[] = [];
  private readonly newestDelivered = new Map<string, number>();
  readonly records = new Map<string, DeliveryRecord>();
  readonly forged: ForgedRecord[] = [];
  readonly stats: WebhookStats = {
    events: 0,
    deliveries: 0,
    duplicate_deliveries: 0,
    out_of_order: 0,
    retries: 0,
    bad_signature: 0,
    bad_signature_by_kind: {},
  };

  constructor(
    private readonly stripe: StripeSandbox,
    private readonly r: Prng,
    private readonly deliver: Deliver,
    private readonly parallel: boolean,
  ) {}

  /** Takes the events the sandbox emitted since the last call into the queue. */
  collect(round: number): void {
    const emitted = this.stripe.events();
    for (const event of emitted.slice(this.emittedSeen)) this.add(event, round);
    this.emittedSeen = emitted.length;
  }

  /** Queues an event (the sandbox's, or one built for a planted refund), drawing how it will be delivered. */
  add(event: StripeEvent, round: number): void {
    this.stats.events++;
    const times = this.r.chance(0.7) ? 1 : this.r.chance(0.66) ? 2 : 3;
    this.queue.push({
      event,
      seq: ++this.seq,
      refundId: event.data.object.id,
      dueRound: round + (this.r.chance(0.3) ? this.r.int(1, 2) : 0),
      times,
      concurrent: this.parallel && times > 1 && this.r.chance(0.5),
      forged: null,
      retries: 0,
    });
    if (this.r.chance(0.12)) {
      this.queue.push({
        event: { ...structuredClone(event), id: `evt_forged_${randomBytes(9).toString('hex')}` },
        seq: this.seq,
        refundId: event.data.object.id,
        dueRound: round,
        times: 1,
        concurrent: false,
        forged: this.r.pick(BAD),
        retries: 0,
      });
    }
  }

  /** Delivers what is due by `round` (everything with Infinity), in a shuffled order. */
  async deliverDue(round: number, concurrency: number): Promise<void> {
    const due = this.r.shuffle(this.queue.filter((q) => q.dueRound <= round));
    this.queue = this.queue.filter((q) => q.dueRound > round);
    let next = 0;
    const lanes = Array.from({ length: Math.max(1, concurrency) }, async () => {
      while (next < due.length) await this.one(due[next++], round);
    });
    await Promise.all(lanes);
  }

  pending(): number {
    return this.queue.length;
  }

  private async one(q: Queued, round: number): Promise<void> {
    const body = JSON.stringify(q.event, null, 2);
    if (q.forged) {
      const signature = this.forge(q.forged, body);
      const sent = q.forged === 'tampered' ? tamper(body) : body;
      const r = await this.deliver(sent, signature);
      this.stats.bad_signature++;
      this.stats.bad_signature_by_kind[q.forged] = (this.stats.bad_signature_by_kind[q.forged] ?? 0) + 1;
      this.forged.push({ event_id: q.event.id, kind: q.forged, code: r.code, accepted: r.accepted, output: r.output });
      return;
    }
    const newest = this.newestDelivered.get(q.refundId) ?? 0;
    if (q.seq < newest) this.stats.out_of_order++;
    this.newestDelivered.set(q.refundId, Math.max(newest, q.seq));
    const record = this.records.get(q.event.id) ?? {
      event_id: q.event.id,
      refund_id: q.refundId,
      type: q.event.type,
      deliveries: 0,
      accepted: 0,
      failures: [],
    };
    this.records.set(q.event.id, record);
    let refused = false;
    const once = async () => {
      const r = await this.deliver(body, this.stripe.signPayload(body));
      this.stats.deliveries++;
      record.deliveries++;
      if (r.accepted) record.accepted++;
      else {
        refused = true;
        record.failures.push({ code: r.code, output: r.output.slice(0, 800) });
      }
    };
    this.stats.duplicate_deliveries += q.times - 1;
    if (q.concurrent) await Promise.all(Array.from({ length: q.times }, once));
    else for (let i = 0; i < q.times; i++) await once();
    if (refused && q.retries < MAX_RETRIES) {
      this.stats.retries++;
      const next = Number.isFinite(round) ? round + 1 : round;
      this.queue.push({ ...q, times: 1, concurrent: false, dueRound: next, retries: q.retries + 1 });
    }
  }

  private forge(kind: BadSignature, body: string): string {
    const now = Math.floor(Date.now() / 1000);
    switch (kind) {
      case 'wrong_secret': {
        const sig = createHmac('sha256', 'whsec_not_the_secret').update(`${now}.${body}`).digest('hex');
        return `t=${now},v1=${sig}`;
      }
      case 'tampered':
        return this.stripe.signPayload(body);
      case 'expired':
        // Stripe's default tolerance is 300 s (stripe.webhooks.constructEvent).
        return this.stripe.signPayload(body, now - 3_600);
      case 'garbage':
        return `t=${now},v0=${randomBytes(32).toString('hex')}`;
    }
  }
}

/** The body changed after signing: a larger refund amount. */
function tamper(body: string): string {
  const event = JSON.parse(body) as StripeEvent;
  event.data.object.amount += 100;
  return JSON.stringify(event, null, 2);
}
