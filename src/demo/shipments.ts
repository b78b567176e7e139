/**
 * The warehouse incidents of SPEC §8 the demo plays, both on an `http` provider whose lookup is
 * not authoritative: 3 (delayed indexing: wait through the window, retry with the original key,
 * the provider replays) and 5 (the key has outlived the provider's retention: a human decides).
 */
import { attemptsOf, getOperation, transactionsOf } from '../core/journal/operations.js';
import { formatDuration } from '../lib/durations.js';
import type { WarehouseSandbox } from '../sandbox/warehouse/server.js';
import { decisionOf, describeOutcome, type Scene, type Stage } from './stage.js';
import { LEGACY_KEY_RETENTION_MS } from './world.js';

/** Long past the demo's end: only a retry, never the lookup, can find these shipments. */
const HIDDEN_MS = 10 * 60_000;

function shipment(id: string, provider: string, order: string, approval: string) {
  return {
    id,
    provider,
    action: 'shipment.create',
    payload: { client_reference: order, sku: 'SKU-42', quantity: 1, address: { city: 'Lyon', country: 'FR' } },
    client_reference: order,
    approval,
  };
}

/** Records and submits a shipment whose commit is hidden from lookups and whose answer is lost. */
async function submitHidden(
  stage: Stage,
  sandbox: WarehouseSandbox,
  id: string,
  provider: string,
  order: string,
  approval: string,
) {
  await stage.record(shipment(id, provider, order, approval));
  sandbox.faults.inject({ kind: 'hide', ms: HIDDEN_MS, drop: true }, { idempotencyKey: id, times: 1 });
  const r = await stage.submit(id);
  await stage.check('submit ends in outcome_unknown', 'outcome_unknown', r.operation.state);
  await stage.check(
    'the shipment was committed at the provider',
    1,
    sandbox.shipments({ client_reference: order }).length,
  );
  return r;
}

export function delayedIndexing(stage: Stage): Scene {
  const id = 'ship:ord_1003';
  const order = 'ord_1003';
  const { warehouse, ctx } = stage.world;
  return {
    stage,
    async setup() {
      await stage.heading();
      await stage.say(
        `recording ${id}; the warehouse will commit it, drop the connection, and not index it for a while`,
      );
      const r = await submitHidden(stage, warehouse, id, 'warehouse', order, 'DEMO-3');
      await stage.say(`ops submit → ${describeOutcome(r)}; the warehouse's lookup by ${order} shows nothing yet`);
    },
    async afterRun(pass, summary) {
      const d = decisionOf(summary, id);
      await stage.say(`run ${pass} → ${d?.decision} [${d?.rule}]: ${d?.explanation}`);
      if (pass === 1) {
        await stage.check(
          'inside the window, run waits',
          { decision: 'wait', rule: 'not_found.window' },
          { decision: d?.decision, rule: d?.rule },
        );
      } else {
        await stage.check(
          'past the window, run retries and the retry confirms',
          { decision: 'retry', state: 'confirmed' },
          { decision: d?.decision, state: d?.state },
        );
      }
    },
    async finish() {
      const [op, attempts, txns] = await Promise.all([
        getOperation(ctx.db, id),
        attemptsOf(ctx.db, id),
        transactionsOf(ctx.db, id),
      ]);
      await stage.say(
        `${attempts.length} attempts, both with key ${op.idempotency_key}; the warehouse replayed the first answer (${txns.map((t) => `${t.provider_id} via ${t.linked_via}`).join(', ')})`,
      );
      await stage.check(
        'every attempt used the original key',
        [op.idempotency_key, op.idempotency_key],
        attempts.map((a) => a.idempotency_key),
      );
      await stage.check(
        'the provider replayed its stored answer',
        ['replay'],
        txns.map((t) => t.linked_via),
      );
      await stage.ledger('shipments', 1, warehouse.shipments({ client_reference: order }).length);
    },
  };
}

export function keyRetentionPassed(stage: Stage): Scene {
  const id = 'ship:ord_1005';
  const order = 'ord_1005';
  const { legacyWarehouse, ctx } = stage.world;
  return {
    stage,
    async setup() {
      await stage.heading();
      await stage.say(
        `recording ${id} at the legacy warehouse, which forgets idempotency keys after ${formatDuration(LEGACY_KEY_RETENTION_MS)} and cannot list everything it holds`,
      );
      const r = await submitHidden(stage, legacyWarehouse, id, 'warehouse-legacy', order, 'DEMO-5');
      await stage.say(`ops submit → ${describeOutcome(r)}; committed but not visible to lookups`);
    },
    async afterRun(pass, summary) {
      const d = decisionOf(summary, id);
      await stage.say(`run ${pass} → ${d?.decision} [${d?.rule}]: ${d?.explanation}`);
      if (pass === 1) {
        await stage.check(
          'inside the window, run waits',
          { decision: 'wait', rule: 'not_found.window' },
          { decision: d?.decision, rule: d?.rule },
        );
      } else {
        await stage.check(
          'past the key retention, run refuses to retry and asks a human',
          { decision: 'review', state: 'needs_review', review_reason: 'key_retention' },
          { decision: d?.decision, state: d?.state, review_reason: d?.review_reason },
        );
      }
    },
    async finish() {
      const op = await getOperation(ctx.db, id);
      await stage.say(`a retry now would have shipped twice: the key is forgotten; ${id} waits in recon review list`);
      await stage.check('no retry was made', 1, op.attempt_count);
      await stage.ledger('shipments', 1, legacyWarehouse.shipments({ client_reference: order }).length);
    },
  };
}
