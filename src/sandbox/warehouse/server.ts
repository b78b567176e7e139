/**
 * A local shipment service matching the SPEC §6 `http` provider example (`POST /v1/shipments`
 * with an `Idempotency-Key` header, lookup by client reference, GET by id), with the same faults,
 * latency, ledger and stats as the Stripe sandbox. Its idempotency keys last 7 days by default and
 * its lookup is not authoritative (delayed indexing is what the `hide` fault reproduces).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { handleAdmin } from '../admin.js';
import { runCreate, SandboxFaults, type CreateOutcome, type Fault, type FaultQueue } from '../faults.js';
import {
  closeServer,
  countStatus,
  fingerprint,
  listen,
  newStats,
  readBody,
  requestId,
  sendJson,
  sleep,
  type SandboxStats,
} from '../http.js';
import { IdempotencyStore } from '../idempotency.js';
import { WarehouseLedger, type Shipment, type ShipmentFilter, type ShipmentQuery } from './ledger.js';

export type { Shipment } from './ledger.js';

export interface WarehouseSandboxOptions {
  /** 0 (default) = a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** When set, requests must carry `Authorization: Bearer TOKEN` (else 401). Default: no check. */
  token?: string;
  /** Added to every API request. Default 0. */
  latencyMs?: number;
  /** How long idempotency keys are kept. Default 7d (the example config's `keyRetention`). */
  keyRetentionMs?: number;
  /** Status of new shipments. Default 'created'. */
  shipmentStatus?: string;
  /** Clock (ms) for `created`, key retention and `hide`. Default Date.now. */
  now?: () => number;
}

export interface WarehouseSandbox {
  url: string;
  port: number;
  token: string | undefined;
  /** The ledger: every shipment the service holds, hidden ones included, oldest first. Tests count this. */
  shipments(filter?: ShipmentFilter): Shipment[];
  /** Insert a shipment straight into the ledger; no idempotency involved. */
  seedShipment(
    payload: Record<string, unknown>,
    opts?: { idempotencyKey?: string; status?: string; created?: number },
  ): Shipment;
  /** e.g. processing → shipped. */
  setShipmentStatus(id: string, status: string): Shipment;
  faults: FaultQueue;
  stats: SandboxStats;
  close(): Promise<void>;
}

const ROUTES: Array<{ method: string; pattern: RegExp; name: string }> = [
  { method: 'POST', pattern: /^\/v1\/shipments$/, name: 'POST /v1/shipments' },
  { method: 'GET', pattern: /^\/v1\/shipments$/, name: 'GET /v1/shipments' },
  { method: 'GET', pattern: /^\/v1\/shipments\/([^/]+)$/, name: 'GET /v1/shipments/:id' },
];

function error(code: string, message: string): { error: { code: string; message: string } } {
  return { error: { code, message } };
}

export async function startWarehouseSandbox(opts: WarehouseSandboxOptions = {}): Promise<WarehouseSandbox> {
  const now = opts.now ?? Date.now;
  const ledger = new WarehouseLedger(now);
  const faults = new SandboxFaults();
  const stats = newStats();
  const idempotency = new IdempotencyStore(opts.keyRetentionMs ?? 7 * 24 * 3600_000, now);
  const defaultStatus = opts.shipmentStatus ?? 'created';

  const createShipment = async (req: IncomingMessage, res: ServerResponse, reqId: string, send: Send) => {
    const raw = await readBody(req, 64 * 1024);
    let payload: unknown;
    try {
      payload = JSON.parse(raw);
    } catch {
      return send(400, error('invalid_json', 'The request body must be a JSON object.'));
    }
    if (!payload || typeof payload !== 'object' || Array.isArray(payload)) {
      return send(400, error('invalid_json', 'The request body must be a JSON object.'));
    }
    const body = payload as Record<string, unknown>;
    if (body.client_reference !== undefined && typeof body.client_reference !== 'string') {
      return send(400, error('invalid_field', 'client_reference must be a string.'));
    }
    const header = req.headers['idempotency-key'];
    const key = typeof header === 'string' && header !== '' ? header : undefined;
    await runCreate({
      faults,
      req,
      res,
      idempotencyKey: key,
      now,
      send,
      faultResponse: (status) => ({
        body: error(
          status >= 500 ? 'unavailable' : status === 429 ? 'rate_limited' : `http_${status}`,
          `Sandbox fault: HTTP ${status}.`,
        ),
      }),
      // eslint-disable-next-line @typescript-eslint/require-await -- async so that a synchronous throw becomes a rejection
      execute: async (fault) => execute(body, key, reqId, fault),
    });
  };

  const execute = (
    body: Record<string, unknown>,
    key: string | undefined,
    reqId: string,
    fault: Fault | undefined,
  ): CreateOutcome => {
    const status = fault?.kind === 'initial_status' ? fault.status : defaultStatus;
    const headers: Record<string, string> = key ? { 'Idempotency-Key': key } : {};
    const commit = () => ledger.create(body, { idempotencyKey: key ?? null, status });
    const noop = () => {};
    if (!key) {
      const shipment = commit();
      return { status: 201, body: shipment, headers, finish: noop, hideUntil: (t) => ledger.hide(shipment.id, t) };
    }
    const begun = idempotency.begin('', key, 'POST /v1/shipments', fingerprint(body));
    switch (begun.kind) {
      case 'mismatch':
        return {
          status: 422,
          body: error(
            'idempotency_key_reused',
            `Idempotency-Key '${key}' was already used with a different request body.`,
          ),
          headers,
          finish: noop,
        };
      case 'in_progress':
        return {
          status: 409,
          body: error(
            'request_in_progress',
            `A request with Idempotency-Key '${key}' is still being processed; retry later.`,
          ),
          headers,
          finish: noop,
        };
      case 'replay':
        return {
          status: begun.response.status,
          body: begun.response.body,
          headers: { ...headers, 'Idempotent-Replayed': 'true' },
          finish: noop,
        };
      case 'new': {
        const shipment = commit();
        return {
          status: 201,
          body: shipment,
          headers,
          finish: () => begun.complete({ status: 201, body: shipment, requestId: reqId }),
          hideUntil: (t) => ledger.hide(shipment.id, t),
        };
      }
    }
  };

  const listShipments = (url: URL, send: Send) => {
    const p = url.searchParams;
    const int = (name: string) => {
      const v = p.get(name);
      return v === null ? undefined : /^\d+$/.test(v) ? Number(v) : NaN;
    };
    const q: ShipmentQuery = {
      client_reference: p.get('client_reference') ?? undefined,
      idempotency_key: p.get('idempotency_key') ?? undefined,
      created_gte: int('created_gte'),
      created_lte: int('created_lte'),
      limit: int('limit') ?? 20,
      starting_after: p.get('starting_after') ?? undefined,
    };
    for (const name of ['created_gte', 'created_lte', 'limit'] as const) {
      if (Number.isNaN(q[name]))
        return send(400, error('invalid_parameter', `${name} must be a non-negative integer.`));
    }
    if (q.limit < 1 || q.limit > 100) return send(400, error('invalid_parameter', 'limit must be between 1 and 100.'));
    if (q.starting_after && !ledger.has(q.starting_after)) {
      return send(400, error('invalid_parameter', `starting_after: no shipment ${q.starting_after}.`));
    }
    stats.listPages++;
    send(200, ledger.list(q));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const reqId = requestId();
    res.setHeader('Request-Id', reqId);
    const url = new URL(req.url ?? '/', 'http://warehouse');
    if (url.pathname.startsWith('/_sandbox/')) {
      await handleAdmin(req, res, faults, {
        'GET /ledger': (_b, q) => ({ data: ledger.shipments(Object.fromEntries(q)) }),
        'GET /stats': () => stats,
        'POST /seed/shipment': (b) => {
          const { idempotency_key, status, created, ...payload } = b;
          return ledger.create(payload, {
            idempotencyKey: typeof idempotency_key === 'string' ? idempotency_key : null,
            status: typeof status === 'string' ? status : defaultStatus,
            created: typeof created === 'number' ? created : undefined,
          });
        },
        'POST /shipment_status': (b) => ledger.setStatus(String(b.id), String(b.status)),
      });
      return;
    }
    const method = req.method ?? 'GET';
    let match: RegExpExecArray | null = null;
    const route = ROUTES.find((r) => r.method === method && (match = r.pattern.exec(url.pathname)));
    const name = route?.name ?? `${method} (unknown)`;
    stats.requests++;
    stats.byRoute[name] = (stats.byRoute[name] ?? 0) + 1;
    countStatus(stats, res);
    if (opts.latencyMs) await sleep(opts.latencyMs);
    const send: Send = (status, body, headers) => sendJson(res, status, body, headers);
    if (opts.token !== undefined && req.headers.authorization !== `Bearer ${opts.token}`) {
      return send(401, error('unauthorized', 'A valid bearer token is required.'));
    }
    if (!route) return send(404, error('not_found', `No route ${method} ${url.pathname}.`));
    if (route.name === 'POST /v1/shipments') return createShipment(req, res, reqId, send);
    if (route.name === 'GET /v1/shipments') return listShipments(url, send);
    const id = decodeURIComponent((match as RegExpExecArray | null)![1]);
    const shipment = ledger.get(id);
    if (!shipment) return send(404, error('not_found', `No shipment ${id}.`));
    send(200, shipment);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => sendJson(res, 500, error('internal', (err as Error).message)));
  });
  const host = opts.host ?? '127.0.0.1';
  const port = await listen(server, opts.port ?? 0, host);
  return {
    url: `http://${host}:${port}`,
    port,
    token: opts.token,
    shipments: (filter) => ledger.shipments(filter),
    seedShipment: (payload, o = {}) =>
      ledger.create(payload, {
        idempotencyKey: o.idempotencyKey ?? null,
        status: o.status ?? defaultStatus,
        created: o.created,
      }),
    setShipmentStatus: (id, status) => ledger.setStatus(id, status),
    faults,
    stats,
    async close() {
      faults.clear();
      await closeServer(server);
    },
  };
}

type Send = (status: number, body: unknown, headers?: Record<string, string>) => void;

/** Lines for `recon sandbox warehouse` to print. */
export function warehouseSandboxSummary(sb: WarehouseSandbox): string[] {
  return [
    `Warehouse sandbox listening on ${sb.url}`,
    `  provider config: {"type": "http", "baseUrl": "${sb.url}"${sb.token ? `, "headers": {"Authorization": "Bearer ${sb.token}"}` : ''}, ...} (docs/providers.md)`,
    `  control: POST ${sb.url}/_sandbox/faults · POST ${sb.url}/_sandbox/release · GET ${sb.url}/_sandbox/ledger`,
  ];
}
