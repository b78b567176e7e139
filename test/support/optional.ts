/**
 * Tools some tests need that `npm ci` cannot install (they are not on npm). Where one is missing,
 * its tests are skipped and the run's summary says so in one line (`optional-reporter.ts`); its
 * `require` variable set to 1 (as `.ci/run` does) makes them run, and fail naming what is missing,
 * instead of skipping.
 */
import { findPgBouncer } from './pgbouncer.js';

interface Optional {
  /** The test files that need it. */
  files: string[];
  /** Set to 1: never skip, fail instead. */
  requireEnv: string;
  /** Why it is unusable here, or undefined when it is there. */
  missing(): string | undefined;
  /** The summary's line when its tests were skipped. */
  skipped: string;
}

const OPTIONALS = {
  pgbouncer: {
    files: ['test/integration/faults-pgbouncer.test.ts'],
    requireEnv: 'RECON_TEST_REQUIRE_PGBOUNCER',
    missing: () => {
      try {
        findPgBouncer();
        return undefined;
      } catch (err) {
        return (err as Error).message;
      }
    },
    skipped: 'PgBouncer tests skipped: install pgbouncer or set PGBOUNCER_BIN',
  },
} satisfies Record<string, Optional>;

/** Whether the tests needing `name` are to be skipped: it is missing and not required. */
export function skipWithout(name: keyof typeof OPTIONALS): boolean {
  const o: Optional = OPTIONALS[name];
  return process.env[o.requireEnv] !== '1' && o.missing() !== undefined;
}

/** The summary lines for the optional tools whose tests were skipped among `files` (the run's test files). */
export function skippedLines(files: string[]): string[] {
  const ran = (f: string) => files.some((file) => file.replaceAll('\\', '/').endsWith(f));
  return Object.values(OPTIONALS as Record<string, Optional>)
    .filter((o) => o.files.some(ran) && process.env[o.requireEnv] !== '1' && o.missing() !== undefined)
    .map((o) => o.skipped);
}
