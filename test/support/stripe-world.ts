/**
 * In-process Stripe worlds (the integrity tests, issue 10): the Stripe sandbox, the real stripe
 * adapter (stripe-node) pointed at it, and a fresh store on the chosen backend. The core is called
 * directly, so a test that plays an incident in several steps costs no CLI start-ups. Started
 * through describeWorld (describe-world.ts), which closes it after the test.
 */
import { parseConfig } from '../../src/config/load.js';
import type { LoadedConfig } from '../../src/config/types.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import { createProvider } from '../../src/providers/index.js';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import type { Db } from '../../src/store/db.js';
import type { Provider } from '../../src/types.js';
import type { Backend } from './backends.js';

export interface StripeWorld {
  sandbox: StripeSandbox;
  config: LoadedConfig;
  stripe: Provider;
  db: Db;
  ctx: CoreContext;
  /** Records approved refunds for a new payment intent each; returns the payment intents. */
  recordRefunds(ops: { id: string; amount: number; extra?: Record<string, unknown> }[]): Promise<string[]>;
  close(): Promise<void>;
}

export async function startStripeWorld(
  backend: Backend,
  stripeConfig: Record<string, unknown> = {},
): Promise<StripeWorld> {
  const sandbox = await startStripeSandbox({ webhookSecret: 'whsec_integrity' });
  const config = parseConfig(
    JSON.stringify({
      providers: {
        stripe: {
          type: 'stripe',
          apiKey: sandbox.apiKey,
          apiBase: sandbox.url,
          webhookSecret: sandbox.webhookSecret,
          rateLimit: 10_000,
          uncertaintyWindow: '1s',
          timeout: '2s',
          lease: '4s',
          ...stripeConfig,
        },
      },
    }),
    { path: '/nowhere/recon.config.json', env: {} },
  );
  const stripe = await createProvider('stripe', config);
  const db = await backend.open();
  const ctx: CoreContext = { db, actor: 'integrity-test', now: () => new Date() };
  return {
    sandbox,
    config,
    stripe,
    db,
    ctx,
    async recordRefunds(ops) {
      const pis = ops.map(() => sandbox.seedPaymentIntent({ amount: 10_000, currency: 'usd' }).payment_intent);
      await recordOperations(
        ctx,
        ops.map((o, i) =>
          validateOperation(
            {
              id: o.id,
              provider: 'stripe',
              action: 'refund',
              payload: { payment_intent: pis[i], amount: o.amount, currency: 'usd' },
              approval: 'TICKET-1',
              ...o.extra,
            },
            ['stripe'],
          ),
        ),
      );
      return pis;
    },
    async close() {
      await db.close();
      await sandbox.close();
    },
  };
}
