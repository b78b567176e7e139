/**
 * Preloaded into the `recon mcp --http` child of the agents bench (`node --import`): counts the
 * statements the process sends to PostgreSQL (every `pg` Client.query, BEGIN and COMMIT included;
 * a pool's query goes through one) and prints the count on stderr on SIGUSR2, as `queries N`; and on
 * SIGWINCH (a server without a terminal gets it from nobody else) collects its garbage (when started
 * with --expose-gc) and prints `collected`: the bench reads the RSS after it.
 * Measuring only: recon itself has no such counter. RECON_BENCH_ROOT names the repository whose
 * `pg` recon loads (its dist/vendor/pg.cjs, as src/store/postgres.ts loads it, else the package).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const root = process.env.RECON_BENCH_ROOT ?? process.cwd();
const require = createRequire(path.join(root, 'package.json'));
type Pg = { Client: { prototype: { query: (...args: unknown[]) => unknown } } };
/** The pg recon loads: through recon's own loader (src/lib/bundled.ts, the built bundle), else the package. */
const bundled = (await import(pathToFileURL(path.join(root, 'dist', 'src', 'lib', 'bundled.js')).href)) as {
  requireBundled(name: 'pg'): unknown;
};
const pg = (bundled.requireBundled('pg') ?? require('pg')) as Pg;
let count = 0;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
  count++;
  return query.apply(this, args);
};
process.on('SIGUSR2', () => process.stderr.write(`queries ${count}\n`));
process.on('SIGWINCH', () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  // Twice: what the first collection frees may keep objects alive that only the second can free.
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  const mb = (n: number) => (n / 1048576).toFixed(1);
  process.stderr.write(
    `collected ${gc ? 'yes' : 'no'} heap ${mb(m.heapUsed)} external ${mb(m.external)} rss ${mb(m.rss)}\n`,
  );
});
