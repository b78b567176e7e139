/**
 * The set-up the integration files share: a suite run once per store backend of the run (both by
 * default, one with RECON_TEST_BACKEND), its title ending ", store on pglite|postgres", where each
 * test starts what it needs through the suite and everything it started is closed after it, last
 * started first:
 *
 *   describeWorld('review resolve checks like attach', (suite) => {
 *     it('…', async () => {
 *       const world = await suite.world({ stripeConfig: { uncertaintyWindow: '1h' } });
 *       …
 *     });
 *   });
 *
 * - `world(options)`: the Stripe sandbox (and the warehouse one), a config file naming them, a
 *   fresh store at the latest schema, and `world.recon(...)` (test/support/world.ts);
 * - `stripeWorld(config)`: the Stripe sandbox and the real adapter in this process, the core called
 *   directly on a fresh store (test/support/stripe-world.ts);
 * - `db()`: a fresh store at the latest schema, nothing else.
 * `{ only: 'postgres' }` runs the suite on that backend only (several processes on one store).
 *
 * Stores come from the run's migrated template (a copy of a folder on PGlite, a database created
 * from a template database on PostgreSQL: test/support/global-setup.ts), never migrated per test.
 * The tests get more time than the suite's default: a test plays an incident in 5–10 commands and
 * sometimes a child process that boots PGlite (seconds under load); never a timed assertion.
 */
import { afterEach, describe } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { backends, type Backend } from './backends.js';
import { startStripeWorld, type StripeWorld } from './stripe-world.js';
import { startWorld, type World, type WorldOptions } from './world.js';

const SLOW_STORE_TIMEOUT_MS = 150_000;

export interface WorldSuite {
  /** The backend of this run of the suite. */
  backend: Backend;
  /** A world on this backend (sandboxes, config, store), closed after the test. */
  world(o?: Omit<WorldOptions, 'backend'>): Promise<World>;
  /** An in-process Stripe world on this backend, closed after the test. */
  stripeWorld(stripeConfig?: Record<string, unknown>): Promise<StripeWorld>;
  /** A fresh store at the latest schema on this backend, closed after the test. */
  db(): Promise<Db>;
  /** Closes `thing` after the test, before what was started earlier. */
  closeAfter<T extends { close(): unknown }>(thing: T): T;
}

export function describeWorld(
  title: string,
  body: (suite: WorldSuite) => void,
  o: { timeout?: number; only?: Backend['name'] } = {},
): void {
  const selected = o.only ? backends.filter((b) => b.name === o.only) : backends;
  describe.each(selected)(`${title}, store on $name`, { timeout: o.timeout ?? SLOW_STORE_TIMEOUT_MS }, (backend) => {
    const started: { close(): unknown }[] = [];
    afterEach(async () => {
      // Every one is closed even if one fails; the first failure is reported.
      let failure: unknown;
      for (const thing of started.splice(0).reverse()) {
        try {
          await thing.close();
        } catch (err) {
          failure ??= err;
        }
      }
      if (failure instanceof Error) throw failure;
      if (failure !== undefined) throw new Error(`closing what the test started: ${JSON.stringify(failure)}`);
    });
    const closeAfter = <T extends { close(): unknown }>(thing: T): T => {
      started.push(thing);
      return thing;
    };
    body({
      backend,
      world: async (wo = {}) => closeAfter(await startWorld({ ...wo, backend })),
      stripeWorld: async (stripeConfig = {}) => closeAfter(await startStripeWorld(backend, stripeConfig)),
      db: async () => closeAfter(await backend.open()),
      closeAfter,
    });
  });
}
