/**
 * tools/list is answered once per process (src/agent/server.ts, shareToolList): every session's
 * McpServer lists the same tools, and the SDK would turn their zod schemas into JSON Schema on each
 * call. Two sessions get the very same answer, and it is the tools the SDK lists (names, schemas).
 * Through the SDK's own client, so a SDK that moves its handlers fails here, not in a bench.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { describe, expect, it } from 'vitest';
import { createAgentServer, type Agent } from '../../src/agent/server.js';

type Handlers = Map<string, (request: unknown, extra: unknown) => Promise<unknown>>;

async function session(agent: Agent) {
  const server = createAgentServer(agent, 'test');
  const client = new Client({ name: 'tool-list-test', version: '1.0.0' });
  const [c, s] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(s), client.connect(c)]);
  return { server, client };
}

describe('tools/list', () => {
  it('is made once and given to every session', async () => {
    // Listing reads nothing of the agent: no store, no provider.
    const agent = {} as Agent;
    const a = await session(agent);
    const b = await session(agent);
    try {
      const listA = await a.client.listTools();
      const listB = await b.client.listTools();
      expect(listA.tools.map((t) => t.name).sort()).toEqual([
        'check_action',
        'execute_action',
        'get_action',
        'list_open_actions',
        'propose_action',
      ]);
      expect(listB).toEqual(listA);
      const propose = listA.tools.find((t) => t.name === 'propose_action')!;
      expect(propose.inputSchema.required).toEqual(['provider', 'action', 'operation_id', 'payload']);
      expect(propose.outputSchema?.properties).toHaveProperty('state');
      // The same object, not an equal one made again.
      const handler = (s: typeof a) =>
        (s.server.server as unknown as { _requestHandlers: Handlers })._requestHandlers.get('tools/list')!;
      const request = { method: 'tools/list', params: {} };
      expect(await handler(a)(request, {})).toBe(await handler(b)(request, {}));
    } finally {
      await Promise.all([a.client.close(), b.client.close()]);
    }
  });
});
