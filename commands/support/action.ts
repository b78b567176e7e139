import type { Command } from 'commander';
import { InvalidArgumentError } from './commander.js';
import { createDeps, type Deps, type GlobalOptions } from './deps.js';
import { systemIO } from './io.js';
import { useLateTiering } from '../../src/lib/tiering.js';
import { useBaselineWasm } from '../../src/store/pglite.js';

/** The commands that run until stopped: they keep V8's optimizing WebAssembly tier for the embedded store. */
const SERVERS = ['mcp', 'webhook serve'];
/** The batch: a pass that decides its operations and exits tiers its JavaScript up late (src/lib/tiering.ts). */
const BATCHES = ['run'];

/** Swapped by test/support/in-process.ts (commands run in the test process); production builds Deps from the process. */
let depsFactory: (globals: GlobalOptions, command: string) => Deps = (globals, command) => {
  // This process runs one command: a one-shot one gets the embedded store started for a short life.
  if (!SERVERS.includes(command)) useBaselineWasm();
  if (BATCHES.includes(command)) useLateTiering();
  return createDeps(
    systemIO({
      color: globals.color,
      quiet: globals.quiet,
      json: globals.json,
      env: process.env,
      pager: globals.pager,
    }),
    globals,
    process.env,
    process.cwd(),
    command,
  );
};

export function setDepsFactory(f: (globals: GlobalOptions, command: string) => Deps): void {
  depsFactory = f;
}

/**
 * Wraps a command handler: builds Deps from the global options, runs, always closes the
 * store and providers. A handler returns nothing or throws: errors, and the ResultExit of a
 * result that is not "done" (src/errors.ts), propagate to bin/main.ts, the one place that maps
 * them to exit codes.
 */
export function action<O>(handler: (args: string[], opts: O, deps: Deps) => Promise<void>) {
  return async (...raw: unknown[]) => {
    const command = raw[raw.length - 1] as Command;
    const opts = command.opts() as O;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- GlobalOptions is an interface, not an OptionValues
    const globals = command.optsWithGlobals() as GlobalOptions;
    const args = raw
      .slice(0, -2)
      .flat()
      .filter((a): a is string => typeof a === 'string');
    const path = commandPath(command);
    const deps = depsFactory(globals, path);
    try {
      // A bad config file is exit 2 for every command, before any work (and even with nothing
      // to do): a cron job must hear about it on the first run, not on the first operation.
      if (!NO_CONFIG.includes(path)) await deps.config();
      await handler(args, opts, deps);
    } finally {
      await deps.close();
    }
  };
}

/** Commands that never read the config (or, like `doctor`, report a bad one themselves). */
const NO_CONFIG = ['init', 'sandbox', 'completion', 'doctor'];

/** `ops list` for the `list` subcommand of `ops`. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Commander value parsers that fail as usage errors naming the flag. */
export function parsePositiveInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
      throw new InvalidArgumentError(`${flag}: "${value}" is not a positive integer`);
    }
    return n;
  };
}

/** A TCP port, 0 (a free one, chosen by the system) to 65535. */
export function parsePort(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n > 65535) {
      throw new InvalidArgumentError(`${flag}: "${value}" is not a port; use 1-65535, or 0 for a free one`);
    }
    return n;
  };
}
