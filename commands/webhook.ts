import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Command } from 'commander';
import { ingestEvents, ingestWebhook, type Delivery, type IngestResult } from '../src/core/found/webhooks.js';
import { batcher } from '../src/lib/batch.js';
import { redact } from '../src/config/redact.js';
import { parseDuration } from '../src/lib/durations.js';
import { NotFoundError, UsageError } from '../src/errors.js';
import { BodyAborted, BodyTimeout, BodyTooLarge, readBody } from '../src/lib/http-body.js';
import { action, parsePort } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, readAll, warn } from './support/io.js';

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
      action<Omit<IngestOptions, 'file'>>(async ([file], opts, deps) => {
        const r = await runIngest({ file, ...opts }, deps);
        if (deps.globals.json) printJson(deps.io, r);
        else info(deps.io, describe(r));
      }),
    );
  webhook
    .command('serve')
    .description('receive provider webhooks over HTTP (POST /webhooks/PROVIDER, or / for the only webhook provider)')
    .requiredOption('--port <n>', 'port to listen on (0: any free port, printed on start)', parsePort('--port'))
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--provider <name>', 'provider for requests to / (default: the only provider with a webhook secret)')
    .option('--body-timeout <duration>', 'time allowed to receive a request body; slower gets 408', '10s')
    .addHelpText(
      'after',
      '\nResponds 400 to a bad signature, 200 to a duplicate, 200 when applied; 413 to a body over 1 MiB, 408 to a body slower than --body-timeout, 404 to an unknown provider.\n\nExample:\n  $ recon webhook serve --port 8787 --provider stripe',
    )
    .action(action<ServeOptions>(async (_a, opts, deps) => runServe(opts, deps)));
}

export interface IngestOptions {
  /** The event JSON file; undefined or - for stdin (deps.io.stdin). */
  file?: string;
  provider: string;
  /** The signature header as received (Stripe-Signature). */
  signature?: string;
}

/** Reads one event, verifies it, records it once and applies it to its operation. */
export async function runIngest(o: IngestOptions, deps: Deps): Promise<IngestResult> {
  const { file } = o;
  const body =
    !file || file === '-'
      ? await readAll(deps.io.stdin)
      : await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => {
          throw e.code === 'ENOENT'
            ? new UsageError(`${file}: no such file; give an existing FILE, or - for stdin`)
            : e;
        });
  const core = await deps.core();
  const provider = await deps.provider(o.provider);
  return ingestWebhook(core, provider, body, o.signature);
}

function describe(r: IngestResult): string {
  if (r.duplicate) return `${r.event_id} (${r.type}): duplicate delivery, already seen; nothing changed`;
  if (!r.operation_id) return `${r.event_id} (${r.type}): no matching operation; recorded`;
  return `${r.event_id} (${r.type}): ${r.operation_id} ${r.effect}${r.state ? ` → ${r.state}` : ''}`;
}

/** Webhook bodies are small JSON events (Stripe's are a few KiB); anything larger is refused unread. */
export const MAX_WEBHOOK_BODY_BYTES = 1024 * 1024;

/** At most this many deliveries in one transaction. */
const MAX_GROUP = 100;
/**
 * Groups being written at once. One: deliveries arriving during a commit wait for it and go in the
 * next group together, so a group is larger and an event costs fewer statements. Two groups in flight
 * made smaller groups (npm run bench -- --only webhooks, 3 runs each on 2 cores: 1,000 events/s
 * paced, p99 40–70 ms with two, 28–33 ms with one; closed loop 990–1,430 events/s with two,
 * 1,410–1,560 with one; server CPU per delivery 640–930 µs with two, 530–570 µs with one).
 */
const GROUPS_IN_FLIGHT = 1;

export interface ServeOptions {
  port: number;
  host: string;
  provider?: string;
  bodyTimeout: string;
}

/**
 * Serves until SIGINT/SIGTERM. A server, not a one-shot: it logs each delivery on stderr as it
 * goes (and the `--json` listening document once), rather than returning data.
 */
export async function runServe(opts: ServeOptions, deps: Deps): Promise<void> {
  const bodyTimeoutMs = parseDuration(opts.bodyTimeout, '--body-timeout');
  const config = await deps.config();
  const secretOf = (p: unknown) => (p as { webhookSecret?: string | null }).webhookSecret;
  // Refuse before listening: every event would be rejected, and Stripe redelivers a rejected
  // event for three days before giving up on it.
  if (opts.provider) {
    const p = Object.hasOwn(config.providers, opts.provider) ? config.providers[opts.provider] : undefined;
    if (p && p.type === 'stripe' && !secretOf(p))
      throw new UsageError(
        `providers.${opts.provider}.webhookSecret: not set; webhook serve refuses to start without it (every event would be rejected). Set it, e.g. "\${STRIPE_WEBHOOK_SECRET}"`,
      );
  } else if (!Object.values(config.providers).some((p) => p.type !== 'stripe' || secretOf(p))) {
    throw new UsageError(
      'no provider has a webhookSecret: webhook serve refuses to start (every event would be rejected); set providers.NAME.webhookSecret',
    );
  }
  const core = await deps.core();
  if (core.db.kind === 'pglite')
    warn(
      deps.io,
      'the embedded store is held by this server while it runs: other recon commands get exit 6. Use PostgreSQL (RECON_DB=postgres://…) for a long-running server',
    );
  // Group commit: deliveries that arrive while a group is being written go together in the next one
  // (one transaction, a few statements), each answered once its group has committed.
  const deliver = batcher<Delivery, IngestResult>((group) => ingestEvents(core, group), {
    maxItems: MAX_GROUP,
    concurrency: GROUPS_IN_FLIGHT,
  });
  // The deliveries' lines, written once per turn of the event loop: a group's deliveries are answered
  // in the same turn, and a write per line was a system call per delivery on stderr (synchronous on a
  // pipe) and a wake-up of whatever reads it (in a storm: 6,800 writes for 6,800 deliveries).
  let lines: string[] = [];
  const logLine = (text: string) => {
    if (lines.length === 0)
      setImmediate(() => {
        const text = lines.join('\n');
        lines = [];
        info(deps.io, text);
      });
    lines.push(text);
  };
  const fallback = opts.provider ?? Object.entries(config.providers).find(([, p]) => secretOf(p))?.[0];
  // The handler catches everything itself; Node does not await it.
  const server = http.createServer((req, res) => void handleRequest(req, res));
  async function handleRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const reply = (status: number, body: unknown) => {
      if (res.headersSent) return;
      // After a refused body the rest of the request is not read: close the connection rather
      // than let Node drain (read) what the client keeps sending.
      const close = status === 413 || status === 408;
      const text = JSON.stringify(body);
      // With its length, the answer is one write of head and body (without, Node frames it in chunks).
      res.writeHead(status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(text),
        ...(close ? { connection: 'close' } : {}),
      });
      res.end(text, () => {
        if (close) req.socket.destroy();
      });
    };
    try {
      if (req.method !== 'POST') return reply(405, { error: 'POST only' });
      const m = /^\/webhooks\/([^/?]+)/.exec(req.url ?? '');
      let name: string | undefined = fallback;
      if (m) {
        try {
          name = decodeURIComponent(m[1]);
        } catch {
          return reply(404, { error: 'unknown provider' });
        }
      }
      if (!name) return reply(404, { error: 'no provider: POST /webhooks/PROVIDER' });
      // Only configured providers, by own property: a name from the URL is never a key of Object.prototype.
      if (!Object.hasOwn(config.providers, name)) return reply(404, { error: 'unknown provider' });
      const provider = await deps.provider(name);
      if (!provider.parseWebhook) return reply(404, { error: 'unknown provider' });
      const body = await readBody(req, { maxBytes: MAX_WEBHOOK_BODY_BYTES, timeoutMs: bodyTimeoutMs });
      const sig = req.headers['stripe-signature'] ?? req.headers['x-signature'];
      const event = provider.parseWebhook(body, Array.isArray(sig) ? sig[0] : sig);
      const r = await deliver({ provider, event });
      logLine(describe(r));
      reply(200, r);
    } catch (err) {
      // The client gets a fixed text per status; the details (redacted) go to our own stderr only.
      const status =
        err instanceof BodyTooLarge
          ? 413
          : err instanceof BodyTimeout
            ? 408
            : err instanceof BodyAborted || err instanceof UsageError
              ? 400
              : err instanceof NotFoundError
                ? 404
                : 500;
      logLine(redact(`webhook rejected (${status}): ${(err as Error).message}`));
      reply(status, { error: CLIENT_ERRORS[status] ?? 'internal error' });
    }
  }
  // Slow headers are Node's to time out (headersTimeout); slow bodies are readBody's (src/lib/http-body.ts).
  server.headersTimeout = Math.min(server.headersTimeout, bodyTimeoutMs + 1000);
  server.requestTimeout = bodyTimeoutMs * 2;
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

const CLIENT_ERRORS: Record<number, string> = {
  400: 'invalid webhook: bad signature or malformed event',
  404: 'unknown provider',
  408: 'request body timeout',
  413: `body too large (limit ${MAX_WEBHOOK_BODY_BYTES} bytes)`,
  500: 'internal error',
};
