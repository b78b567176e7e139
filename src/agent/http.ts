/**
 * `recon mcp --http`: Streamable HTTP at `/mcp` (MCP 2025-06-18), one MCP session (and McpServer)
 * per client. Before anything is read or recorded a request passes, in order: the DNS rebinding
 * checks (`Origin`, and `Host` on loopback: 403), the failed-authentication limit of its address
 * (429), and `Authorization: Bearer <RECON_MCP_TOKEN>` (401). Sessions are bounded (503 beyond
 * `maxSessions`; idle ones expire); a request body must arrive whole, small and in time (413, 408);
 * a request id already in flight in the session is refused (409); every request is answered, with a
 * timeout error if the tools have not answered in `requestTimeoutMs`.
 *
 * The SDK's web-standard transport does the protocol; this file reads the body itself (the
 * transport gets it parsed, so never reads one) and writes the transport's Response, so that a
 * request can be answered when the transport has not.
 */
import { hash, randomUUID, timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { isInitializeRequest, isJSONRPCRequest, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { formatDuration } from '../lib/durations.js';
import type { Agent } from './context.js';
import { BodyTimeout, BodyTooLarge, readBody } from '../lib/http-body.js';
import { allowedOrigin, AuthFailures, isLoopback, rebindingRefusal } from './http-guard.js';
import { createAgentServer } from './server.js';

/** Tool calls are small JSON documents; a payload is at most 64 KiB (SPEC §7). */
const MAX_BODY_BYTES = 1024 * 1024;
const DEFAULTS = {
  maxSessions: 100,
  sessionIdleMs: 10 * 60_000,
  requestTimeoutMs: 120_000,
  bodyTimeoutMs: 10_000,
};

export interface HttpServeOptions {
  port: number;
  host: string;
  token: string;
  version: string;
  /** Browser origins allowed to call (`--allow-origin`); a request with any other `Origin` gets 403. */
  allowOrigins?: string[];
  /** Live sessions at most (`--max-sessions`, default 100); an initialize beyond them gets 503. */
  maxSessions?: number;
  /** A session without requests for this long is closed (default 10 min), on the agent's clock. */
  sessionIdleMs?: number;
  /** A request the tools have not answered in this long gets a timeout error (default 120 s). */
  requestTimeoutMs?: number;
  /** A request body must have arrived whole this long after its headers (default 10 s), else 408. */
  bodyTimeoutMs?: number;
}

export interface HttpAgentServer {
  url: string;
  close(): Promise<void>;
}

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  server: McpServer;
  lastActive: number;
  /** Ids of the requests the transport has not answered yet: a second request with one of them is refused. */
  inFlight: Set<string>;
}

export async function serveHttp(agent: Agent, o: HttpServeOptions): Promise<HttpAgentServer> {
  const limits = {
    maxSessions: o.maxSessions ?? DEFAULTS.maxSessions,
    sessionIdleMs: o.sessionIdleMs ?? DEFAULTS.sessionIdleMs,
    requestTimeoutMs: o.requestTimeoutMs ?? DEFAULTS.requestTimeoutMs,
    bodyTimeoutMs: o.bodyTimeoutMs ?? DEFAULTS.bodyTimeoutMs,
  };
  const now = () => agent.now().getTime();
  const guard = { loopback: isLoopback(o.host), origins: new Set((o.allowOrigins ?? []).map(allowedOrigin)) };
  const sessions = new Map<string, Session>();
  const failures = new AuthFailures(now);
  const expected = digest(o.token);
  // Compared as digests of equal length, in constant time: the token is the only thing between the
  // network and an agent's refunds. The scheme is case-insensitive (RFC 7235).
  const authorised = (header: string | undefined) => {
    const m = header === undefined ? null : /^bearer +(.*)$/is.exec(header);
    return m !== null && timingSafeEqual(digest(m[1]), expected);
  };

  const idle = (s: Session, at: number) => s.inFlight.size === 0 && at - s.lastActive >= limits.sessionIdleMs;
  const expireIdle = () => {
    const at = now();
    for (const [id, s] of sessions)
      if (idle(s, at)) {
        sessions.delete(id);
        void s.server.close().catch(() => undefined);
      }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const refusal = rebindingRefusal(req, guard);
    if (refusal) return rpcError(res, 403, -32000, refusal);
    const origin = header(req, 'origin');
    if (origin !== undefined) allowCors(res, origin);
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== '/mcp') return rpcError(res, 404, -32601, 'Not found: the MCP endpoint is /mcp');
    // A browser asks before it sends Authorization; only an allowed Origin gets this far.
    if (req.method === 'OPTIONS' && origin !== undefined) return preflight(res);

    const address = req.socket.remoteAddress ?? 'unknown';
    const until = failures.blockedUntil(address);
    if (until !== undefined) {
      const seconds = Math.max(1, Math.ceil((until - now()) / 1000));
      res.setHeader('Retry-After', String(seconds));
      return rpcError(
        res,
        429,
        -32000,
        `Too many failed authentications from ${address}: its requests are refused for ${seconds}s more (until ${new Date(until).toISOString()})`,
      );
    }
    if (!authorised(req.headers.authorization)) {
      if (failures.fail(address))
        agent.log(
          `http: ${failures.limit} failed authentications from ${address} within ${formatDuration(failures.windowMs)}; refusing its requests for the rest of that time`,
        );
      res.setHeader('WWW-Authenticate', 'Bearer realm="recon"');
      return rpcError(
        res,
        401,
        -32001,
        'Unauthorized: send Authorization: Bearer <the RECON_MCP_TOKEN of this server>',
      );
    }

    const sessionId = header(req, 'mcp-session-id');
    const session = sessionId ? sessions.get(sessionId) : undefined;
    if (sessionId && (!session || idle(session, now()))) {
      if (session) expireIdle();
      return rpcError(res, 404, -32001, 'Session not found: initialize a new session');
    }
    if (session) session.lastActive = now();
    if (req.method === 'GET' || req.method === 'DELETE') {
      if (!session) return rpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
      return send(res, await session.transport.handleRequest(webRequest(req)));
    }
    if (req.method !== 'POST') return rpcError(res, 405, -32000, 'Method not allowed: POST, GET or DELETE /mcp');

    if (Number(header(req, 'content-length') ?? 0) > MAX_BODY_BYTES) return tooLarge(res);
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req, { maxBytes: MAX_BODY_BYTES, timeoutMs: limits.bodyTimeoutMs }));
    } catch (err) {
      if (err instanceof BodyTooLarge) return tooLarge(res);
      if (err instanceof BodyTimeout) {
        res.setHeader('Connection', 'close');
        return rpcError(
          res,
          408,
          -32000,
          `Request Timeout: the request body did not arrive within ${formatDuration(limits.bodyTimeoutMs)}`,
        );
      }
      if (!(err instanceof SyntaxError)) throw err;
      return rpcError(res, 400, -32700, 'Parse error: the request body is not JSON');
    }

    if (session) return answer(session, req, res, body);
    if (!isInitializeRequest(body))
      return rpcError(res, 400, -32000, 'Bad Request: no Mcp-Session-Id header; start with an initialize request');
    expireIdle();
    if (sessions.size >= limits.maxSessions) {
      const at = now();
      const soonest = Math.min(
        ...[...sessions.values()].map((s) => (s.inFlight.size ? Infinity : s.lastActive + limits.sessionIdleMs - at)),
      );
      const seconds = Math.max(1, Math.ceil((Number.isFinite(soonest) ? soonest : limits.sessionIdleMs) / 1000));
      res.setHeader('Retry-After', String(seconds));
      return rpcError(
        res,
        503,
        -32000,
        `Too many sessions: this server keeps at most ${limits.maxSessions} (--max-sessions), and a session ends on DELETE /mcp or after ${formatDuration(limits.sessionIdleMs)} without requests; retry in ${seconds}s`,
        (body as { id?: RequestId }).id ?? null,
      );
    }
    // The session takes its place before anything is awaited, so concurrent initializes cannot pass the cap together.
    const id = randomUUID();
    const server = createAgentServer(agent, o.version);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      enableJsonResponse: true,
    });
    const created: Session = { transport, server, lastActive: now(), inFlight: new Set() };
    sessions.set(id, created);
    transport.onclose = () => {
      if (sessions.get(id) === created) sessions.delete(id);
    };
    try {
      await server.connect(transport);
      await answer(created, req, res, body);
    } finally {
      // An initialize the transport refused (or that failed) leaves no session behind.
      if (transport.sessionId === undefined) {
        sessions.delete(id);
        void server.close().catch(() => undefined);
      }
    }
  };

  /**
   * Hands a POST's messages to the session's transport and writes its answer, or, if the tools
   * have not answered in time, a timeout error per request (the request goes on; its id stays in
   * use until the transport answers it).
   */
  const answer = async (session: Session, req: IncomingMessage, res: ServerResponse, body: unknown) => {
    const requests = (Array.isArray(body) ? body : [body]).filter((m) => isJSONRPCRequest(m));
    const keys = requests.map((r) => JSON.stringify(r.id));
    const duplicate = requests.find((r, i) => session.inFlight.has(keys[i]) || keys.indexOf(keys[i]) !== i);
    if (duplicate) {
      return rpcError(
        res,
        409,
        -32600,
        `Invalid Request: id ${JSON.stringify(duplicate.id)} is already in use by a request of this session that has not been answered, so this request was not processed; wait for that answer, and give each request in flight its own id`,
        duplicate.id,
      );
    }
    for (const k of keys) session.inFlight.add(k);
    const answered = session.transport.handleRequest(webRequest(req), { parsedBody: body }).finally(() => {
      for (const k of keys) session.inFlight.delete(k);
      session.lastActive = now();
      releaseAnswered(session.transport);
    });
    if (requests.length === 0) return send(res, await answered);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), limits.requestTimeoutMs);
    });
    const r = await Promise.race([answered, timedOut]).finally(() => clearTimeout(timer));
    if (r) return send(res, r);
    // The transport may still answer: its Response then goes nowhere.
    answered.catch((err: unknown) => agent.log(`http: ${(err as Error)?.stack ?? String(err)}`));
    const message = `Request timed out: recon did not answer within ${formatDuration(limits.requestTimeoutMs)}, and may still complete it. Do not send it again; for a tool call, ask get_action for the operation's state`;
    const errors = requests.map((q) => ({ jsonrpc: '2.0', id: q.id, error: { code: -32001, message } }));
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': session.transport.sessionId ?? '' });
    res.end(JSON.stringify(Array.isArray(body) ? errors : errors[0]));
  };

  const httpServer = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      agent.log(`http: ${(err as Error)?.stack ?? String(err)}`);
      if (!res.headersSent) rpcError(res, 500, -32603, 'Internal error (logged for the operator)');
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(o.port, o.host, () => resolve());
  });
  const sweep = setInterval(
    () => {
      expireIdle();
      failures.sweep();
    },
    Math.min(60_000, Math.max(1_000, limits.sessionIdleMs / 2)),
  );
  sweep.unref();
  const address = httpServer.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}/mcp`,
    async close() {
      clearInterval(sweep);
      for (const s of [...sessions.values()]) await s.server.close().catch(() => undefined);
      sessions.clear();
      await new Promise<void>((resolve) => {
        httpServer.close(() => resolve());
        // Open SSE streams and idle keep-alive connections would hold close() forever.
        httpServer.closeAllConnections();
      });
    },
  };
}

/**
 * The SDK (1.32) in JSON response mode keeps each POST's entry in the transport's private
 * `_streamMapping` once it has answered it (it ends only SSE streams): the entry's resolver, with
 * the answered Response and its stream, for as long as the session lives. A session of an agent
 * that works all day kept ~6 KB per tool call (heap snapshots of `recon mcp --http`: 2,400 more
 * retained Response objects after 2,400 more calls, through `_streamMapping`). Entries none of whose
 * requests is still waiting for an answer are let go here (test/unit/http-release proves both the
 * SDK's behaviour and this, so an SDK that changes either fails a test).
 */
export function releaseAnswered(transport: WebStandardStreamableHTTPServerTransport): void {
  const t = transport as unknown as {
    _streamMapping?: Map<string, { resolveJson?: unknown }>;
    _requestToStreamMapping?: Map<RequestId, string>;
  };
  if (!t._streamMapping || !t._requestToStreamMapping) return;
  const waiting = new Set(t._requestToStreamMapping.values());
  for (const [id, stream] of t._streamMapping) if (stream.resolveJson && !waiting.has(id)) t._streamMapping.delete(id);
}

/** sha256 of `s`, one-shot (every request's token is compared as one). */
function digest(s: string): Buffer {
  return hash('sha256', s, 'buffer');
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The request as the SDK's web-standard transport reads it: method, URL and headers (the body is passed parsed). */
function webRequest(req: IncomingMessage): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name === 'host') continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return new Request(new URL(req.url ?? '/mcp', 'http://localhost'), { method: req.method, headers });
}

/** Writes the transport's Response: a JSON document, or an SSE stream until either side ends it. */
async function send(res: ServerResponse, r: Response): Promise<void> {
  if (!r.body || r.headers.get('content-type')?.startsWith('text/event-stream') !== true) {
    // A JSON answer (or none) is written whole, with its length: one write, where a stream pipeline
    // wrote headers, chunks and the last chunk apart, and built and aborted an AbortController per
    // answer (~5% of the server's CPU per tool call, profiled under the agents bench).
    const body = r.body ? Buffer.from(await r.arrayBuffer()) : undefined;
    res.writeHead(r.status, { ...Object.fromEntries(r.headers), ...(body ? { 'content-length': body.length } : {}) });
    res.end(body);
    return;
  }
  res.writeHead(r.status, Object.fromEntries(r.headers));
  // A client that goes away ends the pipeline early, and cancels the stream (the transport forgets it).
  await pipeline(Readable.fromWeb(r.body as NodeReadableStream<Uint8Array>), res).catch(() => undefined);
}

function allowCors(res: ServerResponse, origin: string): void {
  res.setHeader('Access-Control-Allow-Origin', origin);
  res.setHeader('Vary', 'Origin');
  res.setHeader('Access-Control-Expose-Headers', 'Mcp-Session-Id, WWW-Authenticate, Retry-After');
}

function preflight(res: ServerResponse): void {
  res.writeHead(204, {
    'Access-Control-Allow-Methods': 'POST, GET, DELETE',
    'Access-Control-Allow-Headers':
      'Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID',
    'Access-Control-Max-Age': '600',
  });
  res.end();
}

function tooLarge(res: ServerResponse): void {
  res.setHeader('Connection', 'close');
  rpcError(res, 413, -32600, `Request too large: at most ${MAX_BODY_BYTES} bytes`);
}

/**
 * A JSON-RPC error as the whole answer. A request whose body was not read (refused on its headers)
 * closes its connection: the body is not waited for.
 */
function rpcError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  id: RequestId | null = null,
): void {
  if (!res.req.complete) res.setHeader('Connection', 'close');
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
