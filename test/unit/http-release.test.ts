/**
 * `recon mcp --http` sessions live as long as their agent works: what the SDK's transport keeps per
 * request must go once the request is answered (src/agent/http.ts `releaseAnswered`). The SDK's real
 * McpServer and web-standard transport in JSON response mode, as http.ts makes them.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { releaseAnswered } from '../../src/agent/http.js';

const kept = (t: WebStandardStreamableHTTPServerTransport) =>
  (t as unknown as { _streamMapping: Map<string, unknown> })._streamMapping.size;

async function session() {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const server = new McpServer({ name: 'test', version: '1' });
  server.registerTool('quick', { inputSchema: { n: z.number() } }, async ({ n }) => ({
    content: [{ type: 'text', text: String(n) }],
  }));
  server.registerTool('held', { inputSchema: {} }, async () => {
    await held;
    return { content: [{ type: 'text', text: 'done' }] };
  });
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => 'session-1',
    enableJsonResponse: true,
  });
  await server.connect(transport);
  const post = (body: unknown) =>
    transport.handleRequest(
      new Request('http://localhost/mcp', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-session-id': 'session-1',
          'mcp-protocol-version': '2025-06-18',
        },
      }),
      { parsedBody: body },
    );
  await post({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
  });
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
  releaseAnswered(transport);
  const call = (id: number, name: string, args: Record<string, unknown>) =>
    post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
  return { transport, call, release, close: () => server.close() };
}

it('a tool call answered as JSON leaves nothing in the session once released; the SDK alone keeps one entry per call', async () => {
  const s = await session();
  for (let i = 1; i <= 5; i++) expect((await s.call(i, 'quick', { n: i })).status).toBe(200);
  // What releaseAnswered is for: the SDK keeps each answered POST's entry (its Response) for the session's life.
  expect(kept(s.transport)).toBe(5);
  releaseAnswered(s.transport);
  expect(kept(s.transport)).toBe(0);
  await s.close();
});

it('a request still waiting for its answer keeps its entry, and is answered after a release', async () => {
  const s = await session();
  const waiting = s.call(1, 'held', {});
  expect((await s.call(2, 'quick', { n: 2 })).status).toBe(200);
  releaseAnswered(s.transport);
  expect(kept(s.transport)).toBe(1);
  s.release();
  const r = await waiting;
  expect(await r.json()).toMatchObject({ id: 1, result: { content: [{ text: 'done' }] } });
  releaseAnswered(s.transport);
  expect(kept(s.transport)).toBe(0);
  await s.close();
});
