import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import LongFirstSequencer from './test/support/sequencer.js';

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // vitest's default is one worker fewer than the cores: a single worker on a 2-core machine, where
    // the files spend much of their time waiting (sandboxes, child processes, a PostgreSQL server).
    // Two files at a time there took 137 s instead of 249 s for the same 8 integration files; three,
    // 126 s with every test slower. So at least two.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    globalSetup: ['test/support/global-setup.ts'],
    // The default output, then one line per optional tool whose tests were skipped (PgBouncer).
    reporters: ['default', './test/support/optional-reporter.ts'],
    // Per-file cleanup of the support modules (test/support/file-end.ts), isolated or not.
    setupFiles: ['test/support/setup-file.ts'],
    // vitest's order (longest, else largest, first) with the files long for their size first (sequencer.ts).
    sequence: { sequencer: LongFirstSequencer },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // The unit files share one module graph per worker instead of loading it again for each of
          // them (the unit project: 17 s instead of 34 s, tests 18 s vs 21 s). They hold no server,
          // store or mock; the ones that register secrets clear them after each test (clearSecrets).
          // RECON_TEST_ISOLATE=1 isolates them too.
          isolate: process.env.RECON_TEST_ISOLATE === '1',
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          fileParallelism: true,
          // A worker runs file after file in one process: the modules (PGlite's runtime, the CLI, the
          // SDKs) load once per worker instead of once per file (25 short files: 85–94 s instead of
          // 134–147 s on a busy machine; the whole suite 183 s instead of 199 s on a quiet one).
          // The support modules clean up after every file (test/support/file-end.ts); a file must
          // leave no server, store, mock or environment change behind (its afterAll closes what it
          // started).
          // RECON_TEST_ISOLATE=1 runs each file in a fresh process, to tell an order-dependent
          // failure from a real one.
          isolate: process.env.RECON_TEST_ISOLATE === '1',
        },
      },
    ],
  },
});
