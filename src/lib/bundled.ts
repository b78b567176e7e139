/**
 * The one file `npm run build` bundles a dependency into (dist/vendor/<name>.cjs, scripts/vendor.mjs),
 * required in place of the package's own files; undefined where none was built (the TypeScript run as
 * it is, by the tests), and the caller loads the package. src/providers/stripe/sdk.ts and
 * src/store/postgres.ts load Stripe and pg through here.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export function requireBundled(name: 'stripe' | 'pg'): unknown {
  try {
    // dist/src/lib/bundled.js → dist/vendor/<name>.cjs
    return require(`../../vendor/${name}.cjs`);
  } catch (err) {
    if ((err as { code?: string }).code !== 'MODULE_NOT_FOUND') throw err;
    return undefined;
  }
}
