/** The frame every recon tool runs in: the caller's actor, and no internal error shown to a model as a verdict. */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ZodType } from 'zod';
import { ID_PATTERN } from '../core/intake/validate.js';
import { invalidInput, type Answer } from './actions.js';
import { toolCall, type Agent, type ToolCall } from './context.js';
import { toolResult } from './result.js';

/** What a tool file registers on: McpServer's registerTool, with input the schema refuses answered as a refusal. */
export type Tools = Pick<McpServer, 'registerTool'>;
export type Register = (server: Tools, call: () => ToolCall) => void;

/** Binds tools to one MCP session: its client's name (from initialize) becomes the actor of each call. */
export function callsFor(server: McpServer, agent: Agent): () => ToolCall {
  return () => toolCall(agent, server.server.getClientVersion()?.name);
}

const INVALID = Symbol('recon.invalid_input');
type Invalid = { [INVALID]: { field: string; message: string; id: string | undefined } };

/**
 * Input the schema refuses is a tool result with `isError` and `refused: {rule: "invalid_input",
 * field}` (SPEC §9), not the SDK's protocol error text ("MCP error -32602: Input validation error"),
 * which gives a model nothing to act on and is not recorded. The SDK (1.32) validates input in
 * McpServer's private `validateToolInput` and throws; recon replaces that step on its own servers
 * with the same parse, handing a refusal marker to the tool instead (test/integration/mcp-answers
 * proves the result over stdio, so an SDK that renames the step fails a test, not an agent).
 */
export function reconTools(server: McpServer, call: () => ToolCall): Tools {
  const sdk = server as unknown as {
    validateToolInput(tool: { inputSchema?: ZodType }, args: unknown, name: string): Promise<unknown>;
  };
  if (typeof sdk.validateToolInput !== 'function')
    throw new Error('@modelcontextprotocol/sdk: validateToolInput moved');
  sdk.validateToolInput = async (tool, args) => {
    if (!tool.inputSchema) return args;
    const parsed = await tool.inputSchema.safeParseAsync(args ?? {});
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    const field = issue?.path.length ? issue.path.map(String).join('.') : 'arguments';
    // The operation the call was about, when its id at least is well formed: the refusal joins its trail.
    const id = (args as { operation_id?: unknown } | undefined)?.operation_id;
    return {
      [INVALID]: {
        field,
        message: `${field}: ${issue?.message ?? 'invalid'}`,
        id: typeof id === 'string' && ID_PATTERN.test(id) ? id : undefined,
      },
    } satisfies Invalid;
  };
  return {
    registerTool: ((
      name: string,
      config: object,
      handler: (args: unknown, extra: unknown) => Promise<CallToolResult>,
    ) =>
      (
        server.registerTool as (n: string, c: object, h: (a: unknown, e: unknown) => Promise<CallToolResult>) => unknown
      )(name, config, async (args: unknown, extra: unknown) => {
        const bad = (args as Partial<Invalid> | undefined)?.[INVALID];
        if (!bad) return handler(args, extra);
        const c = call();
        return guarded(c, name, bad.id, async () => {
          const a = await invalidInput(c, name, bad.id, bad.field, bad.message);
          if (name === 'list_open_actions')
            return toolResult(
              { actions: [], total: 0, message: a.result.message, next: 'none', refused: a.result.refused },
              true,
            );
          return answer(a);
        });
      })) as unknown as Tools['registerTool'],
  };
}

/** An Answer as a tool result: structuredContent plus the same JSON as text; a refusal is isError. */
export function answer(a: Answer<Record<string, unknown>>): CallToolResult {
  return toolResult(a.result, a.isError);
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
