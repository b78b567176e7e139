/**
 * recon as an MCP server (SPEC §9): an agent's consequential actions go through recon's operation
 * record. One McpServer per client session (stdio has one; HTTP one per session), all over the
 * same Agent: one store, opened once for the server's lifetime.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
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

/**
 * One JSON Schema validator for every session of the process. Without it the SDK builds a new one
 * (an Ajv instance with its formats) for each McpServer, that is for each HTTP session: ~0.7 ms of
 * CPU and an Ajv's worth of heap per session, for a validator the server uses only to check
 * elicitation answers, which recon never asks for.
 */
let validator: AjvJsonSchemaValidator | undefined;

export function createAgentServer(agent: Agent, version: string): McpServer {
  const server = new McpServer(
    { name: 'recon', version },
    { instructions: INSTRUCTIONS, jsonSchemaValidator: (validator ??= new AjvJsonSchemaValidator()) },
  );
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
  shareToolList(server);
  return server;
}

type ListHandler = (request: unknown, extra: unknown) => Promise<unknown>;

/** This process's tools/list answer, made once by the first session's McpServer. */
let toolList: Promise<unknown> | undefined;

/**
 * Every session's McpServer lists the same tools (registered above, never changed), and the SDK
 * turns their zod schemas into JSON Schema anew on each tools/list: ~4 ms of CPU each, a sixth of
 * `recon mcp --http`'s time in 300 sessions opened, listed and closed (issue 28, node --cpu-prof).
 * The first answer is kept and given to every session. The SDK's own handler (the protocol keeps it
 * in a private map) makes it; should that map move, each session lists as the SDK does.
 */
function shareToolList(server: McpServer): void {
  const handlers = (server.server as unknown as { _requestHandlers?: Map<string, ListHandler> })._requestHandlers;
  const sdk = handlers?.get('tools/list');
  if (!handlers || !sdk) return;
  handlers.set('tools/list', (request, extra) => {
    toolList ??= sdk(request, extra).catch((err: unknown) => {
      toolList = undefined;
      throw err;
    });
    return toolList;
  });
}
