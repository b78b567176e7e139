/**
 * The Stripe SDK's values (the client class, its error classes). Required as CommonJS: the same code
 * as its ES modules, but ~220 files through Node's CommonJS loader cost less than through the ES
 * module loader, and less again as the one file `npm run build` bundles them into
 * (dist/vendor/stripe.cjs, scripts/vendor.mjs: ~60 ms of CPU instead of ~145 here), on every start
 * that reaches a Stripe provider (`recon run`, `lookup`, `submit`, `mcp`: four `recon run` workers
 * start four times). Without the bundle (the TypeScript run as it is, by the tests), the package.
 * Every value use goes through here, so that an error the client throws is an instance of the
 * classes it is tested against; the SDK's types are imported as types (`import type Stripe from 'stripe'`).
 */
import { createRequire } from 'node:module';
import type Stripe from 'stripe';
import { requireBundled } from '../../lib/bundled.js';

const bundled = requireBundled('stripe') as typeof Stripe | undefined;

export const StripeSdk = bundled ?? (createRequire(import.meta.url)('stripe') as typeof Stripe);
