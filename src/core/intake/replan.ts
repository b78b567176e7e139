/**
 * The re-plan guard (SPEC §4 "Approval by policy"). An agent run that restarts regenerates its
 * plan and a new operation id; the provider rightly treats the new id as a new action. recon can
 * see what the provider cannot: another operation of the same provider and action for the same
 * target (Stripe: the same `payment_intent` or `charge`; other providers: the same
 * `client_reference`) that is not `failed` or `cancelled`. A policy never approves past it: the
 * proposal waits for a person, who may still approve a second, deliberate action.
 */
import { keepPlan, type Queryable } from '../../store/db.js';
import type { State } from '../../types.js';
import { sha256Hex } from '../../lib/canonical.js';

/** A proposal's lock on its target, taken with every proposal that has one: a constant text, its plan kept. */
const TARGET_LOCK = keepPlan('SELECT pg_advisory_xact_lock($1::bigint)');

/** What an operation acts on, as far as recon can tell before asking the provider. */
interface Target {
  provider: string;
  action: string;
  payment_intent: string | null;
  charge: string | null;
  client_reference: string | null;
}

export interface Holder {
  id: string;
  state: State;
}

interface TargetOf {
  id: string;
  provider: string;
  action: string;
  payload: Record<string, unknown>;
  client_reference: string | null;
}

function text(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

/**
 * Stripe names what a refund acts on in the payload (`payment_intent` or `charge`); other
 * providers' payloads have no field recon knows, so the caller's `client_reference` stands for it.
 * null: nothing identifies the target, and the guard cannot apply.
 */
function targetOf(op: TargetOf, providerType: string | undefined): Target | null {
  const base = { provider: op.provider, action: op.action, payment_intent: null, charge: null, client_reference: null };
  if (providerType === 'stripe') {
    const payment_intent = text(op.payload.payment_intent);
    const charge = text(op.payload.charge);
    return payment_intent || charge ? { ...base, payment_intent, charge } : null;
  }
  return op.client_reference ? { ...base, client_reference: op.client_reference } : null;
}

/**
 * The guard's read: the operations with the proposal's target (only the parts it has: each is an
 * index probe, migration 0006 and operations_client_reference_idx), then the oldest live one of the
 * same provider and action. The target's rows are read first (MATERIALIZED): left to itself, the
 * planner walked the whole history in created_at order looking for the first match, which for a
 * new target (the usual answer: no holder) is every operation (105 ms at 200,000 operations).
 */
function holderSql(id: string, t: Target): { sql: string; params: unknown[] } {
  const params: unknown[] = [t.provider, t.action, id];
  const arms: string[] = [];
  const arm = (expr: string, value: string | null) => {
    if (value === null) return;
    params.push(value);
    arms.push(`${expr} = $${params.length}::text`);
  };
  arm(`payload->>'payment_intent'`, t.payment_intent);
  arm(`payload->>'charge'`, t.charge);
  arm('client_reference', t.client_reference);
  const sql = `
  WITH targeted AS MATERIALIZED (
    SELECT id, state, provider, action, created_at FROM recon.operations WHERE ${arms.join(' OR ')}
  )
  SELECT id, state FROM targeted
   WHERE provider = $1 AND action = $2 AND id <> $3 AND state NOT IN ('failed', 'cancelled')
   ORDER BY created_at, id
   LIMIT 1`;
  return { sql: keepPlan(sql), params };
}

/**
 * The operation that holds this one for a person, or null. With `lock`, inside the transaction that
 * records the proposal, a transaction-scoped advisory lock on the target is taken first, so two
 * proposals for one target at once are decided one after the other: the second sees the first.
 */
export async function holderOf(
  tx: Queryable,
  op: TargetOf,
  providerType: string | undefined,
  o: { lock?: boolean } = {},
): Promise<Holder | null> {
  const t = targetOf(op, providerType);
  if (!t) return null;
  if (o.lock) {
    const key = sha256Hex(JSON.stringify([t.provider, t.action, t.payment_intent, t.charge, t.client_reference]));
    await tx.query(TARGET_LOCK, [BigInt.asIntN(64, BigInt(`0x${key.slice(0, 16)}`)).toString()]);
  }
  const { sql, params } = holderSql(op.id, t);
  const r = await tx.query<Holder>(sql, params);
  return r.rows[0] ?? null;
}

/** `held: same target as refund:ord_2001 (confirmed)`: what `review list`, `ops list` and the tools say. */
export function heldText(h: Holder): string {
  return `held: same target as ${h.id} (${h.state})`;
}
