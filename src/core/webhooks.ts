import type { Provider, State, WebhookEvent } from '../types.js';
import type { CoreContext } from './context.js';
import { findOperation, lockOperation } from './repo.js';
import { canTransition } from './states.js';
import { linkTransaction, note, transition } from './transition.js';

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
 * transaction's `recon_operation_id`, else by an already-linked provider id, and applied through
 * the state machine in the same transaction as the event row.
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

export async function applyEvent(ctx: CoreContext, provider: Provider, event: WebhookEvent): Promise<IngestResult> {
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
    const op = operationId ? await findOperation(tx, operationId) : null;
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
    await tx.query('UPDATE recon.webhook_events SET operation_id = $3 WHERE provider = $1 AND event_id = $2', [
      provider.name,
      event.event_id,
      op.id,
    ]);
    const locked = await lockOperation(tx, op.id);
    const link = await linkTransaction(tx, provider.name, op.id, txn, { via: 'webhook', by: ctx.actor, at: now });
    const detail = {
      event_id: event.event_id,
      type: event.type,
      provider_id: txn.provider_id,
      provider_status: txn.status,
      linked: link.linked,
    };
    // An attempt in flight owns the operation until it finishes; the event is recorded and linked,
    // and the submitter's own result (or the next run) makes the move.
    const inFlight = locked.state === 'submitting' && locked.lease_expires_at !== null && locked.lease_expires_at > now;
    let effect = 'noted';
    let state: State = locked.state;
    // The event's transaction disagrees with what was asked: a human decides, it is never confirmed.
    const mismatch =
      (locked.amount !== null && txn.amount !== null && txn.amount !== locked.amount) ||
      (locked.currency !== null && txn.currency !== null && txn.currency.toLowerCase() !== locked.currency);
    const target: State = mismatch ? 'needs_review' : txn.state;
    const from: State = locked.state === 'submitting' ? 'outcome_unknown' : locked.state;
    if (link.linked && !inFlight && locked.state !== target && canTransition(from, target)) {
      if (locked.state === 'submitting') {
        await transition(tx, op.id, 'outcome_unknown', {
          actor: ctx.actor,
          now,
          kind: 'lease.expired',
          rule: 'lease.expired',
          detail: {},
        });
      }
      await transition(tx, op.id, target, {
        actor: ctx.actor,
        now,
        kind: 'webhook.applied',
        rule: mismatch ? 'webhook.mismatch' : `webhook.${txn.state}`,
        review_reason: mismatch ? 'mismatch' : null,
        detail,
      });
      effect = 'transitioned';
      state = target;
    } else {
      await note(tx, op.id, { actor: ctx.actor, now, kind: 'webhook.received', rule: null, detail });
    }
    await tx.query('UPDATE recon.webhook_events SET applied = $3 WHERE provider = $1 AND event_id = $2', [
      provider.name,
      event.event_id,
      effect === 'transitioned',
    ]);
    return { event_id: event.event_id, type: event.type, duplicate: false, operation_id: op.id, effect, state };
  });
}
