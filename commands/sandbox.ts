import type { Command } from 'commander';
import { UsageError } from '../src/errors.js';
import { action, parsePositiveInt } from './support/action.js';

export function register(program: Command): void {
  program
    .command('sandbox')
    .description('start a local provider sandbox (Stripe-compatible or warehouse) for trying recon; Ctrl-C to stop')
    .argument('<kind>', 'stripe or warehouse')
    .option('--port <n>', 'port (default: a free one)', parsePositiveInt('--port'))
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .addHelpText(
      'after',
      `
Fault injection and seeding over HTTP: POST /_sandbox/faults {"kind":"commit_then_drop","times":2},
POST /_sandbox/seed/payment_intent {"amount":5000,"currency":"usd"}, GET /_sandbox/ledger.

Example:
  $ recon sandbox stripe --port 12111 &
  $ STRIPE_API_KEY=sk_test_sandbox STRIPE_API_BASE=http://127.0.0.1:12111 recon lookup --client-ref ord_1 --provider stripe`,
    )
    .action(
      action<{ port?: number; host: string }>(async ([kind], opts, deps) => {
        let close: () => Promise<void>;
        let lines: string[];
        if (kind === 'stripe') {
          const m = await import('../src/sandbox/stripe/server.js');
          const sb = await m.startStripeSandbox({ port: opts.port ?? 0, host: opts.host });
          close = () => sb.close();
          lines = m.stripeSandboxSummary(sb);
        } else if (kind === 'warehouse') {
          const m = await import('../src/sandbox/warehouse/server.js');
          const sb = await m.startWarehouseSandbox({ port: opts.port ?? 0, host: opts.host });
          close = () => sb.close();
          lines = m.warehouseSandboxSummary(sb);
        } else {
          throw new UsageError(`<kind>: "${kind}" is not one of stripe, warehouse`);
        }
        // The sandbox's key and webhook secret are fake and printed on purpose (the user exports them),
        // so these lines bypass the redaction that printJson/info apply to everything else.
        if (deps.globals.json) deps.io.out.write(JSON.stringify({ kind, summary: lines }, null, 2) + '\n');
        else if (!deps.io.quiet) for (const l of lines) deps.io.err.write(l + '\n');
        await new Promise<void>((resolve) => {
          process.once('SIGINT', resolve);
          process.once('SIGTERM', resolve);
        });
        await close();
      }),
    );
}
