/**
 * The http adapter with the SPEC §6 `warehouse` example config (baseUrl pointed at the warehouse
 * sandbox), classification asserted on the sandbox's ledger.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { LoadedConfig } from '../../src/config/types.js';
import { createProvider } from '../../src/providers/index.js';
import { fillPath } from '../../src/providers/http/mapping.js';
import { warehouseProviderConfig } from '../../src/sandbox/warehouse/provider-config.js';
import { startWarehouseSandbox, type WarehouseSandbox } from '../../src/sandbox/warehouse/server.js';
import type { Provider, SubmitRequest } from '../../src/types.js';

const TOKEN = 'wh_token_s3cret';
let sandbox: WarehouseSandbox;
let warehouse: Provider;
let slept: number[];

/**
 * SPEC §6 example (the sandbox's own mapping, src/sandbox/warehouse/provider-config.ts) but for
 * baseUrl, the token read from the environment, and a `list` mapping for audits.
 */
function configFor(baseUrl: string, extra: Record<string, unknown> = {}): LoadedConfig {
  const text = JSON.stringify({
    providers: {
      warehouse: warehouseProviderConfig(baseUrl, '${WAREHOUSE_TOKEN}', {
        uncertaintyWindow: '10m',
        list: { path: '/v1/shipments?limit=100&created_gte={since}&created_lte={until}' },
        rateLimit: 10_000,
        ...extra,
      }),
    },
  });
  return parseConfig(text, { path: '/nowhere/recon.config.json', env: { WAREHOUSE_TOKEN: TOKEN } });
}

async function providerFor(extra: Record<string, unknown> = {}, url = sandbox.url): Promise<Provider> {
  return createProvider('warehouse', configFor(url, extra), {
    sleep: async (ms) => void slept.push(ms),
    random: () => 0.5,
  });
}

let seq = 0;
function shipmentOp(extra: Partial<SubmitRequest> = {}): SubmitRequest {
  const id = `ship_${Date.now()}_${++seq}`;
  const client_reference = `order-${seq}`;
  return {
    operation_id: id,
    action: 'shipment.create',
    payload: { client_reference, sku: 'BOOK-1', quantity: 1, address: { city: 'Lyon' } },
    idempotency_key: id,
    client_reference,
    ...extra,
  };
}

beforeAll(async () => {
  sandbox = await startWarehouseSandbox({ token: TOKEN });
});
afterAll(async () => {
  await sandbox?.close();
});
beforeEach(async () => {
  slept = [];
  sandbox.faults.clear();
  warehouse = await providerFor();
});

describe('submit classification', () => {
  it('201 created → confirmed with the token and our key; a repeat is a replay; one shipment', async () => {
    const op = shipmentOp();
    const first = await warehouse.submit(op);
    expect(first).toMatchObject({ outcome: 'confirmed', http_status: 201, replayed: false });
    expect(first.txn).toMatchObject({
      status: 'created',
      idempotency_key: op.idempotency_key,
      client_reference: op.client_reference,
    });
    const again = await warehouse.submit(op);
    expect(again).toMatchObject({ outcome: 'confirmed', replayed: true });
    expect(sandbox.shipments({ client_reference: op.client_reference! })).toHaveLength(1);
  });

  it('a processing shipment → pending', async () => {
    sandbox.faults.inject({ kind: 'initial_status', status: 'processing' });
    expect(await warehouse.submit(shipmentOp())).toMatchObject({
      outcome: 'pending',
      txn: { status: 'processing', state: 'pending' },
    });
  });

  it('the same key with another body (422 idempotency_key_reused) → conflict; one shipment', async () => {
    const op = shipmentOp();
    await warehouse.submit(op);
    const changed = await warehouse.submit({ ...op, payload: { ...op.payload, quantity: 2 } });
    expect(changed).toMatchObject({ outcome: 'conflict', http_status: 422, error_class: 'idempotency_error' });
    expect(sandbox.shipments({ client_reference: op.client_reference! })).toHaveLength(1);
  });

  it('409 while the first request is in flight → unknown; one shipment', async () => {
    const op = shipmentOp();
    sandbox.faults.inject({ kind: 'hold' }, { idempotencyKey: op.idempotency_key, times: 1 });
    const first = warehouse.submit(op);
    await expect.poll(() => sandbox.faults.held()).toBe(1);
    expect(await warehouse.submit(op)).toMatchObject({ outcome: 'unknown', http_status: 409 });
    sandbox.faults.release();
    expect((await first).outcome).toBe('confirmed');
    expect(sandbox.shipments({ client_reference: op.client_reference! })).toHaveLength(1);
  });

  it('committed then dropped → unknown, one shipment; dropped before commit → unknown, none', async () => {
    const committed = shipmentOp();
    sandbox.faults.inject({ kind: 'commit_then_drop' });
    expect(await warehouse.submit(committed)).toMatchObject({ outcome: 'unknown', error_class: 'connection' });
    expect(sandbox.shipments({ client_reference: committed.client_reference! })).toHaveLength(1);
    const lost = shipmentOp();
    sandbox.faults.inject({ kind: 'drop_before_commit' });
    expect(await warehouse.submit(lost)).toMatchObject({ outcome: 'unknown', error_class: 'connection' });
    expect(sandbox.shipments({ client_reference: lost.client_reference! })).toHaveLength(0);
  });

  it('503 → unknown; a refused body (400) → failed; neither creates anything', async () => {
    const op = shipmentOp();
    sandbox.faults.inject({ kind: 'status', status: 503 });
    expect(await warehouse.submit(op)).toMatchObject({ outcome: 'unknown', http_status: 503, error_class: 'http_503' });
    const bad = shipmentOp();
    const refused = await warehouse.submit({ ...bad, payload: { ...bad.payload, client_reference: 42 } });
    expect(refused).toMatchObject({
      outcome: 'failed',
      http_status: 400,
      message: 'client_reference must be a string.',
    });
    expect(sandbox.shipments({ client_reference: op.client_reference! })).toHaveLength(0);
  });

  it('429 then success → confirmed after Retry-After; one shipment', async () => {
    const op = shipmentOp();
    sandbox.faults.inject({ kind: 'status', status: 429 });
    expect((await warehouse.submit(op)).outcome).toBe('confirmed');
    expect(slept.some((ms) => ms >= 1000)).toBe(true);
    expect(sandbox.shipments({ client_reference: op.client_reference! })).toHaveLength(1);
  });

  it('slower than the timeout → unknown (timeout)', async () => {
    const slow = await providerFor({ timeout: '200ms', lease: '1m' });
    sandbox.faults.inject({ kind: 'delay', ms: 1500 });
    expect(await slow.submit(shipmentOp())).toMatchObject({ outcome: 'unknown', error_class: 'timeout' });
  });

  it('a wrong token is a refusal (401 → failed), and the token is not in the result', async () => {
    const wrong = await providerFor({ headers: { Authorization: 'Bearer wrong_token_1' } });
    const result = await wrong.submit(shipmentOp());
    expect(result).toMatchObject({ outcome: 'failed', http_status: 401 });
    expect(JSON.stringify(result)).not.toContain('wrong_token_1');
  });
});

describe('lookup, get, list', () => {
  it('finds the shipment by client reference, matched on our key; another key on the same reference is not ours', async () => {
    const op = shipmentOp({ client_reference: 'order 12/3&x=1' });
    op.payload['client_reference'] = op.client_reference;
    await warehouse.submit(op);
    sandbox.seedShipment({ client_reference: op.client_reference }, { idempotencyKey: 'someone-else' });
    const result = await warehouse.lookup({
      operation_id: op.operation_id,
      idempotency_key: op.idempotency_key,
      client_reference: op.client_reference!,
    });
    expect(result.result).toBe('found');
    expect(result.matches.map((t) => t.idempotency_key)).toEqual([op.idempotency_key]);
    const byRef = await warehouse.lookup({ client_reference: op.client_reference! });
    expect(byRef.matches).toHaveLength(2);
  });

  it('a lookup whose path cannot be filled is a usage error naming the key, not a list of everything', async () => {
    await expect(warehouse.lookup({ idempotency_key: 'k1' })).rejects.toThrow(
      'providers.warehouse.lookup.path: {client_reference} cannot be filled for this request; it has idempotency_key',
    );
  });

  it('not_found while not indexed (hide) and for an unknown reference; get still works by id', async () => {
    const op = shipmentOp();
    sandbox.faults.inject({ kind: 'hide', ms: 60_000 });
    const submitted = await warehouse.submit(op);
    const query = {
      operation_id: op.operation_id,
      idempotency_key: op.idempotency_key,
      client_reference: op.client_reference!,
    };
    expect(await warehouse.lookup(query)).toMatchObject({ result: 'not_found', matches: [] });
    expect(await warehouse.lookup({ ...query, client_reference: 'nobody' })).toMatchObject({ result: 'not_found' });
    expect(await warehouse.get(submitted.txn!.provider_id)).toMatchObject({
      provider_id: submitted.txn!.provider_id,
      state: 'confirmed',
    });
    expect(await warehouse.get('shp_nope')).toBeNull();
  });

  it('an unreachable service is unavailable for lookup, never an exception', async () => {
    const closed = await startWarehouseSandbox();
    await closed.close();
    const provider = await providerFor({}, closed.url);
    const result = await provider.lookup({ client_reference: 'x' });
    expect(result.result).toBe('unavailable');
    expect(result.error).toBeTruthy();
  });

  it('list streams the ledger page by page within the range', async () => {
    const start = Math.floor(Date.now() / 1000) - 90 * 86_400;
    for (let i = 0; i < 230; i++) sandbox.seedShipment({ client_reference: `bulk-${i}` }, { created: start + i });
    const pages: number[] = [];
    let count = 0;
    for await (const txn of warehouse.list!({
      since: new Date(start * 1000),
      until: new Date((start + 229) * 1000),
      onPage: (p) => pages.push(p.items),
    })) {
      expect(txn.client_reference).toMatch(/^bulk-/);
      count++;
    }
    expect(count).toBe(230);
    expect(pages).toEqual([100, 100, 30]);
  });
});

describe('path placeholders', () => {
  it('are URL-encoded, taken from the operation and its payload', () => {
    expect(
      fillPath(
        '/v1/x/{id}?ref={client_reference}&sku={sku}',
        { id: 'a/b', client_reference: 'o 1&2', sku: 'B-1' },
        'k',
      ),
    ).toBe('/v1/x/a%2Fb?ref=o%201%262&sku=B-1');
  });

  it('drop an unfilled query parameter only for list ranges', () => {
    expect(
      fillPath('/v1/x?limit=100&created_gte={since}&created_lte={until}', { until: 5 }, 'k', {
        dropMissingQuery: true,
      }),
    ).toBe('/v1/x?limit=100&created_lte=5');
    expect(() => fillPath('/v1/x?created_gte={since}', {}, 'providers.w.list.path')).toThrow(
      /providers\.w\.list\.path: \{since\}/,
    );
  });
});
