/**
 * Cleanup at the end of every test file, whether or not vitest isolates files. vitest.config.ts
 * runs the integration files with `isolate: false`: a worker evaluates a support module once, then
 * runs file after file with it, so an `afterAll` a module registers when it loads would run after
 * the first file only. Instead a module registers here, once, what must happen after each file
 * (world.ts: close the stores its pool kept open; backends.ts: remove the file's temp stores), and
 * test/support/setup-file.ts — a vitest `setupFiles` entry, evaluated again for every file —
 * runs it all after the file's own `afterAll` hooks. Last registered, first run: a module's
 * cleanup runs before that of the modules it imports.
 */
const cleanups: (() => unknown)[] = [];

/** Runs `fn` after every test file from now on (register once, at module load). */
export function atFileEnd(fn: () => unknown): void {
  cleanups.push(fn);
}

/** What setup-file.ts runs after each file. */
export async function runFileEnd(): Promise<void> {
  for (const fn of [...cleanups].reverse()) await fn();
}
