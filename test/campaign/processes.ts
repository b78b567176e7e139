/**
 * The CLI of a campaign: one-shot commands (in this process, one at a time: world.ts), commands
 * that may be SIGKILLed mid-flight or run beside others (child processes), and the webhook
 * receiver (a long-running `webhook serve` on PostgreSQL, as deployed; one `webhook ingest` per
 * delivery on PGlite, where serve would hold the store). An exit code outside what the command
 * documents for the situation is recorded as a `process_exit` violation.
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { collect, type CliResult } from '../support/cli.js';
import type { Violation } from './invariants.js';
import type { Deliver } from './webhooks.js';
import type { CampaignWorld } from './world.js';

/** Exit codes that are an answer, not a failure: run 5 (provider unavailable) and 8 (reviews open), audit 8 (duplicates). */
const OK_EXITS = { run: [0, 5, 8], lookup: [0, 5, 8], submit: [0, 7], audit: [0, 8] };

export class Processes {
  readonly errors: Violation[] = [];
  /** Results a worker did not write because its lease had expired (and perhaps been claimed again). */
  readonly leaseLost: { id: string; error: string }[] = [];
  private serve: ChildProcess | null = null;
  private servePort = 0;
  private serveLog = '';

  constructor(
    private readonly world: CampaignWorld,
    private readonly db: 'postgres' | 'pglite',
  ) {}

  cli(args: string[], opts: { input?: string } = {}): Promise<CliResult> {
    return this.world.recon([...args, ...(args.includes('--actor') ? [] : ['--actor', 'job:campaign'])], opts);
  }

  async killable(args: string[], killAfterMs: number | null): Promise<{ result: CliResult; killed: boolean }> {
    const child = this.world.spawn([...args, ...(args.includes('--actor') ? [] : ['--actor', 'job:campaign'])]);
    let sent = false;
    const timer =
      killAfterMs === null
        ? null
        : setTimeout(() => {
            if (child.exitCode === null && child.signalCode === null) sent = child.kill('SIGKILL');
          }, killAfterMs);
    const result = await collect(child, { timeoutMs: 120_000 });
    if (timer) clearTimeout(timer);
    return { result, killed: sent && result.signal === 'SIGKILL' };
  }

  expectExit(what: keyof typeof OK_EXITS, r: CliResult, opId: string | null): void {
    // `run` lists the operations it could not reconcile in `errors`; its exit code says so only
    // when no review is open and no provider was unavailable (8 and 5 win over 1).
    for (const e of (r.json?.errors ?? []) as { id: string; error: string }[]) {
      // SPEC §3: a worker whose lease was lost must not write its result over a newer claim. With
      // 3 s leases and lookups slowed by faults, that refusal is the protection at work, not a fault.
      if (/lease on .* was lost/.test(e.error)) this.leaseLost.push({ id: e.id, error: e.error });
      else
        this.errors.push({
          invariant: 'run_error',
          operation_id: e.id,
          evidence: { command: what, exit: r.code, error: e.error },
        });
    }
    // A pass that outlasted its lease lists what it left for the next pass (not an error).
    for (const id of (r.json?.lease_expired ?? []) as string[])
      this.leaseLost.push({ id, error: 'lease expired before the decision was written' });
    if (OK_EXITS[what].includes(r.code ?? -1) || (what === 'run' && r.code === 1 && r.json?.errors?.length)) return;
    // A submit refused because a provider transaction made outside recon (planted, announced by its
    // webhook) already moved the operation to review: SPEC §7's exit 4 (wrong state), nothing sent.
    if (
      what === 'submit' &&
      r.code === 4 &&
      /is needs_review( \([a-z_]+\))?; nothing was sent/.test(r.json?.error?.message ?? '')
    )
      return;
    // A submit that outlasted its (3 s) lease while a worker took the operation over: its result is
    // not written over the newer claim (SPEC §3), exit 4 (LeaseLostError), as `run` lists it above.
    if (what === 'submit' && r.code === 4 && r.json?.error?.type === 'LeaseLostError') {
      this.leaseLost.push({ id: opId ?? '?', error: String(r.json.error.message) });
      return;
    }
    this.errors.push({
      invariant: 'process_exit',
      operation_id: opId,
      evidence: {
        command: what,
        exit: r.code,
        signal: r.signal,
        stderr: r.stderr.slice(-800),
        stdout: r.stdout.slice(0, 400),
      },
    });
  }

  /** PostgreSQL: a `webhook serve` process, as deployed; PGlite: `webhook ingest` per delivery (serve would hold the store). */
  deliverer(): Deliver {
    if (this.db === 'postgres') {
      return async (body, signature) => {
        try {
          const res = await fetch(`http://127.0.0.1:${this.servePort}/webhooks/stripe`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', 'Stripe-Signature': signature },
            body,
            signal: AbortSignal.timeout(30_000),
          });
          const text = await res.text();
          // The server keeps error details off the wire (stderr only): take them from its log.
          const log = res.status >= 500 ? `; server log: ${this.serveLog.split('\n').slice(-4).join(' | ')}` : '';
          return { accepted: res.status === 200, code: res.status, output: text + log };
        } catch (err) {
          return { accepted: false, code: null, output: String(err) };
        }
      };
    }
    return async (body, signature) => {
      const r = await this.cli(
        [
          'webhook',
          'ingest',
          '-',
          '--provider',
          'stripe',
          '--signature',
          signature,
          '--json',
          '--actor',
          'job:webhook',
        ],
        {
          input: body,
        },
      );
      return { accepted: r.code === 0, code: r.code, output: r.code === 0 ? r.stdout : r.stderr || r.stdout };
    };
  }

  async startServe(): Promise<void> {
    this.servePort = await freePort();
    const child = this.world.spawn([
      'webhook',
      'serve',
      '--port',
      String(this.servePort),
      '--provider',
      'stripe',
      '--actor',
      'job:webhook',
    ]);
    let stderr = '';
    child.stdout!.resume();
    child.stderr!.on('data', (d) => {
      stderr += d;
      this.serveLog = (this.serveLog + d).slice(-4_000);
    });
    child.on('exit', (code, signal) => {
      if (this.serve === child) {
        this.serve = null;
        this.errors.push({
          invariant: 'process_exit',
          operation_id: null,
          evidence: { command: 'webhook serve', exit: code, signal, stderr: stderr.slice(-800) },
        });
      }
    });
    this.serve = child;
    const until = performance.now() + 60_000;
    while (!stderr.includes('listening')) {
      if (performance.now() > until || child.exitCode !== null)
        throw new Error(`webhook serve did not start: ${stderr}`);
      await sleep(100);
    }
  }

  async stopServe(): Promise<void> {
    const child = this.serve;
    if (!child) return;
    this.serve = null;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(10_000)]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** Runs `fn` over `items`, `n` at a time. */
export async function lanes<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
