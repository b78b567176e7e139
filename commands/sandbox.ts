import type { Command } from 'commander';
import { UsageError } from '../src/errors.js';
import { action, parsePort } from './support/action.js';
import type { Deps } from './support/deps.js';
import { Argument } from './support/commander.js';

export function register(program: Command): void {
  program
    .command('sandbox')
    .description('start a local provider sandbox (Stripe-compatible or warehouse) for trying recon; Ctrl-C to stop')
    .addArgument(new Argument('<kind>', 'stripe or warehouse').choices(['stripe', 'warehouse']))
    .option('--port <n>', 'port (default 0: a free one, printed)', parsePort('--port'))
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option(
      '--accept-any-payment-intent',
      'stripe: a refund of an unknown pi_… creates that payment intent first (as stripe-mock accepts any id)',
    )
    .addHelpText(
      'after',
      `
Fault injection and seeding over HTTP: POST /_sandbox/faults {"kind":"commit_then_drop","times":2},
POST /_sandbox/seed/payment_intent {"amount":5000,"currency":"usd"}, GET /_sandbox/ledger.

Example:
  $ recon sandbox stripe --port 12111 --accept-any-payment-intent &
  $ export STRIPE_API_BASE=http://127.0.0.1:12111 STRIPE_API_KEY=sk_test_sandbox STRIPE_WEBHOOK_SECRET=whsec_sandbox
  $ recon lookup --client-ref ord_1 --provider stripe`,
    )
    .action(
      action<Omit<SandboxOptions, 'kind'>>(async ([kind], opts, deps) => {
        const sb = await runSandbox({ kind, ...opts }, deps);
        // The sandbox's key and webhook secret are fake and printed on purpose (the user exports them),
        // so these lines bypass the redaction that printJson/info apply to everything else.
        if (deps.globals.json)
          deps.io.out.write(
            JSON.stringify({ kind: sb.kind, port: sb.port, url: sb.url, summary: sb.summary }, null, 2) + '\n',
          );
        else if (!deps.io.quiet) for (const l of [`port ${sb.port}`, ...sb.summary]) deps.io.err.write(l + '\n');
        await new Promise<void>((resolve) => {
          process.once('SIGINT', resolve);
          process.once('SIGTERM', resolve);
        });
        await sb.close();
      }),
    );
}

export interface SandboxOptions {
  /** stripe or warehouse. */
  kind: string;
  port?: number;
  host: string;
  acceptAnyPaymentIntent?: boolean;
}

/** A sandbox listening: where, the lines to export (its fake key and secret), and how to stop it. */
export interface StartedSandbox {
  kind: 'stripe' | 'warehouse';
  port: number;
  url: string;
  summary: string[];
  close: () => Promise<void>;
}

/** Starts the sandbox (in this process, until `close`); a taken or forbidden port is a usage error. */
export async function runSandbox(opts: SandboxOptions, _deps: Deps): Promise<StartedSandbox> {
  const { kind } = opts;
  if (kind !== 'stripe' && kind !== 'warehouse')
    throw new UsageError(`<kind>: "${kind}" is not one of stripe, warehouse`);
  try {
    let started: { url: string; summary: string[]; close: () => Promise<void> };
    if (kind === 'stripe') {
      const m = await import('../src/sandbox/stripe/server.js');
      const sb = await m.startStripeSandbox({
        port: opts.port ?? 0,
        host: opts.host,
        acceptAnyPaymentIntent: opts.acceptAnyPaymentIntent === true,
      });
      started = { url: sb.url, summary: m.stripeSandboxSummary(sb), close: () => sb.close() };
    } else {
      if (opts.acceptAnyPaymentIntent) throw new UsageError('--accept-any-payment-intent: only for the stripe sandbox');
      const m = await import('../src/sandbox/warehouse/server.js');
      const sb = await m.startWarehouseSandbox({ port: opts.port ?? 0, host: opts.host });
      started = { url: sb.url, summary: m.warehouseSandboxSummary(sb), close: () => sb.close() };
    }
    // The chosen port first: with --port 0 it is the one thing a script needs.
    return { kind, port: Number(new URL(started.url).port), ...started };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE')
      throw new UsageError(
        `--port ${opts.port}: port ${opts.port} on ${opts.host} is already taken (another sandbox?); use --port 0 for a free one`,
      );
    if (code === 'EACCES' || code === 'EADDRNOTAVAIL')
      throw new UsageError(`--port ${opts.port} / --host ${opts.host}: cannot listen there (${code})`);
    throw err;
  }
}
