import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Command } from 'commander';
import { ingestWebhook, type IngestResult } from '../src/core/webhooks.js';
import { NotFoundError, ReconError, UsageError } from '../src/errors.js';
import { action, parsePositiveInt } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, readAll } from './support/io.js';

export function register(program: Command): void {
  const webhook = program
    .command('webhook')
    .description('ingest provider events: verified, deduplicated, matched to operations')
    .addHelpText(
      'after',
      '\nExamples:\n  $ recon webhook ingest event.json --provider stripe --signature "$SIG"\n  $ recon webhook serve --port 8787',
    );
  webhook
    .command('ingest')
    .description('ingest one event from a file or stdin')
    .argument('[file]', 'event JSON file, or - for stdin (default)')
    .requiredOption('--provider <name>', 'the provider that sent it')
    .option('--signature <header>', 'the signature header as received (Stripe-Signature)')
    .addHelpText(
      'after',
      '\nAn invalid signature exits 2 and records nothing; a duplicate delivery is recorded as seen and changes nothing.\n\nExample:\n  $ recon webhook ingest event.json --provider stripe --signature "t=1733142000,v1=5257a8…"',
    )
    .action(
      action<{ provider: string; signature?: string }>(async ([file], opts, deps) => {
        const body =
          !file || file === '-'
            ? await readAll(deps.io.stdin)
            : await readFile(file, 'utf8').catch((e) => {
                throw e.code === 'ENOENT' ? new NotFoundError(`${file}: no such file`) : e;
              });
        const core = await deps.core();
        const provider = await deps.provider(opts.provider);
        const r = await ingestWebhook(core, provider, body, opts.signature);
        if (deps.globals.json) printJson(deps.io, r);
        else info(deps.io, describe(r));
      }),
    );
  webhook
    .command('serve')
    .description('receive provider webhooks over HTTP (POST /webhooks/PROVIDER, or / for the only webhook provider)')
    .requiredOption('--port <n>', 'port to listen on (0: any free port, printed on start)', parsePort)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--provider <name>', 'provider for requests to / (default: the only provider with a webhook secret)')
    .addHelpText(
      'after',
      '\nResponds 400 to a bad signature, 200 to a duplicate, 200 when applied.\n\nExample:\n  $ recon webhook serve --port 8787 --provider stripe',
    )
    .action(action<{ port: number; host: string; provider?: string }>(async (_a, opts, deps) => serve(opts, deps)));
}

/** A TCP port; 0 asks the system for a free one (what tests use: no port chosen then taken by another). */
function parsePort(value: string): number {
  return value === '0' ? 0 : parsePositiveInt('--port')(value);
}

function describe(r: IngestResult): string {
  if (r.duplicate) return `${r.event_id} (${r.type}): duplicate delivery, already seen; nothing changed`;
  if (!r.operation_id) return `${r.event_id} (${r.type}): no matching operation; recorded`;
  return `${r.event_id} (${r.type}): ${r.operation_id} ${r.effect}${r.state ? ` → ${r.state}` : ''}`;
}

async function serve(opts: { port: number; host: string; provider?: string }, deps: Deps): Promise<void> {
  const core = await deps.core();
  const config = await deps.config();
  const fallback =
    opts.provider ??
    Object.entries(config.providers).find(([, p]) => (p as { webhookSecret?: string }).webhookSecret)?.[0];
  const server = http.createServer(async (req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    try {
      if (req.method !== 'POST') return reply(405, { error: 'POST only' });
      const m = /^\/webhooks\/([^/?]+)/.exec(req.url ?? '');
      const name = m ? decodeURIComponent(m[1]) : fallback;
      if (!name) return reply(404, { error: 'no provider: POST /webhooks/PROVIDER' });
      const provider = await deps.provider(name);
      const body = await readAll(req);
      const sig = req.headers['stripe-signature'] ?? req.headers['x-signature'];
      const r = await ingestWebhook(core, provider, body, Array.isArray(sig) ? sig[0] : sig);
      info(deps.io, describe(r));
      reply(200, r);
    } catch (err) {
      const status = err instanceof UsageError ? 400 : err instanceof ReconError && err.exitCode === 3 ? 404 : 500;
      info(deps.io, `webhook rejected (${status}): ${(err as Error).message}`);
      reply(status, { error: (err as Error).message });
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  info(deps.io, `listening on http://${opts.host}:${port} (POST /webhooks/PROVIDER); Ctrl-C to stop`);
  if (deps.globals.json) printJson(deps.io, { listening: `http://${opts.host}:${port}` });
  await new Promise<void>((resolve) => {
    const stop = () => server.close(() => resolve());
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
