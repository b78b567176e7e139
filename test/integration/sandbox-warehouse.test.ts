/**
 * The warehouse sandbox over plain HTTP, the way recon's `http` provider (SPEC §6) talks to it;
 * every side effect is counted on the sandbox's ledger.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  startWarehouseSandbox,
  type WarehouseSandbox,
  type WarehouseSandboxOptions,
} from '../../src/sandbox/warehouse/server.js';

const open: WarehouseSandbox[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function sandbox(opts: WarehouseSandboxOptions = {}): Promise<WarehouseSandbox> {
  const sb = await startWarehouseSandbox(opts);
  open.push(sb);
  return sb;
}

interface Answer {
  status: number;
  headers: Headers;
  body: WarehouseBody;
}

interface Shipment {
  id: string;
  client_reference: string;
  status: string;
}

/** What the warehouse sandbox answers: a shipment, a list page or an error (the test reads the one it expects). */
type WarehouseBody = Shipment & { data: Shipment[]; has_more: boolean; error: { code: string } };

async function call(
  sb: WarehouseSandbox,
  method: string,
  path: string,
  opts: { body?: unknown; key?: string; token?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (opts.key) headers['Idempotency-Key'] = opts.key;
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  const res = await fetch(`${sb.url}${path}`, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

const payload = { client_reference: 'order-1', sku: 'BOOK-1', quantity: 2, address: { city: 'Lyon' } };

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('warehouse sandbox', () => {
  it('creates a shipment and replays it for the same key and body', async () => {
    const sb = await sandbox();
    const first = await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'op-1' });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      status: 'created',
      idempotency_key: 'op-1',
      client_reference: 'order-1',
      sku: 'BOOK-1',
      quantity: 2,
    });
    expect(first.body.id).toMatch(/^shp_/);
    expect(first.headers.get('request-id')).toMatch(/^req_/);

    const again = await call(sb, 'POST', '/v1/shipments', { body: { ...payload }, key: 'op-1' });
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(first.body.id);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(sb.shipments()).toHaveLength(1);
  });

  it('refuses the same key with another body (422) and creates nothing', async () => {
    const sb = await sandbox();
    await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'op-1' });
    const other = await call(sb, 'POST', '/v1/shipments', { body: { ...payload, quantity: 3 }, key: 'op-1' });
    expect(other.status).toBe(422);
    expect(other.body.error.code).toBe('idempotency_key_reused');
    expect(sb.shipments()).toHaveLength(1);
  });

  it('answers 409 while the first request with the key is still running', async () => {
    const sb = await sandbox();
    sb.faults.inject({ kind: 'delay', ms: 1000 });
    const first = call(sb, 'POST', '/v1/shipments', { body: payload, key: 'k' });
    await until(() => sb.shipments().length === 1, 'the first request to commit');
    const second = await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'k' });
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('request_in_progress');
    expect((await first).status).toBe(201);
    expect(sb.shipments()).toHaveLength(1);
  });

  it('looks shipments up by client reference and idempotency key, and by id', async () => {
    const sb = await sandbox();
    const created = await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'op-1' });
    await call(sb, 'POST', '/v1/shipments', { body: { ...payload, client_reference: 'order-2' }, key: 'op-2' });

    const byRef = await call(sb, 'GET', '/v1/shipments?client_reference=order-1');
    expect(byRef.status).toBe(200);
    expect(byRef.body.data.map((s: { id: string }) => s.id)).toEqual([created.body.id]);
    const byKey = await call(sb, 'GET', '/v1/shipments?idempotency_key=op-2');
    expect(byKey.body.data).toHaveLength(1);
    expect(byKey.body.data[0].client_reference).toBe('order-2');
    expect((await call(sb, 'GET', '/v1/shipments?client_reference=nobody')).body).toEqual({
      data: [],
      has_more: false,
    });

    const one = await call(sb, 'GET', `/v1/shipments/${created.body.id}`);
    expect(one.body).toEqual(created.body);
    const missing = await call(sb, 'GET', '/v1/shipments/shp_missing');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
  });

  it('paginates by created range, newest first', async () => {
    const sb = await sandbox();
    for (let i = 0; i < 7; i++) sb.seedShipment({ client_reference: `r-${i}` }, { created: 1000 + i * 100 });
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const q = `/v1/shipments?created_gte=1100&created_lte=1500&limit=2${cursor ? `&starting_after=${cursor}` : ''}`;
      const res = await call(sb, 'GET', q);
      seen.push(...res.body.data.map((s: { client_reference: string }) => s.client_reference));
      if (!res.body.has_more) break;
      cursor = res.body.data[res.body.data.length - 1].id;
    }
    expect(seen).toEqual(['r-5', 'r-4', 'r-3', 'r-2', 'r-1']);
    expect(sb.stats.listPages).toBe(3);
    expect((await call(sb, 'GET', '/v1/shipments?limit=500')).status).toBe(400);
  });

  it('hide: lookups find nothing until the time passes; GET by id works meanwhile', async () => {
    let t = Date.UTC(2026, 0, 1);
    const sb = await sandbox({ now: () => t });
    sb.faults.inject({ kind: 'hide', ms: 5 * 60_000 });
    const created = await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'op-1' });
    expect((await call(sb, 'GET', '/v1/shipments?client_reference=order-1')).body.data).toHaveLength(0);
    expect((await call(sb, 'GET', `/v1/shipments/${created.body.id}`)).status).toBe(200);
    // The caller retries with the original key after its window: deduplicated, still one shipment.
    const retried = await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'op-1' });
    expect(retried.body.id).toBe(created.body.id);
    t += 5 * 60_000;
    expect((await call(sb, 'GET', '/v1/shipments?client_reference=order-1')).body.data).toHaveLength(1);
    expect(sb.shipments({ client_reference: 'order-1' })).toHaveLength(1);
  });

  it('commit_then_drop commits; drop_before_commit does not; status faults save nothing', async () => {
    const sb = await sandbox();
    sb.faults.inject({ kind: 'commit_then_drop' });
    await expect(call(sb, 'POST', '/v1/shipments', { body: payload, key: 'a' })).rejects.toThrow();
    expect(sb.shipments({ idempotency_key: 'a' })).toHaveLength(1);
    expect(
      (await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'a' })).headers.get('idempotent-replayed'),
    ).toBe('true');

    sb.faults.inject({ kind: 'drop_before_commit' });
    await expect(call(sb, 'POST', '/v1/shipments', { body: payload, key: 'b' })).rejects.toThrow();
    expect(sb.shipments({ idempotency_key: 'b' })).toHaveLength(0);

    sb.faults.inject({ kind: 'status', status: 503 });
    expect((await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'b' })).status).toBe(503);
    const created = await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'b' });
    expect(created.headers.get('idempotent-replayed')).toBeNull();
    expect(sb.shipments({ idempotency_key: 'b' })).toHaveLength(1);
  });

  it('hold keeps the answer open until release', async () => {
    const sb = await sandbox();
    sb.faults.inject({ kind: 'hold' });
    const pending = call(sb, 'POST', '/v1/shipments', { body: payload, key: 'h' });
    await until(() => sb.faults.held() === 1, 'the held response');
    expect(sb.shipments()).toHaveLength(1);
    sb.faults.release();
    expect((await pending).status).toBe(201);
  });

  it('checks the bearer token when configured and rejects a body that is not an object', async () => {
    const sb = await sandbox({ token: 'secret-token' });
    expect((await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'x' })).status).toBe(401);
    expect((await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'x', token: 'wrong' })).status).toBe(401);
    expect((await call(sb, 'POST', '/v1/shipments', { body: [1, 2], key: 'x', token: 'secret-token' })).status).toBe(
      400,
    );
    expect(sb.shipments()).toHaveLength(0);
    expect((await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'x', token: 'secret-token' })).status).toBe(
      201,
    );
    expect(sb.stats.status[401]).toBe(2);
  });

  it('forgets keys after the retention (7 days by default)', async () => {
    let t = Date.UTC(2026, 0, 1);
    const sb = await sandbox({ now: () => t });
    const a = await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'k' });
    t += 6 * 24 * 3600_000;
    expect((await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'k' })).body.id).toBe(a.body.id);
    t += 24 * 3600_000;
    expect((await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'k' })).body.id).not.toBe(a.body.id);
    expect(sb.shipments()).toHaveLength(2);
  });

  it('is steerable over the admin HTTP API', async () => {
    const sb = await sandbox();
    const admin = (path: string, body?: unknown) =>
      fetch(`${sb.url}/_sandbox${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        body: JSON.stringify(body),
      }).then((r) => r.json());
    await admin('/faults', { kind: 'initial_status', status: 'processing', times: 1 });
    const created = await call(sb, 'POST', '/v1/shipments', { body: payload, key: 'p' });
    expect(created.body.status).toBe('processing');
    await admin('/shipment_status', { id: created.body.id, status: 'shipped' });
    const ledger = (await fetch(`${sb.url}/_sandbox/ledger?client_reference=order-1`).then((r) => r.json())) as {
      data: Array<{ status: string }>;
    };
    expect(ledger.data.map((s) => s.status)).toEqual(['shipped']);
  });
});
