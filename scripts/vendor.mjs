#!/usr/bin/env node
// Bundles the CommonJS code of the Stripe SDK and of pg into one file each, dist/vendor/<name>.cjs,
// which recon requires in their place (src/providers/stripe/sdk.ts, src/store/postgres.ts): the
// same code, but one file where Node's CommonJS loader read, resolved and wrapped ~220 (Stripe:
// ~145 ms of CPU here, the bundle ~60 ms) or ~40 (pg: ~39 ms, ~22 ms), at every start that
// reaches Stripe or PostgreSQL (`recon run`, `lookup`, `submit`, `mcp`: four `recon run` workers
// start four times). Run by `npm run build` and `npm test` after the TypeScript is emitted; does
// nothing for a package whose bundle of the installed version is there already. Built with
// rolldown (the bundler vite itself uses). Without a bundle (not built, or the TypeScript run as
// it is), recon loads the package.
//
// Then each bundle's V8 code cache for this Node (src/lib/bundled.ts: codeCachePath), made in a new
// node process that loads the bundle as recon does and, for Stripe, builds a client: the functions
// that run at every start come compiled. Named by the bundle's content (src/lib/bundled.ts
// codeCachePath): a new bundle gets its own, and the others are removed.
//
//   node scripts/vendor.mjs
import fs from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'package.json'));

/** Each package bundled, and what it may require that stays outside (an optional native binding). */
const PACKAGES = [
  { name: 'stripe', external: [] },
  { name: 'pg', external: ['pg-native'] },
];

/** The installed package's version (its package.json is not always among its exports). */
function installedVersion(name) {
  let dir = path.dirname(require.resolve(name));
  for (;;) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (pkg.name === name) return pkg.version;
    }
    const parent = path.dirname(dir);
    if (parent === dir)
      throw new Error(`scripts/vendor.mjs: no package.json of ${name} above ${require.resolve(name)}`);
    dir = parent;
  }
}

/** The first line of a bundle: which package and version it holds. */
const stampOf = (name, version) => `// ${name} ${version}, bundled by scripts/vendor.mjs`;

const dir = path.join(root, 'dist', 'vendor');
fs.mkdirSync(dir, { recursive: true });
for (const { name, external } of PACKAGES) {
  const version = installedVersion(name);
  const out = path.join(dir, `${name}.cjs`);
  const stamp = stampOf(name, version);
  if (fs.existsSync(out) && fs.readFileSync(out, 'utf8').startsWith(`${stamp}\n`)) continue;
  const { rolldown } = await import('rolldown');
  const entry = path.join(dir, `${name}-entry.cjs`);
  fs.writeFileSync(entry, `module.exports = require(${JSON.stringify(name)});\n`);
  try {
    const bundle = await rolldown({
      input: entry,
      platform: 'node',
      cwd: root,
      // Node's own modules stay requires; anything else the package requires is in the bundle.
      external: (id) => isBuiltin(id) || external.includes(id),
      onLog(level, log) {
        throw new Error(`scripts/vendor.mjs: ${name}: rolldown ${level}: ${log.message}`);
      },
    });
    await bundle.write({ file: out, format: 'cjs', banner: stamp, sourcemap: false });
    await bundle.close();
  } finally {
    fs.rmSync(entry, { force: true });
  }
  process.stderr.write(`scripts/vendor.mjs: wrote ${path.relative(root, out)} (${name} ${version})\n`);
}

// The code caches: in a new process (nothing else of recon loaded, V8's default flags: what a start
// of recon that reaches Stripe or PostgreSQL has), through src/lib/bundled.ts's own loader; and again
// under the flags a one-shot command sets before (store/wasm-tier.ts, by store/pglite.ts useBaselineWasm; lib/tiering.ts for recon run).
const loader = path.join(root, 'dist', 'src', 'lib', 'bundled.js');
const wasmTier = path.join(root, 'dist', 'src', 'store', 'wasm-tier.js');
const tiering = path.join(root, 'dist', 'src', 'lib', 'tiering.js');
if (!fs.existsSync(loader) || !fs.existsSync(wasmTier) || !fs.existsSync(tiering)) {
  process.stderr.write('scripts/vendor.mjs: dist/src not emitted (emit the TypeScript first): no code caches made\n');
} else {
  const { execFileSync } = await import('node:child_process');
  const { BASELINE_WASM_FLAGS } = await import(pathToFileURL(wasmTier).href);
  const { LATE_TIERING_FLAGS } = await import(pathToFileURL(tiering).href);
  const { flagSetName } = await import(pathToFileURL(loader).href);
  const current = new Set();
  // V8's defaults (servers); a one-shot command's; `recon run`'s (commands/support/action.ts).
  const flagSets = [[], [BASELINE_WASM_FLAGS], [BASELINE_WASM_FLAGS, LATE_TIERING_FLAGS]];
  for (const { name } of PACKAGES)
    for (const set of flagSets) {
      const flags = flagSetName(set);
      const made = execFileSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `
import fs from 'node:fs';
const { bundlePath, codeCachePath, loadBundle, setV8Flags } = await import(${JSON.stringify(pathToFileURL(loader).href)});
const file = bundlePath(${JSON.stringify(name)}, ${JSON.stringify(dir)});
const flags = ${JSON.stringify(flags)};
const source = fs.readFileSync(file, 'utf8');
const cache = codeCachePath(file, source, flags);
console.log(cache);
if (fs.existsSync(cache)) process.exit(0);
for (const f of ${JSON.stringify(set)}) setV8Flags(f);
const { script, module } = loadBundle(file, source);
// What every start runs after loading: a client built (Stripe), a pool (pg).
if (${JSON.stringify(name)} === 'stripe') new module.exports('sk_test_codecache', { telemetry: false });
else new module.exports.Pool({ connectionString: 'postgres://recon@127.0.0.1:9/none' }).end();
fs.writeFileSync(cache, script.createCachedData());
console.log('made');`,
        ],
        { encoding: 'utf8' },
      )
        .trim()
        .split('\n');
      current.add(made[0]);
      if (made[1] === 'made') process.stderr.write(`scripts/vendor.mjs: wrote ${path.relative(root, made[0])}\n`);
    }
  // The caches of earlier bundles (or of another Node) are never read again.
  for (const f of fs.readdirSync(dir))
    if (f.endsWith('.v8cache') && !current.has(path.join(dir, f))) fs.rmSync(path.join(dir, f), { force: true });
}
