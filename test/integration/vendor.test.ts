/**
 * The Stripe SDK and pg, each bundled into one file by `npm test` and `npm run build`
 * (scripts/vendor.mjs, dist/vendor/<name>.cjs): each is the installed package's code (same version,
 * same exports; for Stripe the same resources and error classes), and the built CLI loads them
 * instead of the packages' files. The CLI's tests (`recon run`, `lookup`, `submit` against the
 * sandbox and PostgreSQL) run through them.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { codeCachePath, loadBundle, loadWithCodeCache } from '../../src/lib/bundled.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const bundleOf = (name: string) => path.join(root, 'dist', 'vendor', `${name}.cjs`);
const require = createRequire(import.meta.url);

/** The installed package's version, from its package.json (found from where it resolves). */
function installedVersion(name: string): string {
  for (let dir = path.dirname(require.resolve(name)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as { name: string; version: string };
      if (pkg.name === name) return pkg.version;
    }
  }
}

/** What a client built by this SDK offers: its resources, and the names of its error classes. */
function stripeShape(Sdk: typeof Stripe) {
  const client = new Sdk('sk_test_vendor', { telemetry: false }) as unknown as Record<string, unknown>;
  return {
    version: Sdk.PACKAGE_VERSION,
    resources: Object.keys(client)
      .filter((k) => typeof client[k] === 'object' && client[k] !== null)
      .sort(),
    errors: Object.keys(Sdk.errors).sort(),
  };
}

/** Runs an ES module script in a new node; its stdout as JSON. */
function runScript(script: string): unknown {
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }));
}

/** In the script's process: whether the bundle was loaded, and how many files of the package were. */
const loadedFrom = (name: string) => `(() => {
  const loaded = Object.keys(createRequire(import.meta.url).cache);
  const pkg = ${JSON.stringify(`${path.sep}node_modules${path.sep}${name}${path.sep}`)};
  return { bundle: loaded.includes(${JSON.stringify(bundleOf(name))}), packageFiles: loaded.filter((f) => f.includes(pkg)).length };
})()`;

describe('the bundled dependencies (dist/vendor)', () => {
  it.each(['stripe', 'pg'])('%s: the bundle is of the installed version', (name) => {
    expect(fs.existsSync(bundleOf(name)), 'npm test builds it (scripts/vendor.mjs)').toBe(true);
    expect(fs.readFileSync(bundleOf(name), 'utf8').split('\n')[0]).toBe(
      `// ${name} ${installedVersion(name)}, bundled by scripts/vendor.mjs`,
    );
  });

  it('stripe: the same version, resources and error classes as the package', () => {
    const bundled = require(bundleOf('stripe')) as typeof Stripe;
    const installed = require('stripe') as typeof Stripe;
    expect(bundled).not.toBe(installed);
    const mine = stripeShape(bundled);
    expect(mine).toEqual(stripeShape(installed));
    expect(mine.resources).toContain('refunds');
    expect(mine.errors).toContain('StripeIdempotencyError');
  });

  it('pg: the same exports as the package', () => {
    const bundled = require(bundleOf('pg')) as Record<string, unknown>;
    const installed = require('pg') as Record<string, unknown>;
    expect(bundled).not.toBe(installed);
    expect(Object.keys(bundled).sort()).toEqual(Object.keys(installed).sort());
    expect(typeof bundled.Pool).toBe('function');
  });

  it('the built code loads the bundles, not the packages', () => {
    const stripe = runScript(`
      import { createRequire } from 'node:module';
      const { StripeSdk } = await import(${JSON.stringify(path.join(root, 'dist', 'src', 'providers', 'stripe', 'sdk.js'))});
      console.log(JSON.stringify({ version: StripeSdk.PACKAGE_VERSION, ...${loadedFrom('stripe')} }));`);
    expect(stripe).toEqual({ version: installedVersion('stripe'), bundle: true, packageFiles: 0 });
    // Opening a PostgreSQL store loads pg (it connects at the first query: none is made).
    const pg = runScript(`
      import { createRequire } from 'node:module';
      const { openPostgres } = await import(${JSON.stringify(path.join(root, 'dist', 'src', 'store', 'postgres.js'))});
      await openPostgres('postgres://recon@127.0.0.1:9/none');
      console.log(JSON.stringify(${loadedFrom('pg')}));
      process.exit(0);`);
    expect(pg).toEqual({ bundle: true, packageFiles: 0 });
  });

  /** In a new node: the built loader's requireBundled of `name` (after `before`), how it loaded and what it gave. */
  const loadInChild = (name: string, before = '') =>
    runScript(`
      const bundled = await import(${JSON.stringify(path.join(root, 'dist', 'src', 'lib', 'bundled.js'))});
      ${before}
      const m = bundled.requireBundled(${JSON.stringify(name)});
      const works = ${JSON.stringify(name)} === 'stripe'
        ? typeof new m('sk_test_x', { telemetry: false }).refunds.list === 'function'
        : typeof new m.Pool().query === 'function';
      console.log(JSON.stringify({ load: bundled.bundleLoads.get(${JSON.stringify(name)}), works }));`);

  it.each(['stripe', 'pg'])(
    "%s: the build made V8's code cache of the bundle, and the built code loads it with it, under the embedded store's flags too",
    (name) => {
      expect(loadInChild(name)).toEqual({ load: 'cached', works: true });
      // A command on the embedded store sets V8's WebAssembly flags first: a cache made under others would be refused.
      const pglite = JSON.stringify(path.join(root, 'dist', 'src', 'store', 'pglite.js'));
      expect(loadInChild(name, `(await import(${pglite})).useBaselineWasm();`)).toEqual({
        load: 'cached',
        works: true,
      });
      // recon run also tiers its JavaScript up late (src/lib/tiering.ts), in either order.
      const tiering = JSON.stringify(path.join(root, 'dist', 'src', 'lib', 'tiering.js'));
      for (const before of [
        `(await import(${pglite})).useBaselineWasm(); (await import(${tiering})).useLateTiering();`,
        `(await import(${tiering})).useLateTiering(); (await import(${pglite})).useBaselineWasm();`,
      ])
        expect(loadInChild(name, before)).toEqual({ load: 'cached', works: true });
    },
  );

  it('a bundle changed since its code cache was made is compiled from its source, even at the same length (V8 checks only that)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-vendor-'));
    try {
      const file = path.join(dir, 'same.cjs');
      const [before, after] = ['module.exports = "1.2.3";', 'module.exports = "1.2.4";'];
      fs.writeFileSync(file, before);
      const made = loadBundle(file, before).script.createCachedData();
      fs.writeFileSync(codeCachePath(file, before), made);
      const cached = loadWithCodeCache(file, before);
      expect([cached.load, cached.module.exports]).toEqual(['cached', '1.2.3']);
      fs.writeFileSync(file, after);
      const rebuilt = loadWithCodeCache(file, after);
      expect([rebuilt.load, rebuilt.module.exports]).toEqual(['no cache', '1.2.4']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a code cache V8 refuses (another Node made it, or it is damaged) only costs the compile: the bundle loads', () => {
    const cache = runScript(`
      const { bundlePath, codeCachePath } = await import(${JSON.stringify(path.join(root, 'dist', 'src', 'lib', 'bundled.js'))});
      const fs = await import('node:fs');
      console.log(JSON.stringify(codeCachePath(bundlePath('pg'), fs.readFileSync(bundlePath('pg'), 'utf8'))));`) as string;
    const saved = fs.readFileSync(cache);
    try {
      fs.writeFileSync(cache, Buffer.from('not a code cache of this V8'));
      expect(loadInChild('pg')).toEqual({ load: 'cache refused', works: true });
      fs.rmSync(cache);
      expect(loadInChild('pg')).toEqual({ load: 'no cache', works: true });
    } finally {
      fs.writeFileSync(cache, saved);
    }
  });
});
