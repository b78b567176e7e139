import { RefusedError } from '../../errors.js';
import type { Operation, State } from '../../types.js';
import { chainEvent, GENESIS_HASH, insertEvents, type ChainHead } from '../journal/chain.js';
import { keepPlan, type Queryable } from '../../store/db.js';
import { canonicalJson, payloadHash } from '../../lib/canonical.js';
import type { CoreContext } from '../journal/context.js';
import type { OperationInput } from './validate.js';

export interface RecordedOperation {
  id: string;
  state: State;
  created: boolean;
}

/**
 * Of an operation a call created: the row's version (xmin) as inserted and its chain's head (its last
 * event), which a claim made on the row as written checks (ClaimView). True once the caller's
 * transaction has committed.
 */
export interface WrittenOperation {
  version: string;
  head: ChainHead;
}

const CHUNK = 1000;

const INSERT_OPERATIONS = keepPlan(`
  INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, client_reference,
                                subject, approval, amount, currency, state, created_at, updated_at)
  SELECT u.id, u.provider, u.action, u.payload, u.payload_hash, u.idempotency_key, u.client_reference,
         u.subject, u.approval, u.amount, u.currency, u.state, $13::timestamptz, $13::timestamptz
    FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $7::text[],
                $8::jsonb[], $9::text[], $10::bigint[], $11::text[], $12::text[])
      AS u(id, provider, action, payload, payload_hash, idempotency_key, client_reference, subject, approval, amount, currency, state)
  ON CONFLICT (id) DO NOTHING
  RETURNING id, xmin::text AS version`);

/**
 * Records operations, all or nothing: one transaction for the whole batch, written in chunks.
 * The same id with the same payload is the existing operation (created: false, unchanged); the
 * same id with another payload, provider or action refuses the whole batch (exit 4).
 */
export async function recordOperations(ctx: CoreContext, inputs: OperationInput[]): Promise<RecordedOperation[]> {
  return ctx.db.transaction((tx) => recordOperationsIn(tx, ctx, inputs));
}

/**
 * recordOperations inside a transaction the caller holds (with what else it writes, e.g. the
 * `mcp.call` event). `noteCreated`: an event that changes no state (kind, detail), chained after the
 * `recorded` event of each operation this call creates and inserted with it, in the same statement:
 * the row was inserted by this transaction, so nothing else can append to its chain meanwhile and
 * there is no head to read. An operation that already existed gets no such event: the caller notes
 * it as it would any other (`note`, under the row lock).
 */
export async function recordOperationsIn(
  tx: Queryable,
  ctx: Pick<CoreContext, 'actor' | 'now' | 'auditKey'>,
  inputs: OperationInput[],
  opts: {
    noteCreated?: { kind: string; detail: Record<string, unknown> };
    /** Filled with what was written of each operation this call creates (WrittenOperation), by id. */
    written?: Map<string, WrittenOperation>;
  } = {},
): Promise<RecordedOperation[]> {
  const now = ctx.now();
  const hashed = inputs.map((i) => {
    const state: State = i.approval ? 'approved' : 'proposed';
    return { ...i, payload_hash: payloadHash(i.payload), state };
  });
  const firstById = new Map<string, (typeof hashed)[number]>();
  for (const op of hashed) {
    const seen = firstById.get(op.id);
    if (seen) assertSameAction(op.id, seen, op, 'an earlier record in this input');
    else firstById.set(op.id, op);
  }
  const unique = [...firstById.values()];
  const results = new Map<string, RecordedOperation>();
  // Each chunk's parameters and audit events (the hashing is most of recon's own work) are built
  // while the previous chunk's INSERT runs, so the process and the database work side by side.
  const prepare = (chunk: typeof unique) => ({
    chunk,
    params: [
      chunk.map((o) => o.id),
      chunk.map((o) => o.provider),
      chunk.map((o) => o.action),
      chunk.map((o) => JSON.stringify(o.payload)),
      chunk.map((o) => o.payload_hash),
      chunk.map((o) => o.idempotency_key),
      chunk.map((o) => o.client_reference),
      chunk.map((o) => (o.subject ? JSON.stringify(o.subject) : null)),
      chunk.map((o) => o.approval),
      chunk.map((o) => o.amount),
      chunk.map((o) => o.currency),
      chunk.map((o) => o.state),
      now.toISOString(),
    ],
    events: chunk.flatMap((op) => {
      const recorded = chainEvent(
        { seq: 0, hash: GENESIS_HASH },
        {
          operation_id: op.id,
          at: now,
          actor: ctx.actor,
          kind: 'recorded',
          to_state: op.state,
          rule: op.approval ? 'record.approved' : 'record.proposed',
          detail: { payload_hash: op.payload_hash, idempotency_key: op.idempotency_key, approval: op.approval },
        },
        ctx.auditKey,
      );
      if (!opts.noteCreated) return [recorded];
      const noted = chainEvent(
        recorded,
        {
          operation_id: op.id,
          at: now,
          actor: ctx.actor,
          kind: opts.noteCreated.kind,
          from_state: op.state,
          to_state: op.state,
          rule: null,
          detail: opts.noteCreated.detail,
        },
        ctx.auditKey,
      );
      return [recorded, noted];
    }),
  });
  {
    let next = unique.length ? prepare(unique.slice(0, CHUNK)) : null;
    for (let i = 0; next; i += CHUNK) {
      const { chunk, params, events } = next;
      const inserting = tx.query<{ id: string; version: string }>(INSERT_OPERATIONS, params);
      inserting.catch(() => undefined); // awaited just below; this only keeps a failure from being "unhandled" meanwhile
      next = i + CHUNK < unique.length ? prepare(unique.slice(i + CHUNK, i + 2 * CHUNK)) : null;
      const ins = await inserting;
      const created = new Map(ins.rows.map((r) => [r.id, r.version]));
      const existingIds = chunk.filter((o) => !created.has(o.id)).map((o) => o.id);
      if (existingIds.length) {
        const ex = await tx.query<RecordedFields & Pick<Operation, 'id' | 'state'>>(
          'SELECT id, provider, action, payload_hash, client_reference, subject, state FROM recon.operations WHERE id = ANY($1::text[])',
          [existingIds],
        );
        for (const row of ex.rows) {
          assertSameAction(row.id, row, firstById.get(row.id)!, 'the recorded operation');
          results.set(row.id, { id: row.id, state: row.state, created: false });
        }
      }
      const inserted = events.filter((e) => created.has(e.operation_id));
      await insertEvents(tx, inserted);
      for (const o of chunk) if (created.has(o.id)) results.set(o.id, { id: o.id, state: o.state, created: true });
      // Each operation's events are in order: its last one is its chain's head.
      if (opts.written)
        for (const e of inserted)
          opts.written.set(e.operation_id, {
            version: created.get(e.operation_id)!,
            head: { seq: e.seq, hash: e.hash, to_state: e.to_state },
          });
    }
  }
  return inputs.map((i) => results.get(i.id)!);
}

type RecordedFields = Pick<Operation, 'provider' | 'action' | 'payload_hash' | 'client_reference' | 'subject'>;

function assertSameAction(id: string, existing: RecordedFields, incoming: RecordedFields, what: string): void {
  if (existing.payload_hash !== incoming.payload_hash) {
    throw new RefusedError(
      `operation ${id}: payload differs from ${what} (payload_hash ${existing.payload_hash.slice(0, 12)}… vs ${incoming.payload_hash.slice(0, 12)}…); ` +
        'a changed amount, address or currency is a new action: record it under a new id. Nothing was written',
      'payload_frozen',
    );
  }
  if (existing.provider !== incoming.provider || existing.action !== incoming.action) {
    throw new RefusedError(
      `operation ${id}: already recorded for ${existing.provider}/${existing.action}, not ${incoming.provider}/${incoming.action}; use a new id. Nothing was written`,
      'payload_frozen',
    );
  }
  // Who it is for is part of the action: the same refund under another order or customer is not
  // "the existing operation" (created: false would tell the caller its order was refunded).
  if (existing.client_reference !== incoming.client_reference) {
    throw new RefusedError(
      `operation ${id}: already recorded with client_reference ${JSON.stringify(existing.client_reference)}, not ${JSON.stringify(incoming.client_reference)}; an operation id names one action for one reference. Nothing was written`,
      'payload_frozen',
    );
  }
  if (canonicalJson(existing.subject ?? null) !== canonicalJson(incoming.subject ?? null)) {
    throw new RefusedError(
      `operation ${id}: already recorded with another subject; an operation id names one action for one subject. Nothing was written`,
      'payload_frozen',
    );
  }
}
