/**
 * `recon mcp --http`: Streamable HTTP at `/mcp`, one MCP session (and McpServer) per client, every
 * request authorised with `Authorization: Bearer <RECON_MCP_TOKEN>` before anything is read or
 * recorded. A body that is not JSON gets a JSON-RPC parse error and the server keeps serving.
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Agent } from './context.js';
import { createAgentServer } from './server.js';

/** Tool calls are small JSON documents; a payload is at most 64 KiB (SPEC §7). */
const MAX_BODY_BYTES = 1024 * 1024;
/** A client that goes away without ending its session (DELETE) leaves it behind; it is closed after this long idle. */
const SESSION_IDLE_MS = 30 * 60_000;

export interface HttpServeOptions {
  port: number;
  host: string;
  token: string;
  version: string;
}

export interface HttpAgentServer {
  url: string;
  close(): Promise<void>;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  lastActive: number;
}

export async function serveHttp(agent: Agent, o: HttpServeOptions): Promise<HttpAgentServer> {
  const sessions = new Map<string, Session>();
  const expected = digest(`Bearer ${o.token}`);
  // Compared as digests of equal length, in constant time: the token is the only thing between the
  // network and an agent's refunds.
  const authorised = (header: string | undefined) => header !== undefined && timingSafeEqual(digest(header), expected);

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== '/mcp') return rpcError(res, 404, -32601, 'Not found: the MCP endpoint is /mcp');
    if (!authorised(req.headers.authorization)) {
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
    if (sessionId && !session) return rpcError(res, 404, -32001, 'Session not found: initialize a new session');
    if (session) session.lastActive = Date.now();
    if (req.method === 'GET' || req.method === 'DELETE') {
      if (!session) return rpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
      return session.transport.handleRequest(req, res);
    }
    if (req.method !== 'POST') return rpcError(res, 405, -32000, 'Method not allowed: POST, GET or DELETE /mcp');
    if (Number(header(req, 'content-length') ?? 0) > MAX_BODY_BYTES)
      return rpcError(res, 413, -32600, `Request too large: at most ${MAX_BODY_BYTES} bytes`);
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req));
    } catch (err) {
      if (err instanceof BodyTooLarge)
        return rpcError(res, 413, -32600, `Request too large: at most ${MAX_BODY_BYTES} bytes`);
      return rpcError(res, 400, -32700, 'Parse error: the request body is not JSON');
    }
    if (session) return session.transport.handleRequest(req, res, body);
    if (!isInitializeRequest(body))
      return rpcError(res, 400, -32000, 'Bad Request: no Mcp-Session-Id header; start with an initialize request');
    const server = createAgentServer(agent, o.version);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server, lastActive: Date.now() });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
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
  const sweep = setInterval(() => {
    for (const [id, s] of sessions)
      if (Date.now() - s.lastActive > SESSION_IDLE_MS) {
        sessions.delete(id);
        void s.server.close().catch(() => undefined);
      }
  }, 60_000);
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

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function rpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

class BodyTooLarge extends Error {}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new BodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
