import type { Provider, State, WebhookEvent } from '../../types.js';
import type { CoreContext } from '../journal/context.js';
import type { Queryable } from '../../store/db.js';
import { applyFoundTransaction } from './apply.js';
import { lockOperation } from '../journal/operations.js';
import { NotFoundError } from '../../errors.js';

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
  return applyEvent(ctx, provider, event);
}

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
