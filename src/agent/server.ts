/**
 * recon as an MCP server (SPEC §9): an agent's consequential actions go through recon's operation
 * record. One McpServer per client session (stdio has one; HTTP one per session), all over the
 * same Agent: one store, opened once for the server's lifetime.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Agent } from './context.js';
import { registerCheckAction } from './check-action.js';
import { registerExecuteAction } from './execute-action.js';
import { registerGetAction } from './get-action.js';
import { registerListOpenActions } from './list-open-actions.js';
import { registerProposeAction } from './propose-action.js';
import { callsFor, reconTools } from './tool.js';

export type { Agent } from './context.js';

const INSTRUCTIONS =
  'recon records every consequential action (refunds, shipments) before it is sent, and finds out what ' +
  'happened when a request ends without an answer. Propose an action with propose_action, send it once with ' +
  'execute_action, and when the answer is outcome_unknown ask with check_action: never send the action again ' +
  'another way, and never give it a new operation_id. Every call is recorded in an audit trail under your client name.';

export function createAgentServer(agent: Agent, version: string): McpServer {
  const server = new McpServer({ name: 'recon', version }, { instructions: INSTRUCTIONS });
  const calls = callsFor(server, agent);
  const tools = reconTools(server, calls);
  for (const register of [
    registerProposeAction,
    registerExecuteAction,
    registerCheckAction,
    registerGetAction,
    registerListOpenActions,
  ])
    register(tools, calls);
  return server;
}
