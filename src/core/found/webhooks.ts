import type { Operation, Provider, State, WebhookEvent } from '../../types.js';
import type { CoreContext } from '../journal/context.js';
import { jsonbArraySql, keepPlan, textArrayParam, type Queryable } from '../../store/db.js';
import { applyFoundTransaction, applyFoundTransactions, type FoundItem } from './apply.js';
import { lockOperation, operationColumns, rowToOperation, type OperationRow } from '../journal/operations.js';
import { NotFoundError } from '../../errors.js';
import type { Outcome } from '../../lib/batch.js';

export interface IngestResult {
  event_id: string;
  type: string;
  duplicate: boolean;
  operation_id: string | null;
  /** What the event did: `transitioned`, `linked`, `noted`, `unmatched`, `duplicate`. */
  effect: string;
  state: State | null;
}

/**
 * Ingests one verified provider event. (provider, event id) is unique: a redelivery is counted
 * as seen and changes nothing. A first delivery is matched to its operation by the
 * transaction's `recon_operation_id`, else by an already-linked provider id, and applied
 * (applyFoundTransaction: never out of needs_review, a second transaction is a duplicate) in the
 * same transaction as the event row.
 */
export async function ingestWebhook(
  ctx: CoreContext,
  provider: Provider,
  body: string,
  signature: string | undefined,
): Promise<IngestResult> {
  if (!provider.parseWebhook) throw new Error(`provider ${provider.name} does not accept webhooks`);
  const event = provider.parseWebhook(body, signature);
  const [r] = await ingestEvents(ctx, [{ provider, event }]);
  if (!r.ok) throw r.error;
  return r.value;
}

/** A verified event (Provider.parseWebhook) from its provider. */
export interface Delivery {
  provider: Provider;
  event: WebhookEvent;
}

/**
 * Ingests verified events together (`webhook serve` groups the deliveries that arrive while a commit
 * is in flight): each as ingestWebhook would, in order, in one transaction of a few statements
 * whatever their number. A redelivery in the same group as its event's first delivery is a
 * duplicate of it, as it would be one transaction later. Each delivery has its own outcome: when the
 * group's transaction fails, nothing of it is kept and each event is ingested again in a transaction
 * of its own, so that an event that cannot be applied fails alone (rolled back: never acknowledged
 * as applied), and the others are applied.
 */
export async function ingestEvents(ctx: CoreContext, deliveries: Delivery[]): Promise<Outcome<IngestResult>[]> {
  try {
    const results = await applyEvents(ctx, deliveries);
    return results.map((value) => ({ ok: true, value }));
  } catch {
    // Whatever failed the group (one bad event, a transaction linked elsewhere meanwhile, a lost
    // connection) is found again, event by event. Should the group have committed after all (an
    // answer lost with the connection), each of its events is now a duplicate: nothing twice.
    const out: Outcome<IngestResult>[] = [];
    for (const d of deliveries) {
      try {
        out.push({ ok: true, value: await applyEvent(ctx, d.provider, d.event) });
      } catch (error) {
        out.push({ ok: false, error });
      }
    }
    return out;
  }
}

/**
 * The operations whose ids `ids` (a query of one column, `id`) gives, locked in id order (so two
 * writers never wait on each other in a cycle), each by its own lookup: a kept plan of `id = ANY($1)`
 * made on a new store scans the table for good (kept-plans.test.ts).
 */
const lockInIdOrder = (ids: string) =>
  `SELECT o.* FROM (SELECT DISTINCT id FROM (${ids}) AS ids ORDER BY id) AS i
    CROSS JOIN LATERAL (SELECT ${operationColumns()} FROM recon.operations WHERE id = i.id FOR UPDATE) AS o`;

/**
 * The group's first statement: the event rows inserted, each first delivery once, and the
 * operations the new ones apply to locked (lockInIdOrder). A new event applies to the operation its transaction names
 * ($7: recon_operation_id), else to the one its transaction is linked to. One row per new event,
 * with its operation's columns (none when there is no such operation). One statement where there
 * were three (the insert, the links' read, the lock): the group's transaction waits for each, and
 * every delivery of the group waits for it. (A new event it finds no operation for, whose
 * transaction names none, has its link read again by a statement of its own: LINKS_OF.)
 *
 * The lock returns the row as it is once granted (READ COMMITTED follows an update it waited for to
 * the row's latest version); what is read after the lock (chain heads, links: apply.ts) is read by
 * the next statement, which begins after it. Kept (keepPlan): parsed and planned once per session
 * rather than at every group (pg's statement log, groups of 10: ~0.45 ms of the server's time a
 * group to parse and plan the insert); each lookup is by a primary key, which a generic plan made on
 * a new store keeps (test/integration/kept-plans.test.ts).
 */
const INSERT_AND_LOCK = keepPlan(`
WITH u AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $5::text[], ${jsonbArraySql(6)}, $7::text[])
    AS u(provider, event_id, type, provider_id, payload, operation_id)
), ins AS (
  INSERT INTO recon.webhook_events (provider, event_id, type, received_at, last_seen_at, provider_id, payload)
  SELECT provider, event_id, type, $4::timestamptz, $4::timestamptz, provider_id, payload FROM u
  ON CONFLICT (provider, event_id) DO NOTHING RETURNING provider, event_id
), fresh AS (
  SELECT u.provider, u.event_id, coalesce(u.operation_id, t.operation_id) AS operation_id
    FROM ins JOIN u ON u.provider = ins.provider AND u.event_id = ins.event_id
    LEFT JOIN LATERAL (SELECT p.operation_id FROM recon.provider_transactions p
                        WHERE u.operation_id IS NULL AND p.provider = u.provider AND p.provider_id = u.provider_id) t ON true
), locked AS MATERIALIZED (
  ${lockInIdOrder('SELECT operation_id AS id FROM fresh WHERE operation_id IS NOT NULL')}
)
SELECT f.provider AS event_provider, f.event_id, f.operation_id AS event_operation_id, l.*
  FROM fresh f LEFT JOIN locked l ON l.id = f.operation_id`);

/**
 * The links of transactions (provider, provider id), read again after INSERT_AND_LOCK for the new
 * events it found no operation for, and the operations they give locked.
 */
const LINKS_OF = `SELECT provider, provider_id, operation_id FROM recon.provider_transactions
  WHERE (provider, provider_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`;
const LOCK_OPERATIONS = keepPlan(lockInIdOrder('SELECT id FROM unnest($1::text[]) AS i(id)'));

/**
 * One statement for the rest: the operation and effect of each event applied, and each redelivery
 * recorded as seen (duplicate_count, last_seen_at; the one write a redelivery makes). Planned at
 * every group: kept, its generic plan made on a new store reads the whole table (kept-plans.test.ts).
 */
const UPDATE_EVENTS = `
UPDATE recon.webhook_events w
   SET duplicate_count = w.duplicate_count + u.seen,
       last_seen_at = CASE WHEN u.seen > 0 THEN $6::timestamptz ELSE w.last_seen_at END,
       operation_id = coalesce(u.operation_id, w.operation_id),
       applied = w.applied OR u.applied
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::boolean[]) AS u(provider, event_id, seen, operation_id, applied)
 -- ANY as well as the join: the planner knows nothing of u's size and may otherwise scan the table.
 WHERE w.provider = u.provider AND w.event_id = u.event_id AND w.event_id = ANY($2::text[])
RETURNING w.provider, w.event_id, w.operation_id`;

/** ingestEvents' group in one transaction; throws (the transaction rolled back) when anything fails. */
async function applyEvents(ctx: CoreContext, deliveries: Delivery[]): Promise<IngestResult[]> {
  const now = ctx.now();
  const key = (provider: string, eventId: string) => `${provider}\u0000${eventId}`;
  const keyOf = (d: Delivery) => key(d.provider.name, d.event.event_id);
  // The first delivery of each event in the group; the others are its redeliveries. In key order, so
  // that two servers inserting the same events never wait on each other in a cycle.
  const firsts = new Map<string, Delivery>();
  for (const d of deliveries) if (!firsts.has(keyOf(d))) firsts.set(keyOf(d), d);
  const unique = [...firsts.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, d]) => d);
  return ctx.db.transaction(async (tx) => {
    const read = await tx.query<
      { event_provider: string; event_id: string; event_operation_id: string | null } & Partial<OperationRow>
    >(INSERT_AND_LOCK, [
      textArrayParam(unique.map((d) => d.provider.name)),
      textArrayParam(unique.map((d) => d.event.event_id)),
      textArrayParam(unique.map((d) => d.event.type)),
      now.toISOString(),
      textArrayParam(unique.map((d) => d.event.txn?.provider_id ?? null)),
      JSON.stringify(unique.map((d) => d.event.raw ?? {})),
      textArrayParam(unique.map((d) => d.event.txn?.operation_id ?? null)),
    ]);
    // Each new event's operation (null: none named or linked), and the operations locked.
    const fresh = new Map<string, string | null>();
    const locked = new Map<string, Operation>();
    for (const r of read.rows) {
      fresh.set(key(r.event_provider, r.event_id), r.event_operation_id);
      if (r.id && !locked.has(r.id)) locked.set(r.id, rowToOperation(r as OperationRow));
    }
    // A new event whose transaction names no operation, and which INSERT_AND_LOCK found linked to none:
    // its link read again, by a statement that begins now. That one read the links with the snapshot
    // it began with, before its insert waited (if it did) for another server's delivery of the same
    // event; a link made meanwhile (by `recon run`, a lookup) and that delivery rolled back left the
    // event unmatched, its evidence never noted (found by a review, three connections:
    // webhook-race.test.ts). An operation found so is locked after the others, out of id order: a
    // deadlock with another group fails this one, and its events are then applied one by one.
    const unlinked = unique.filter((d) => d.event.txn && !d.event.txn.operation_id && fresh.get(keyOf(d)) === null);
    if (unlinked.length) {
      const r = await tx.query<{ provider: string; provider_id: string; operation_id: string }>(LINKS_OF, [
        unlinked.map((d) => d.provider.name),
        unlinked.map((d) => d.event.txn!.provider_id),
      ]);
      const linkedNow = new Map(r.rows.map((row) => [key(row.provider, row.provider_id), row.operation_id]));
      for (const d of unlinked) {
        const id = linkedNow.get(key(d.provider.name, d.event.txn!.provider_id));
        if (id) fresh.set(keyOf(d), id);
      }
      const more = [...new Set(linkedNow.values())].filter((id) => !locked.has(id));
      if (more.length) {
        const l = await tx.query<OperationRow>(LOCK_OPERATIONS, [more]);
        for (const row of l.rows) locked.set(row.id, rowToOperation(row));
      }
    }
    // First deliveries, in arrival order.
    const applying = deliveries.filter((d) => firsts.get(keyOf(d)) === d && fresh.has(keyOf(d)));
    const operationOf = (d: Delivery) => (d.event.txn ? (fresh.get(keyOf(d)) ?? null) : null);
    const matched = applying.filter((d) => locked.has(operationOf(d) ?? ''));
    const items: FoundItem[] = matched.map((d) => ({
      op: locked.get(operationOf(d)!)!,
      provider: d.provider.name,
      txn: d.event.txn!,
      detail: { event_id: d.event.event_id, type: d.event.type },
    }));
    const found = await applyFoundTransactions(tx, items, {
      source: 'webhook',
      via: 'webhook',
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
    });
    const results = new Map<Delivery, IngestResult>();
    matched.forEach((d, i) => {
      const { effect, state } = found[i];
      results.set(d, { ...ingested(d, false), operation_id: items[i].op.id, effect, state });
    });
    for (const d of applying) if (!results.has(d)) results.set(d, { ...ingested(d, false), effect: 'unmatched' });
    // Each event's row once: its operation and effect when applied here, how many times seen again.
    const rows = new Map<string, { d: Delivery; seen: number; operationId: string | null; applied: boolean }>();
    for (const d of deliveries) {
      const r = results.get(d);
      const row = rows.get(keyOf(d)) ?? { d, seen: 0, operationId: null, applied: false };
      if (r) Object.assign(row, { operationId: r.operation_id, applied: r.effect === 'transitioned' });
      else row.seen++;
      rows.set(keyOf(d), row);
    }
    const updates = [...rows.values()].filter((r) => r.seen > 0 || r.operationId !== null);
    const seenOp = new Map<string, string | null>();
    if (updates.length) {
      const r = await tx.query<{ provider: string; event_id: string; operation_id: string | null }>(UPDATE_EVENTS, [
        updates.map((u) => u.d.provider.name),
        updates.map((u) => u.d.event.event_id),
        updates.map((u) => u.seen),
        updates.map((u) => u.operationId),
        updates.map((u) => u.applied),
        now.toISOString(),
      ]);
      for (const row of r.rows) seenOp.set(key(row.provider, row.event_id), row.operation_id);
    }
    return deliveries.map(
      (d) =>
        results.get(d) ?? {
          ...ingested(d, true),
          operation_id: seenOp.get(keyOf(d)) ?? null,
          effect: 'duplicate',
        },
    );
  });
}

/** An IngestResult's fields before the event is matched. */
function ingested(d: Delivery, duplicate: boolean): IngestResult {
  return {
    event_id: d.event.event_id,
    type: d.event.type,
    duplicate,
    operation_id: null,
    effect: duplicate ? 'duplicate' : 'unmatched',
    state: null,
  };
}

/** One event in a transaction of its own: ingestEvents' way when a group fails. */
async function applyEvent(ctx: CoreContext, provider: Provider, event: WebhookEvent): Promise<IngestResult> {
  const now = ctx.now();
  const txn = event.txn;
  return ctx.db.transaction(async (tx) => {
    const inserted = await tx.query(
      `INSERT INTO recon.webhook_events (provider, event_id, type, received_at, last_seen_at, provider_id, payload)
       VALUES ($1, $2, $3, $4::timestamptz, $4::timestamptz, $5, $6::jsonb)
       ON CONFLICT (provider, event_id) DO NOTHING RETURNING event_id`,
      [
        provider.name,
        event.event_id,
        event.type,
        now.toISOString(),
        txn?.provider_id ?? null,
        JSON.stringify(event.raw ?? {}),
      ],
    );
    if (inserted.rows.length === 0) {
      const r = await tx.query<{ operation_id: string | null }>(
        `UPDATE recon.webhook_events SET duplicate_count = duplicate_count + 1, last_seen_at = $3::timestamptz
          WHERE provider = $1 AND event_id = $2 RETURNING operation_id`,
        [provider.name, event.event_id, now.toISOString()],
      );
      return {
        event_id: event.event_id,
        type: event.type,
        duplicate: true,
        operation_id: r.rows[0]?.operation_id ?? null,
        effect: 'duplicate',
        state: null,
      };
    }
    let operationId = txn?.operation_id ?? null;
    if (!operationId && txn) {
      const linked = await tx.query<{ operation_id: string }>(
        'SELECT operation_id FROM recon.provider_transactions WHERE provider = $1 AND provider_id = $2',
        [provider.name, txn.provider_id],
      );
      operationId = linked.rows[0]?.operation_id ?? null;
    }
    // Read once, locked: the row applyFoundTransaction decides on (a plain read, then the locking one,
    // was one more round trip per event in a transaction every delivery waits for).
    const op = operationId && txn ? await lockedOperation(tx, operationId) : null;
    if (!op || !txn) {
      return {
        event_id: event.event_id,
        type: event.type,
        duplicate: false,
        operation_id: null,
        effect: 'unmatched',
        state: null,
      };
    }
    const found = await applyFoundTransaction(tx, op, provider.name, txn, {
      source: 'webhook',
      via: 'webhook',
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      detail: { event_id: event.event_id, type: event.type },
    });
    const { effect, state } = found;
    // The event's operation and effect in one update, in the transaction that applied it.
    await tx.query(
      'UPDATE recon.webhook_events SET operation_id = $3, applied = $4 WHERE provider = $1 AND event_id = $2',
      [provider.name, event.event_id, op.id, effect === 'transitioned'],
    );
    return { event_id: event.event_id, type: event.type, duplicate: false, operation_id: op.id, effect, state };
  });
}

/** The operation, locked for this transaction, or null when there is none (the event is unmatched). */
async function lockedOperation(tx: Queryable, id: string) {
  try {
    return await lockOperation(tx, id);
  } catch (err) {
    if (err instanceof NotFoundError) return null;
    throw err;
  }
}
