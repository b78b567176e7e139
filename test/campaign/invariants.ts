/**
 * The campaign's invariants, checked against the provider's ledger (SPEC §1.7) and the store:
 *
 *  one_effect          at most one side effect made by recon per operation (planted ones aside)
 *  final_state         every operation ends confirmed, failed or needs_review
 *  confirmed_link      a confirmed operation links exactly one live transaction (not failed or
 *                      canceled: those moved no money and may stay linked as evidence), which
 *                      exists at the provider, succeeded, with the operation's amount and currency
 *  failed_live_effect  a failed operation has no live side effect made by recon at the provider
 *  review_left         once in needs_review, only a person's decision moves an operation (SPEC §3):
 *                      `review resolve` or `attach` by a person actor; a person's `lookup` does not
 *  terminal_left       a terminal state is never left, except → needs_review: from confirmed
 *                      (duplicate), from failed (duplicate or mismatch: a live transaction)
 *  webhook_refused     a validly signed event is never refused (Stripe would retry it; the
 *                      campaign does, three times, so the final state reflects it)
 *  webhook_dedup       one row per accepted event, its redeliveries counted as duplicates
 *  bad_signature       a badly signed webhook is refused and leaves no trace
 *  audit_verify        `recon audit verify` is ok
 *  audit_duplicates    `recon audit duplicates` equals the oracle computed from the ledger
 *
 * and, recorded while the processes run (processes.ts): process_exit (an exit code the command
 * does not document for the situation) and run_error (an operation `recon run` could not
 * reconcile: a provider that errors must be an `unavailable` observation, SPEC §4.6).
 */
import type { Queryable } from '../../src/store/db.js';
import type { Refund } from '../../src/sandbox/stripe/server.js';
import type { Shipment } from '../../src/sandbox/warehouse/server.js';
import { duplicatesOracle, groupKey, type DuplicateGroup } from './oracle.js';
import type { DeliveryRecord, ForgedRecord } from './webhooks.js';
import type { JsonDoc } from '../support/cli.js';

export interface Violation {
  invariant: string;
  operation_id: string | null;
  evidence: unknown;
}

export interface CheckInput {
  db: Queryable;
  refunds: Refund[];
  shipments: Shipment[];
  /** Provider ids of everything planted behind recon's back. */
  planted: Set<string>;
  deliveries: DeliveryRecord[];
  forged: ForgedRecord[];
  /** `audit verify --json` and its exit code. */
  verify: { code: number | null; json: JsonDoc; stderr: string };
  /** `audit duplicates --json` runs to compare with the oracle, by label. */
  duplicates: Record<string, { code: number | null; json: JsonDoc; stderr: string }>;
  isPerson(actor: string): boolean;
  /** Violations seen while the processes ran (exit codes, run errors), reported with the others. */
  seen: Violation[];
}

interface OpRow {
  id: string;
  provider: string;
  state: string;
  amount: string | number | null;
  currency: string | null;
  idempotency_key: string;
  review_reason: string | null;
  lease_owner: string | null;
  lease_expires_at: Date | null;
}

const LIVE_REFUND = (status: string) => status !== 'failed' && status !== 'canceled';
const LIVE_SHIPMENT = (status: string) => status !== 'rejected';
const TERMINAL = new Set(['confirmed', 'failed', 'cancelled']);
/** The audit event kinds of the commands by which a person decides (review resolve, attach). */
const PERSON_DECISIONS = new Set(['review.resolved', 'attached']);

export async function checkInvariants(c: CheckInput): Promise<Violation[]> {
  const out: Violation[] = [...c.seen];
  const add = (invariant: string, operation_id: string | null, evidence: unknown) =>
    out.push({ invariant, operation_id, evidence });

  const ops = (await c.db.query<OpRow>('SELECT * FROM recon.operations ORDER BY id')).rows;
  const txns = (
    await c.db.query<{
      operation_id: string;
      provider: string;
      provider_id: string;
      linked_via: string;
      linked_by: string;
    }>('SELECT operation_id, provider, provider_id, linked_via, linked_by FROM recon.provider_transactions')
  ).rows;
  const events = (
    await c.db.query<{
      operation_id: string;
      seq: number;
      actor: string;
      kind: string;
      from_state: string | null;
      to_state: string | null;
      rule: string | null;
      detail: unknown;
    }>(
      'SELECT operation_id, seq, actor, kind, from_state, to_state, rule, detail FROM recon.audit_events ORDER BY operation_id, seq',
    )
  ).rows;
  const linkedTo = groupBy(txns, (t) => t.operation_id);
  const eventsOf = groupBy(events, (e) => e.operation_id);
  const refundById = new Map(c.refunds.map((r) => [r.id, r]));
  const shipmentById = new Map(c.shipments.map((s) => [s.id, s]));

  for (const op of ops) {
    const linked = linkedTo.get(op.id) ?? [];
    const stripe = op.provider === 'stripe';
    const made = stripe
      ? c.refunds.filter((r) => r.metadata.recon_operation_id === op.id && !c.planted.has(r.id))
      : c.shipments.filter((s) => s.idempotency_key === op.idempotency_key && !c.planted.has(s.id));
    const brief = (x: Refund | Shipment) =>
      stripe
        ? { id: x.id, amount: (x as Refund).amount, currency: x.currency, status: x.status }
        : { id: x.id, status: x.status, client_reference: (x as Shipment).client_reference };

    if (made.length > 1) add('one_effect', op.id, { made_by_recon: made.map(brief) });
    if (!['confirmed', 'failed', 'needs_review'].includes(op.state)) {
      add('final_state', op.id, {
        state: op.state,
        lease_owner: op.lease_owner,
        lease_expires_at: op.lease_expires_at,
        linked: linked.map((t) => t.provider_id),
      });
    }
    if (op.state === 'confirmed') {
      const problems: string[] = [];
      const heldOf = (t: { provider_id: string }) =>
        stripe ? refundById.get(t.provider_id) : shipmentById.get(t.provider_id);
      const live = linked.filter((t) => {
        const held = heldOf(t);
        return !held || (stripe ? LIVE_REFUND(held.status) : LIVE_SHIPMENT(held.status));
      });
      if (live.length !== 1) problems.push(`${live.length} live transactions linked (${linked.length} in all)`);
      for (const t of live) {
        const held = heldOf(t);
        if (!held) {
          problems.push(`${t.provider_id} does not exist at the provider`);
          continue;
        }
        if (stripe) {
          const r = held as Refund;
          if (r.amount !== Number(op.amount)) problems.push(`${r.id} amount ${r.amount} vs ${op.amount}`);
          if (r.currency.toLowerCase() !== (op.currency ?? '').toLowerCase())
            problems.push(`${r.id} currency ${r.currency} vs ${op.currency}`);
          if (r.status !== 'succeeded') problems.push(`${r.id} status ${r.status}`);
        } else if (!['created', 'shipped'].includes(held.status)) {
          problems.push(`${held.id} status ${held.status}`);
        }
      }
      if (problems.length) {
        add('confirmed_link', op.id, {
          problems,
          linked: linked.map((t) => {
            const held = stripe ? refundById.get(t.provider_id) : shipmentById.get(t.provider_id);
            return { ...t, at_provider: held ? brief(held) : null };
          }),
        });
      }
    }
    if (op.state === 'failed') {
      const live = made.filter((x) => (stripe ? LIVE_REFUND(x.status) : LIVE_SHIPMENT(x.status)));
      if (live.length) add('failed_live_effect', op.id, { live: live.map(brief) });
    }

    let reviewedSince: { seq: number; actor: string; rule: string | null } | null = null;
    for (const e of eventsOf.get(op.id) ?? []) {
      const moved = e.from_state !== null && e.to_state !== null && e.from_state !== e.to_state;
      const decidedByPerson = c.isPerson(e.actor) && PERSON_DECISIONS.has(e.kind);
      if (moved && e.from_state === 'needs_review' && !decidedByPerson) {
        add('review_left', op.id, {
          entered_review: reviewedSince,
          event: { seq: e.seq, actor: e.actor, kind: e.kind, rule: e.rule, to_state: e.to_state, detail: e.detail },
          final_state: op.state,
          linked: linked.map((t) => t.provider_id),
        });
      }
      // The ways out of a terminal state (states.ts): confirmed → needs_review (a duplicate), failed →
      // needs_review (a live transaction contradicts it), for those review reasons only.
      const reviewReason = (e.detail as { review_reason?: string } | null)?.review_reason;
      const toReview =
        e.to_state === 'needs_review' &&
        ((e.from_state === 'confirmed' && reviewReason === 'duplicate') ||
          (e.from_state === 'failed' && (reviewReason === 'duplicate' || reviewReason === 'mismatch')));
      if (moved && TERMINAL.has(e.from_state!) && !toReview) {
        add('terminal_left', op.id, {
          event: { seq: e.seq, actor: e.actor, kind: e.kind, from: e.from_state, to: e.to_state },
        });
      }
      if (e.to_state === 'needs_review' && e.from_state !== 'needs_review') {
        reviewedSince = { seq: e.seq, actor: e.actor, rule: e.rule };
      }
    }
  }

  const rows = new Map(
    (
      await c.db.query<{ event_id: string; duplicate_count: number }>(
        `SELECT event_id, duplicate_count FROM recon.webhook_events WHERE provider = 'stripe'`,
      )
    ).rows.map((r) => [r.event_id, Number(r.duplicate_count)]),
  );
  const opOfRefund = (id: string) => refundById.get(id)?.metadata.recon_operation_id ?? null;
  for (const d of c.deliveries) {
    if (d.failures.length > 0) {
      add('webhook_refused', opOfRefund(d.refund_id), { event: d.event_id, type: d.type, refused: d.failures });
    }
    const count = rows.get(d.event_id);
    if (d.accepted > 0 && count !== d.accepted - 1) {
      add('webhook_dedup', opOfRefund(d.refund_id), {
        event: d.event_id,
        accepted: d.accepted,
        stored_duplicate_count: count ?? 'no row',
      });
    }
  }
  for (const f of c.forged) {
    if (f.accepted || rows.has(f.event_id)) {
      add('bad_signature', null, {
        event: f.event_id,
        kind: f.kind,
        exit: f.code,
        recorded: rows.has(f.event_id),
        output: f.output.slice(0, 300),
      });
    }
  }

  if (c.verify.code !== 0 || c.verify.json?.ok !== true) {
    add('audit_verify', null, { exit: c.verify.code, report: c.verify.json ?? c.verify.stderr.slice(0, 500) });
  }
  const expected = duplicatesOracle(c.refunds);
  for (const [label, run] of Object.entries(c.duplicates)) {
    const reported: DuplicateGroup[] | null = Array.isArray(run.json?.duplicates)
      ? run.json.duplicates.map((d: JsonDoc) => ({
          kind: d.kind,
          ids: d.transactions.map((t: JsonDoc) => t.provider_id),
        }))
      : null;
    if (!reported || ![0, 8].includes(run.code ?? -1)) {
      add('audit_duplicates', null, { run: label, exit: run.code, stderr: run.stderr.slice(0, 500) });
      continue;
    }
    const want = new Map(expected.map((g) => [groupKey(g), g]));
    const got = new Map(reported.map((g) => [groupKey(g), g]));
    const opIdOf = (g: DuplicateGroup) => g.ids.map(opOfRefund).find((x) => x !== null) ?? null;
    for (const [k, g] of want) if (!got.has(k)) add('audit_duplicates', opIdOf(g), { run: label, missing: g });
    for (const [k, g] of got) if (!want.has(k)) add('audit_duplicates', opIdOf(g), { run: label, unexpected: g });
  }
  // Each operation's audit trail, compact, as evidence: who moved it, how, by which rule.
  for (const v of out) {
    if (!v.operation_id || typeof v.evidence !== 'object' || v.evidence === null) continue;
    (v.evidence as Record<string, unknown>).trail = (eventsOf.get(v.operation_id) ?? []).map(
      (e) => `${e.seq} ${e.actor} ${e.kind} ${e.from_state}→${e.to_state}${e.rule ? ` (${e.rule})` : ''}`,
    );
  }
  return out;
}

function groupBy<T>(items: T[], key: (t: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const t of items) m.set(key(t), [...(m.get(key(t)) ?? []), t]);
  return m;
}
