/**
 * A randomized fault campaign (issue 10): N operations recorded and submitted through the CLI
 * (submits and workers as processes of the built binary, one-shot commands in process) under
 * seeded faults of every sandbox kind on submits and lookups; `recon run` workers (2–4 at once on
 * PostgreSQL; one at a time on PGlite, which admits one process) SIGKILLed at random;
 * webhooks duplicated, late and forged; refunds planted at the provider; pending refunds made
 * final. Then the invariants of invariants.ts are checked against the sandbox ledgers.
 *
 * Phases: record → plant (early) → submit (some submits killed mid-request) → rounds of workers,
 * webhooks, plants and status changes → settle (faults off, passes until nothing is open) → late
 * plants and webhooks → settle → audits → invariants.
 */
import { performance } from 'node:perf_hooks';
import type { Fault, FaultQueue, SandboxFaults } from '../../src/sandbox/faults.js';
import type { Refund } from '../../src/sandbox/stripe/server.js';
import { openStore } from '../../src/store/open.js';
import { checkInvariants, type Violation } from './invariants.js';
import { makePlan, type Plan, type PlannedOp, type PlantWhen } from './plan.js';
import { Prng } from './prng.js';
import { lanes, Processes, sleep } from './processes.js';
import { WebhookDesk, type WebhookStats } from './webhooks.js';
import { startCampaignWorld, type CampaignWorld } from './world.js';

export interface CampaignOptions {
  seed: number;
  ops: number;
  db: 'postgres' | 'pglite';
  /** Base URL of the PostgreSQL server for `db: postgres`. */
  pgBaseUrl?: string;
  /** Progress lines (stderr for the CLI). */
  log?: (line: string) => void;
  /** The on-call person runs `recon lookup` on a few operations in review. Default true. */
  personLookups?: boolean;
  /** On PostgreSQL, deliver webhooks while the first submits run. Default true. */
  webhooksDuringSubmit?: boolean;
  /**
   * How long each settle phase may take before the open operations are reported. Default 30 s:
   * ten leases (3 s), thirty uncertainty windows (1 s).
   */
  settleMs?: number;
}

export interface CampaignSummary {
  seed: number;
  db: 'postgres' | 'pglite';
  ops: { total: number; stripe: number; warehouse: number };
  /** Faults actually applied, by kind: `submit.*` by the sandboxes, `lookup.*` by the proxies. */
  faults: Record<string, number>;
  kills: { workers: number; submits: number };
  /** Worker results refused because the worker's lease had expired (SPEC §3; not a violation). */
  lease_lost: number;
  workers: { runs: number; rounds: number; max_concurrent: number; exits: Record<string, number> };
  webhooks: WebhookStats;
  planted: Record<string, number>;
  status_changes: { refunds: number; shipments: number };
  settle_passes: number;
  /** `recon lookup` by a person on operations in review (which must not move them). */
  person_lookups: number;
  final_states: Record<string, number>;
  review_reasons: Record<string, number>;
  ledger: { refunds: number; shipments: number; planted: number };
  duplicates_reported: number;
  violations: Violation[];
  violations_by_invariant: Record<string, number>;
  duration_ms: number;
}

const PERSON_PREFIX = 'person:';
const MIN_SETTLE_PASSES = 6;

export async function runCampaign(o: CampaignOptions): Promise<CampaignSummary> {
  const started = performance.now();
  const say = o.log ?? (() => {});
  const log = (line: string) => say(`${((performance.now() - started) / 1000).toFixed(1)}s ${line}`);
  const plan = makePlan(o.seed, o.ops, o.db);
  const world = await startCampaignWorld({ db: o.db, pgBaseUrl: o.pgBaseUrl });
  const c = new Campaign(plan, world, o, log);
  try {
    return await c.run(started);
  } finally {
    await c.procs.stopServe();
    await world.close();
  }
}

class Campaign {
  private readonly r: Prng;
  private readonly faults: Record<string, number> = {};
  private readonly planted = new Set<string>();
  private readonly plantedByKind: Record<string, number> = {};
  readonly procs: Processes;
  private readonly kills = { workers: 0, submits: 0 };
  private readonly workers = { runs: 0, rounds: 0, max_concurrent: 0, exits: {} as Record<string, number> };
  private readonly statusChanges = { refunds: 0, shipments: 0 };
  private readonly paymentIntents: { payment_intent: string; charge: string }[] = [];
  private readonly desk: WebhookDesk;
  private settlePasses = 0;
  private personLookupCount = 0;

  constructor(
    private readonly plan: Plan,
    private readonly world: CampaignWorld,
    private readonly o: CampaignOptions,
    private readonly log: (line: string) => void,
  ) {
    // Runtime draws (status changes, webhook delivery) come from their own stream: the plan stays the seed's.
    this.r = new Prng(plan.seed ^ 0x5a5a5a5a);
    this.procs = new Processes(world, o.db);
    countTaken(world.stripe.faults, this.faults);
    countTaken(world.warehouse.faults, this.faults);
    this.desk = new WebhookDesk(world.stripe, this.r.fork(), this.procs.deliverer(), o.db === 'postgres');
  }

  async run(started: number): Promise<CampaignSummary> {
    const { plan, world } = this;
    for (const pi of plan.paymentIntents) {
      this.paymentIntents.push(world.stripe.seedPaymentIntent({ amount: 10_000_000, currency: pi.currency }));
    }
    await this.record();
    for (const op of plan.ops) this.injectFaults(op);
    this.plantAll('early', 0);
    if (this.o.db === 'postgres') await this.procs.startServe();
    await this.submitAll();
    for (let round = 0; round < plan.rounds.length; round++) await this.round(round);
    this.log('settle: faults off, passes until nothing is open');
    world.stripeProxy.clear();
    world.warehouseProxy.clear();
    world.stripe.faults.clear();
    world.warehouse.faults.clear();
    await this.settle(plan.rounds.length);
    this.log('late: refunds planted after everything settled, and their webhooks');
    this.plantAll('late', plan.rounds.length + 1);
    await this.settle(plan.rounds.length + 1);
    if (this.o.personLookups ?? true) await this.personLooksUp();
    await this.procs.stopServe();

    this.log('audits');
    const verify = await this.procs.cli(['audit', 'verify', '--json']);
    const incremental = await this.procs.cli(['audit', 'duplicates', '--json']);
    const full = await this.procs.cli(['audit', 'duplicates', '--full', '--json']);
    const refunds = world.stripe.refunds();
    const shipments = world.warehouse.shipments();
    const db = await openStore(world.storeUrl);
    let violations: Violation[];
    let finalStates: Record<string, number>;
    let reviewReasons: Record<string, number>;
    try {
      violations = await checkInvariants({
        db,
        refunds,
        shipments,
        planted: this.planted,
        deliveries: [...this.desk.records.values()],
        forged: this.desk.forged,
        verify,
        duplicates: { incremental, full },
        isPerson: (actor) => actor.startsWith(PERSON_PREFIX),
        seen: this.procs.errors,
      });
      const rows = (
        await db.query<{ state: string; review_reason: string | null }>(
          'SELECT state, review_reason FROM recon.operations',
        )
      ).rows;
      finalStates = tally(rows.map((r) => r.state));
      reviewReasons = tally(rows.filter((r) => r.state === 'needs_review').map((r) => r.review_reason ?? '(none)'));
    } finally {
      await db.close();
    }
    return {
      seed: plan.seed,
      db: this.o.db,
      ops: {
        total: plan.ops.length,
        stripe: plan.ops.filter((x) => x.provider === 'stripe').length,
        warehouse: plan.ops.filter((x) => x.provider === 'warehouse').length,
      },
      faults: sortKeys({
        ...this.faults,
        ...prefixed('lookup.', world.stripeProxy.applied, world.warehouseProxy.applied),
      }),
      kills: this.kills,
      lease_lost: this.procs.leaseLost.length,
      workers: this.workers,
      webhooks: this.desk.stats,
      planted: this.plantedByKind,
      status_changes: this.statusChanges,
      settle_passes: this.settlePasses,
      person_lookups: this.personLookupCount,
      final_states: finalStates,
      review_reasons: reviewReasons,
      ledger: { refunds: refunds.length, shipments: shipments.length, planted: this.planted.size },
      duplicates_reported: Array.isArray(full.json?.duplicates) ? full.json.duplicates.length : -1,
      violations,
      violations_by_invariant: tally(violations.map((v) => v.invariant)),
      duration_ms: Math.round(performance.now() - started),
    };
  }

  // ---- phases ----

  private async record(): Promise<void> {
    const lines = this.plan.ops.map((op) => JSON.stringify(this.operationJson(op))).join('\n');
    const r = await this.procs.cli(['ops', 'record', '-', '--json'], { input: lines });
    if (r.code !== 0) throw new Error(`ops record failed (exit ${r.code}): ${r.stderr}`);
    this.log(`recorded ${this.plan.ops.length} operations`);
  }

  private operationJson(op: PlannedOp): Record<string, unknown> {
    const base = { id: op.id, provider: op.provider, client_reference: op.clientReference, approval: 'CAMPAIGN-1' };
    if (op.provider === 'stripe') {
      const pi = this.paymentIntents[op.paymentIntent!];
      return {
        ...base,
        action: 'refund',
        payload: { payment_intent: pi.payment_intent, amount: op.amount, currency: op.currency },
      };
    }
    return {
      ...base,
      action: 'shipment.create',
      payload: {
        client_reference: op.clientReference,
        sku: 'SKU-7',
        quantity: 1,
        address: { city: 'Lyon', zip: '69001' },
      },
    };
  }

  private injectFaults(op: PlannedOp): void {
    const sandbox = op.provider === 'stripe' ? this.world.stripe : this.world.warehouse;
    for (const f of op.submitFaults) sandbox.faults.inject(f.fault, { idempotencyKey: op.id, times: f.times });
    const proxy = op.provider === 'stripe' ? this.world.stripeProxy : this.world.warehouseProxy;
    const key = op.provider === 'stripe' ? this.paymentIntents[op.paymentIntent!].payment_intent : op.clientReference;
    for (const f of op.lookupFaults) proxy.inject(key, f.kind, f.times);
  }

  private plantAll(when: PlantWhen, round: number, only?: (op: PlannedOp, i: number) => boolean): void {
    this.plan.ops.forEach((op, i) => {
      if (only && !only(op, i)) return;
      for (const p of op.plants.filter((x) => x.when === when)) {
        this.plantedByKind[p.kind] = (this.plantedByKind[p.kind] ?? 0) + 1;
        if (op.provider === 'warehouse') {
          // Someone shipped it by hand: same client reference, no key.
          const s = this.world.warehouse.seedShipment(this.operationJson(op).payload as Record<string, unknown>, {
            status: p.status === 'pending' ? 'processing' : 'created',
          });
          this.planted.add(s.id);
          continue;
        }
        const pi = this.paymentIntents[op.paymentIntent!];
        const metadata: Record<string, string> =
          p.kind === 'lookalike' ? {} : { recon_operation_id: op.id, recon_client_reference: op.clientReference };
        const refund = this.world.stripe.seedRefund({
          payment_intent: pi.payment_intent,
          amount: op.amount! + p.delta,
          currency: op.currency,
          metadata,
          status: p.status,
        });
        this.planted.add(refund.id);
        // Stripe sends refund.created for every refund, whoever made it (the Dashboard, another system).
        this.desk.add(this.world.stripe.eventFor('refund.created', refund), round);
      }
    });
  }

  private async submitAll(): Promise<void> {
    const order = this.r.shuffle(this.plan.ops);
    let submitting = true;
    const submits = lanes(order, this.o.db === 'postgres' ? 4 : 1, async (op) => {
      const { result, killed } = await this.procs.killable(['ops', 'submit', op.id, '--json'], op.killSubmitAfterMs);
      if (killed) this.kills.submits++;
      else this.procs.expectExit('submit', result, op.id);
    }).finally(() => (submitting = false));
    // On PostgreSQL the webhook server runs meanwhile: Stripe sends refund.created at commit, so an
    // event may arrive before the submit's own answer, or while a held request keeps it `submitting`.
    const webhooks = (async () => {
      while (this.o.db === 'postgres' && (this.o.webhooksDuringSubmit ?? true) && submitting) {
        this.desk.collect(0);
        await this.desk.deliverDue(0, 2);
        await sleep(250);
      }
    })();
    await Promise.all([submits, webhooks]);
    // An orchestrator whose submit died before the claim submits again (the operation is still `approved`).
    const left = await this.procs.cli(['ops', 'list', '--state', 'approved', '--limit', '10000', '--json']);
    const ids: string[] = (left.json?.operations ?? []).map((x: { id: string }) => x.id);
    for (const id of ids) this.procs.expectExit('submit', await this.procs.cli(['ops', 'submit', id, '--json']), id);
    this.log(
      `submitted ${this.plan.ops.length} operations (${this.kills.submits} submits killed, ${ids.length} resubmitted)`,
    );
  }

  private async round(round: number): Promise<void> {
    const rounds = this.plan.rounds.length;
    this.plantAll('mid', round, (_op, i) => i % rounds === round);
    this.changeStatuses(0.5);
    this.desk.collect(round);
    const kills = this.plan.rounds[round].killAfterMs;
    this.workers.rounds++;
    if (this.o.db === 'postgres') {
      this.workers.max_concurrent = Math.max(this.workers.max_concurrent, kills.length);
      await Promise.all([...kills.map((k, i) => this.worker(round, i, k)), this.desk.deliverDue(round, 2)]);
    } else {
      this.workers.max_concurrent = Math.max(this.workers.max_concurrent, 1);
      for (let i = 0; i < kills.length; i++) {
        await this.worker(round, i, kills[i]);
        if (i === 0) await this.desk.deliverDue(round, 1);
      }
    }
    if (round === 1) this.procs.expectExit('audit', await this.procs.cli(['audit', 'duplicates', '--json']), null);
    this.log(
      `round ${round + 1}/${rounds}: ${kills.length} workers, ${kills.filter((k) => k !== null).length} with a kill planned`,
    );
  }

  private async worker(round: number, i: number, killAfterMs: number | null): Promise<void> {
    const args = ['run', '--json', '--actor', `job:worker-${round + 1}-${i + 1}`];
    const { result, killed } = await this.procs.killable(args, killAfterMs);
    this.workers.runs++;
    const key = killed ? 'killed' : String(result.code);
    this.workers.exits[key] = (this.workers.exits[key] ?? 0) + 1;
    if (killed) this.kills.workers++;
    else this.procs.expectExit('run', result, null);
  }

  /**
   * Passes until nothing is submitting, pending or outcome_unknown, or until the time is up and at
   * least a few passes were made (a PGlite pass under load takes seconds of its own).
   */
  private async settle(round: number): Promise<void> {
    const deadline = performance.now() + (this.o.settleMs ?? 30_000);
    for (let pass = 1; ; pass++) {
      this.changeStatuses(1);
      this.desk.collect(round);
      await this.desk.deliverDue(Infinity, this.o.db === 'postgres' ? 2 : 1);
      const r = await this.procs.cli(['run', '--json', '--actor', 'job:settle']);
      this.settlePasses++;
      this.procs.expectExit('run', r, null);
      const open = r.json?.unresolved_by_state ?? {};
      const left = (open.submitting ?? 0) + (open.pending ?? 0) + (open.outcome_unknown ?? 0);
      this.desk.collect(round);
      if (left === 0 && this.desk.pending() === 0) {
        await this.desk.deliverDue(Infinity, 1);
        return;
      }
      if (performance.now() > deadline && pass >= MIN_SETTLE_PASSES) {
        const open = (r.json?.decisions ?? []).map((d: { id: string; rule: string }) => `${d.id} ${d.rule}`);
        this.log(`settle: ${left} operations still open when the time was up (${open.join('; ')})`);
        return;
      }
      await sleep(1_100);
    }
  }

  /**
   * The on-call person asks the provider about a few operations in review (`recon lookup`): a
   * person's question, not a decision, so nothing may leave needs_review by it.
   */
  private async personLooksUp(): Promise<void> {
    const inReview = await this.procs.cli(['ops', 'list', '--state', 'needs_review', '--limit', '10000', '--json']);
    const ids: string[] = (inReview.json?.operations ?? []).map((x: { id: string }) => x.id);
    for (const id of this.r.shuffle(ids).slice(0, 3)) {
      this.procs.expectExit(
        'lookup',
        await this.procs.cli(['lookup', id, '--json', '--actor', `${PERSON_PREFIX}oncall`]),
        id,
      );
      this.personLookupCount++;
    }
  }

  /** Pending refunds and processing shipments become final (each with probability p). */
  private changeStatuses(p: number): void {
    for (const refund of this.world.stripe.refunds()) {
      if (refund.status !== 'pending' || !this.r.chance(p)) continue;
      const final = this.r.chance(0.75) ? 'succeeded' : 'failed';
      const after: Refund = this.world.stripe.setRefundStatus(refund.id, final);
      this.statusChanges.refunds++;
      // Stripe also sends charge.refund.updated for a refund's changes.
      if (this.r.chance(0.3)) this.desk.add(this.world.stripe.eventFor('charge.refund.updated', after), 0);
    }
    for (const s of this.world.warehouse.shipments()) {
      if (s.status !== 'processing' || !this.r.chance(p)) continue;
      this.world.warehouse.setShipmentStatus(s.id, this.r.chance(0.75) ? 'shipped' : 'rejected');
      this.statusChanges.shipments++;
    }
  }
}

// ---- helpers ----

function faultLabel(f: Fault): string {
  switch (f.kind) {
    case 'status':
      return `status_${f.status}`;
    case 'delay':
      return f.ms > 1_000 ? 'delay_past_timeout' : 'delay';
    case 'hide':
      return f.drop ? 'hide_then_drop' : 'hide';
    case 'initial_status':
      return `initial_${f.status}`;
    default:
      return f.kind;
  }
}

/** Counts the faults the sandbox really applies (a queued fault a request never met is not a fault injected). */
function countTaken(queue: FaultQueue, into: Record<string, number>): void {
  const sandbox = queue as SandboxFaults;
  const take = sandbox.take.bind(sandbox);
  sandbox.take = (key) => {
    const f = take(key);
    if (f) {
      const label = `submit.${faultLabel(f)}`;
      into[label] = (into[label] ?? 0) + 1;
    }
    return f;
  };
}

function prefixed(prefix: string, ...counts: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of counts) for (const [k, v] of Object.entries(c)) out[prefix + k] = (out[prefix + k] ?? 0) + v;
  return out;
}

function tally(items: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of items) out[x] = (out[x] ?? 0) + 1;
  return sortKeys(out);
}

function sortKeys<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
}
