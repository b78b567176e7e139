/**
 * Faults on lookups. The sandboxes inject faults into create requests only (src/sandbox/faults.ts);
 * a lookup that errors, is throttled, hangs or loses its connection is just as much a part of a bad
 * day at a provider. This proxy sits between recon and a sandbox, passes everything through, and
 * applies queued faults to list requests (GET /v1/refunds, GET /v1/shipments), keyed by what the
 * lookup asks about: the payment intent or charge, the client reference, or `*` for an unfiltered
 * listing (an audit).
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const LOOKUP_FAULT_KINDS = ['status_500', 'status_503', 'status_429', 'drop', 'slow'] as const;
export type LookupFaultKind = (typeof LOOKUP_FAULT_KINDS)[number];

export interface FaultProxy {
  url: string;
  /** Applies `kind` to the next `times` list requests about `key`. */
  inject(key: string, kind: LookupFaultKind, times: number): void;
  /** Drops every queued fault (the calm after the storm). */
  clear(): void;
  /** Faults applied so far, by kind. */
  applied: Record<string, number>;
  close(): Promise<void>;
}

/** Longer than the providers' `timeout` in the campaign config: the client gives up first. */
const SLOW_MS = 2_500;

export async function startFaultProxy(target: string, errorBody: (status: number) => unknown): Promise<FaultProxy> {
  const upstream = new URL(target);
  const queues = new Map<string, { kind: LookupFaultKind; remaining: number }[]>();
  const applied: Record<string, number> = {};

  const take = (key: string): LookupFaultKind | undefined => {
    const q = queues.get(key);
    const head = q?.[0];
    if (!head) return undefined;
    if (--head.remaining <= 0) q.shift();
    applied[head.kind] = (applied[head.kind] ?? 0) + 1;
    return head.kind;
  };

  const forward = (req: IncomingMessage, res: ServerResponse) => {
    const out = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const isList = req.method === 'GET' && /^\/v1\/(refunds|shipments)$/.test(url.pathname);
    const key = isList
      ? (url.searchParams.get('payment_intent') ??
        url.searchParams.get('charge') ??
        url.searchParams.get('client_reference') ??
        '*')
      : undefined;
    const fault = key === undefined ? undefined : take(key);
    if (!fault) return forward(req, res);
    if (fault === 'drop') {
      res.socket?.destroy();
      return;
    }
    if (fault === 'slow') {
      setTimeout(() => (res.destroyed ? undefined : forward(req, res)), SLOW_MS);
      return;
    }
    const status = Number(fault.slice('status_'.length));
    const text = JSON.stringify(errorBody(status));
    res.writeHead(status, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(text),
      ...(status === 429 ? { 'Retry-After': '1' } : {}),
    });
    res.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    inject(key, kind, times) {
      const q = queues.get(key) ?? [];
      q.push({ kind, remaining: times });
      queues.set(key, q);
    },
    clear: () => queues.clear(),
    applied,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
