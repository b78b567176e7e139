import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { Agent } from '../src/agent/context.js';
import { redact, registerSecret } from '../src/config/redact.js';
import { UsageError } from '../src/errors.js';
import type { Db } from '../src/store/db.js';
import { action, parsePort, parsePositiveInt } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info } from './support/io.js';

export interface McpOptions {
  http?: boolean;
  port?: number;
  host?: string;
  allowOrigin?: string[];
  maxSessions?: number;
}

/** Beyond loopback, a token anyone on the network can try must not be guessable (SPEC §9). */
const MIN_TOKEN_LENGTH = 32;

export function register(program: Command): void {
  program
    .command('mcp')
    .description(
      "serve recon's tools to an AI agent (Model Context Protocol): over stdio, or Streamable HTTP with --http",
    )
    .option('--http', 'serve Streamable HTTP at /mcp instead of stdio (needs RECON_MCP_TOKEN)')
    .option('--port <n>', 'with --http: port to listen on (0: any free port, printed on start)', parsePort('--port'))
    .option('--host <host>', 'with --http: address to bind (default 127.0.0.1)')
    .option(
      '--allow-origin <url>',
      'with --http: a web page origin allowed to call (repeatable); requests with any other Origin get 403',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option(
      '--max-sessions <n>',
      'with --http: live MCP sessions at most (default 100); beyond them initialize gets 503',
      parsePositiveInt('--max-sessions'),
    )
    .addHelpText(
      'after',
      `
Tools: propose_action, execute_action, check_action, get_action, list_open_actions.
Agents never approve: a provider's "autoApprove": {"maxAmount": 5000, "currencies": ["usd"]}
approves small actions when proposed; anything else waits for: recon ops approve ID --ref REF.
Every tool call is an audit event with actor mcp:<client name>. Over stdio, stdout carries the
protocol and nothing else; the server stops when stdin closes, on SIGINT or SIGTERM.

Over HTTP every request needs Authorization: Bearer $RECON_MCP_TOKEN (10 failures in a minute
from one address: 429 for the rest of it). A request with an Origin header (a web page) gets 403
unless --allow-origin names it; on loopback the Host must be localhost, 127.0.0.1 or [::1]. A
session ends on DELETE /mcp or after 10 min without requests; a request not answered in 120s gets
a timeout error. Beyond loopback (--host) the token must be at least 32 characters.

Examples:
  $ recon mcp                                              # an agent host starts this (stdio)
  $ RECON_MCP_TOKEN=$(openssl rand -hex 32) recon mcp --http --port 8765
  $ recon mcp --http --port 8765 --host 0.0.0.0 --max-sessions 20
  $ recon mcp --http --port 8765 --allow-origin https://console.example.com --allow-origin http://localhost:5173`,
    )
    .action(action<McpOptions>(async (_args, opts, deps) => runMcp(opts, deps)));
}

/**
 * What the tools work with: the store, kept open by the server, the config, the providers, the
 * clock and a redacting log. `now` defaults to the deps' clock.
 */
export async function mcpAgent(deps: Deps, db: Db, now: () => Date = deps.now): Promise<Agent> {
  return {
    db,
    config: await deps.config(),
    now,
    auditKey: await deps.auditKey(),
    provider: (name) => deps.provider(name),
    // Errors can quote configuration (URLs with credentials, headers): redacted like every other message.
    log: (line) => deps.io.err.write(`recon mcp: ${redact(line)}\n`),
  };
}

export async function runMcp(o: McpOptions, deps: Deps): Promise<void> {
  if (
    !o.http &&
    (o.port !== undefined || o.host !== undefined || o.allowOrigin !== undefined || o.maxSessions !== undefined)
  )
    throw new UsageError(
      '--port/--host/--allow-origin/--max-sessions: only with --http (without it, recon mcp serves stdio)',
    );
  if (o.http && o.port === undefined) throw new UsageError('--port: required with --http, e.g. --port 8765');
  const token = deps.env.RECON_MCP_TOKEN;
  if (o.http && !token)
    throw new UsageError(
      'RECON_MCP_TOKEN: required with --http; set it to a long random secret (e.g. openssl rand -hex 32) and give agents the same bearer token',
    );
  if (token) registerSecret(token);
  const host = o.host ?? '127.0.0.1';
  const http = o.http ? await import('../src/agent/http-guard.js') : undefined;
  // Checked before the store opens: nothing is started on a bad flag.
  const allowOrigins = o.allowOrigin?.map((v) => http!.allowedOrigin(v));
  if (http && !http.isLoopback(host) && token!.length < MIN_TOKEN_LENGTH)
    throw new UsageError(
      `RECON_MCP_TOKEN: ${token!.length} characters; serving beyond loopback (--host ${host}) needs at least ${MIN_TOKEN_LENGTH}, anyone on the network can try it (e.g. openssl rand -hex 32)`,
    );
  // One store for the server's lifetime (one PGlite boot; on the embedded store it holds the lock).
  const agent = await mcpAgent(deps, await deps.store());
  const version = packageVersion();
  if (o.http) {
    const { serveHttp } = await import('../src/agent/http.js');
    const server = await serveHttp(agent, {
      port: o.port!,
      host,
      token: token!,
      version,
      allowOrigins,
      maxSessions: o.maxSessions,
    });
    info(deps.io, `recon mcp: serving ${server.url} (Authorization: Bearer $RECON_MCP_TOKEN); Ctrl-C to stop`);
    await stopped([]);
    await server.close();
    return;
  }
  const { createAgentServer } = await import('../src/agent/server.js');
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
  const server = createAgentServer(agent, version);
  const transport = new StdioServerTransport(deps.io.stdin as NodeJS.ReadStream, deps.io.out);
  const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
  await server.connect(transport);
  info(deps.io, 'recon mcp: serving on stdio');
  // The agent host ends the session by closing our stdin; a host that went away makes stdout fail (EPIPE).
  const gone = new Promise<void>((resolve) => deps.io.out.once('error', () => resolve()));
  await Promise.race([stopped([deps.io.stdin]), closed, gone]);
  await server.close();
}

/** Resolves on SIGINT, SIGTERM, or the end of any of `streams`. */
function stopped(streams: NodeJS.ReadableStream[]): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    for (const s of streams) {
      s.once('end', stop);
      s.once('close', stop);
    }
  });
}

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    return pkg.version;
  } catch {
    return '0.0.0';
  }
}
