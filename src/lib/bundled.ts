/**
 * The one file `npm run build` bundles a dependency into (dist/vendor/<name>.cjs, scripts/vendor.mjs),
 * required in place of the package's own files; undefined where none was built (the TypeScript run as
 * it is, by the tests), and the caller loads the package. src/providers/stripe/sdk.ts and
 * src/store/postgres.ts load Stripe and pg through here.
 *
 * A bundle is compiled with V8's code cache of it, made by the build with this Node
 * (`<name>.cjs.<content hash>.<V8 version>-<arch>.v8cache`, see codeCachePath): the functions its loading and a
 * client's construction run come compiled. The Stripe SDK took ~65 ms of CPU to load and build a
 * client, ~25 ms with the cache: at every start that reaches Stripe (`recon run`: each worker;
 * `demo`, `mcp`, `lookup`). Another Node, or a cache V8 refuses, is only the slower compile.
 */
import { hash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire, Module } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';

const require = createRequire(import.meta.url);

export type BundleName = 'stripe' | 'pg';

/** dist/src/lib/bundled.js → dist/vendor/ */
const VENDOR = fileURLToPath(new URL('../../vendor/', import.meta.url));

/** The bundle's file. */
export const bundlePath = (name: BundleName, vendor = VENDOR) => path.join(vendor, `${name}.cjs`);

/** The V8 flags this process set (setV8Flags): V8 refuses a code cache made under other flags. */
const v8Flags = new Set<string>();

/**
 * The name of a set of flag strings, whatever order they were set in (the embedded store's
 * WebAssembly flags and `recon run`'s JavaScript tiering are set by different modules).
 */
export const flagSetName = (sets: Iterable<string>) => [...new Set(sets)].filter(Boolean).sort().join(' ');

/**
 * Sets V8 flags for this process (v8.setFlagsFromString) and records them: the bundles loaded after
 * it use the cache made under them. The one way recon sets a flag for itself.
 */
export function setV8Flags(flags: string): void {
  v8.setFlagsFromString(flags);
  v8Flags.add(flags);
}

/**
 * Its code cache for this source (V8 checks only a cache's source length: a cache of an earlier bundle
 * of the same length would run that bundle's code; ~1.4 ms to hash the Stripe SDK's), this Node's V8
 * (whose caches another V8 refuses), architecture and the flags recon set (none; the embedded
 * store's WebAssembly flags, store/pglite.ts useBaselineWasm; and with them `recon run`'s, lib/tiering.ts).
 */
export const codeCachePath = (bundle: string, source: string, flags = flagSetName(v8Flags)) =>
  `${bundle}.${hash('sha256', source, 'hex').slice(0, 16)}.${process.versions.v8}-${process.arch}${flags ? `.${flags.replace(/[^a-z0-9]+/gi, '_').replace(/^_|_$/g, '')}` : ''}.v8cache`;

/** How each bundle loaded in this process: with its code cache, without one, or with one V8 refused. */
export const bundleLoads = new Map<BundleName, 'cached' | 'no cache' | 'cache refused'>();

export function requireBundled(name: BundleName): unknown {
  const file = bundlePath(name);
  // Loaded already (here, or by a plain require of the file: the benchmarks' statement counter).
  const loaded = require.cache[file];
  if (loaded) return loaded.exports;
  let source: string;
  try {
    source = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENOENT') throw err;
    return undefined;
  }
  const { module, load } = loadWithCodeCache(file, source);
  bundleLoads.set(name, load);
  return module.exports;
}

/** Loads a bundle (loadBundle) with its code cache for `source` (codeCachePath) where there is one; how it went. */
export function loadWithCodeCache(
  file: string,
  source: string,
): { module: Module; load: 'cached' | 'no cache' | 'cache refused' } {
  let cache: Buffer | undefined;
  try {
    cache = fs.readFileSync(codeCachePath(file, source));
  } catch {
    cache = undefined;
  }
  const { script, module } = loadBundle(file, source, cache);
  return { module, load: !cache ? 'no cache' : script.cachedDataRejected ? 'cache refused' : 'cached' };
}

/**
 * Compiles and runs a bundle as Node's CommonJS loader does (the same wrapper and arguments; the
 * module in require's cache, where a later require of the file finds it), with `cache` as V8's code
 * cache. The script is returned for scripts/vendor.mjs, which makes the cache from it once run.
 */
export function loadBundle(file: string, source: string, cache?: Buffer): { script: vm.Script; module: Module } {
  const script = new vm.Script(Module.wrap(source), { filename: file, cachedData: cache });
  const module = new Module(file);
  module.filename = file;
  require.cache[file] = module;
  try {
    const run = script.runInThisContext() as (...args: unknown[]) => void;
    run.call(module.exports, module.exports, createRequire(file), module, file, path.dirname(file));
  } catch (err) {
    delete require.cache[file];
    throw err;
  }
  module.loaded = true;
  return { script, module };
}
