/**
 * Preloaded into the `recon mcp --http` child of the agents bench (`node --import`): counts the
 * statements the process sends to PostgreSQL (every `pg` Client.query, BEGIN and COMMIT included;
 * a pool's query goes through one) and prints the count on stderr on SIGUSR2, as `queries N`.
 * Measuring only: recon itself has no such counter. RECON_BENCH_ROOT names the repository whose
 * `pg` recon loads.
 */
import { createRequire } from 'node:module';
import path from 'node:path';

const root = process.env.RECON_BENCH_ROOT ?? process.cwd();
const pg = createRequire(path.join(root, 'package.json'))('pg') as {
  Client: { prototype: { query: (...args: unknown[]) => unknown } };
};
let count = 0;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
  count++;
  return query.apply(this, args);
};
process.on('SIGUSR2', () => process.stderr.write(`queries ${count}\n`));
