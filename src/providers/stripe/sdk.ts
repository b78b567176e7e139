/**
 * The Stripe SDK's values (the client class, its error classes), required as the CommonJS build it
 * ships beside its ES modules: the same code, but ~270 files through Node's CommonJS loader take
 * ~50 ms less than through the ES module loader, on every start that reaches a Stripe provider
 * (`recon run`, `lookup`, `submit`: four `recon run` workers start four times). Every value use goes
 * through here, so that an error the client throws is an instance of the classes it is tested
 * against; the SDK's types are imported as types (`import type Stripe from 'stripe'`).
 */
import { createRequire } from 'node:module';
import type Stripe from 'stripe';

export const StripeSdk = createRequire(import.meta.url)('stripe') as typeof Stripe;
