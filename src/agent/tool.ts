/** The frame every recon tool runs in: the caller's actor, and no internal error shown to a model as a verdict. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { toolCall, type Agent, type ToolCall } from './context.js';

export type Register = (server: McpServer, call: () => ToolCall) => void;

/** Binds tools to one MCP session: its client's name (from initialize) becomes the actor of each call. */
export function callsFor(server: McpServer, agent: Agent): () => ToolCall {
  return () => toolCall(agent, server.server.getClientVersion()?.name);
}

/**
 * Runs a tool body. An unexpected error (the store went away, a bug) goes to the operator's log
 * in full; the agent is told only that recon could not answer and must not act on a guess. Its
 * wording never says "failed": the operation's state, not this call, says what happened.
 */
export async function guarded(
  call: ToolCall,
  tool: string,
  operationId: string | undefined,
  body: () => Promise<CallToolResult>,
): Promise<CallToolResult> {
  try {
    return await body();
  } catch (err) {
    call.agent.log(`${tool}${operationId ? ` ${operationId}` : ''}: ${(err as Error)?.stack ?? String(err)}`);
    const text =
      `recon could not answer this ${tool} call (internal error, logged for the operator). ` +
      'Do not try the action again and do not assume it happened or not' +
      (operationId ? `; ask again with get_action ${operationId} in a moment.` : '.');
    return { content: [{ type: 'text', text }], isError: true };
  }
}
