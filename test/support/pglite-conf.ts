/**
 * The buffer pool of the embedded stores the tests copy (the run's PGlite templates,
 * test/support/global-setup.ts and backends.ts).
 */
import fs from 'node:fs';
import path from 'node:path';

/**
 * Sets the closed PGlite data folder `folder` to a 16 MB buffer pool instead of initdb's 128 MB.
 * PostgreSQL zeroes its shared memory at every start of a store, and a test's store starts often
 * (each child process on it, each reopen in the test process): 128 MB is ~0.6 s of CPU per start
 * in a one-shot `recon` (baseline WebAssembly, node --cpu-prof: memset under main) and ~0.3 s in
 * the test process; 16 MB a sixth of that. The tests' stores hold a few thousand rows at most.
 * Stores that recon itself creates (`recon init`, a first `ops record`, `memory:`) are not copies
 * of these, and keep recon's own setting.
 */
export function smallBufferPool(folder: string): void {
  fs.appendFileSync(
    path.join(folder, 'postgresql.conf'),
    '\n# test/support/pglite-conf.ts: a test store starts often; zeroing 128 MB each time is CPU no test is about.\nshared_buffers = 16MB\n',
  );
}
