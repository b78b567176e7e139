/**
 * Runs recon commands inside the test process: `runInProcess(args, opts)` returns the same
 * `CliResult` as `recon()` (test/support/cli.ts) — exit code, stdout, stderr, parsed JSON — for
 * the same arguments, environment, working folder and stdin, but without starting Node, loading
 * the CLI's modules and booting the store's runtime for every command (a child process on the
 * embedded store costs 1–1.5 s; this costs milliseconds plus the command's own work).
 *
 * How: bin/main.ts's `main()` runs as it does in the binary (commander, the one error-to-exit-code
 * mapping), while the Deps seam (commands/support/action.ts `setDepsFactory`, cli/cli's factory)
 * gives each command buffer-backed IO (no TTY, no colour, no prompts), the given environment and
 * working folder, and optionally an injected clock (`now`) and an open store (`store`). What
 * commander and main() themselves write to process.stdout/stderr during the run is captured into
 * the same buffers; process.exitCode, the working folder (the run chdirs to `cwd`, so relative
 * store paths resolve as in a child process; vitest's default `forks` pool allows it) and DEBUG
 * are restored afterwards. The command starts knowing no secret, as a new process does (the ones
 * this process had registered are registered again after it): a secret that only an earlier
 * command registered is not redacted for it, so a command that fails to register one is seen.
 *
 *   const r = await runInProcess(['ops', 'list', '--json'], { cwd: dir, env: { STRIPE_API_KEY: key } });
 *   expect(r.code).toBe(0);
 *   expect(r.json.operations).toHaveLength(1);
 *
 * Use it for what a command does. Keep `recon()`, a real child process, for what needs one:
 * signals and Ctrl-C, the exit code of the real binary, a TTY (colour, prompts), the embedded
 * store's lock held by another process, several processes at once (workers racing), and
 * `recon --version`'s fast path in bin/recon.
 *
 * Runs are serialised within a test file (they share process-wide state: stdout, exitCode, the
 * deps factory), so two `runInProcess` calls started together run one after the other — a test
 * that needs them truly concurrent needs child processes anyway.
 */
import { Readable, Writable } from 'node:stream';
import { main } from '../../bin/main.js';
import { clearSecrets, registeredSecrets, registerSecret } from '../../src/config/redact.js';
import { setDepsFactory } from '../../commands/support/action.js';
import { createDeps } from '../../commands/support/deps.js';
import type { IO } from '../../commands/support/io.js';
import type { Db } from '../../src/store/db.js';
import { cleanEnv, ROOT, type CliOptions, type CliResult, type JsonDoc } from './cli.js';

export interface InProcessOptions extends CliOptions {
  /** The clock the command's core sees (Deps.now); default the real one. */
  now?: () => Date;
  /**
   * An open store to use instead of opening the one the arguments/config name (and closing it
   * after the command): one PGlite per file or world instead of one per command. It stays open.
   */
  store?: Db;
  /**
   * The providers' retry back-off waits at most 1 ms (Deps' ProviderDeps sleep): a test of what a
   * failing provider leads to still sees every retry made, without waiting out recon's delays
   * (~1 s a read against a provider answering 500).
   */
  shortBackoff?: boolean;
}

/** A sleep of at most 1 ms: `shortBackoff`'s. */
const briefSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.min(ms, 1)));

class Buffered extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    done();
  }
}

/**
 * IO over buffers (gh's `iostreams.Test()`): no TTY, so no colour and no prompts.
 * @public for tests that call a command's run function with their own Deps
 */
export function bufferIO(opts: { input?: string; quiet?: boolean } = {}): IO & { out: Buffered; err: Buffered } {
  return {
    out: new Buffered(),
    err: new Buffered(),
    isStdoutTTY: false,
    isStderrTTY: false,
    canPrompt: false,
    color: false,
    quiet: opts.quiet ?? false,
    stdin: Readable.from(opts.input === undefined ? [] : [Buffer.from(opts.input)]),
  };
}

let queue: Promise<unknown> = Promise.resolve();

/** Runs `recon ARGS` in this process; see the file comment. */
export function runInProcess(args: string[], opts: InProcessOptions = {}): Promise<CliResult> {
  const run = queue.then(() => runNow(args, opts));
  queue = run.catch(() => undefined);
  return run;
}

async function runNow(args: string[], opts: InProcessOptions): Promise<CliResult> {
  const env = cleanEnv(opts.env);
  const cwd = opts.cwd ?? ROOT;
  const io = bufferIO({ input: opts.input });
  setDepsFactory((globals, command) => {
    // `command` decides, as in the binary, whether a missing embedded store may be created (ops record, init).
    const providerDeps = opts.shortBackoff ? { sleep: briefSleep } : {};
    const deps = createDeps({ ...io, quiet: globals.quiet }, globals, env, cwd, command, providerDeps);
    if (opts.now) deps.now = opts.now;
    const store = opts.store;
    // createDeps closes only a store it opened itself, so the shared one stays open.
    if (store) deps.store = () => Promise.resolve(store);
    return deps;
  });

  // commander's help/usage errors and main()'s error lines go to process.stdout/stderr.
  const { stdout: out, stderr: err } = process;
  // Saved to be put back as they were, never called detached.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const [stdoutWrite, stderrWrite] = [out.write, err.write];
  const capture =
    (into: Buffered) =>
    (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
      into.text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      const done = rest.find((r): r is () => void => typeof r === 'function');
      done?.();
      return true;
    };
  // Relative paths (`pglite:.recon/db`, a module provider's file) resolve against the process's
  // working folder in places that do not go through Deps.cwd: run in the command's folder.
  const cwdBefore = process.cwd();
  process.chdir(cwd);
  const exitCodeBefore = process.exitCode;
  const debugBefore = process.env.DEBUG;
  process.exitCode = undefined;
  // main() reads DEBUG from the process (to print stacks); mirror the run's environment.
  if (env.DEBUG === undefined) delete process.env.DEBUG;
  else process.env.DEBUG = env.DEBUG;
  process.stdout.write = capture(io.out);
  process.stderr.write = capture(io.err);
  const secretsBefore = registeredSecrets();
  clearSecrets();
  let code: number;
  try {
    await main(['node', 'recon', ...args]);
    code = typeof process.exitCode === 'number' ? process.exitCode : Number(process.exitCode ?? 0);
  } finally {
    clearSecrets();
    for (const secret of secretsBefore) registerSecret(secret);
    out.write = stdoutWrite;
    err.write = stderrWrite;
    process.exitCode = exitCodeBefore;
    process.chdir(cwdBefore);
    if (debugBefore === undefined) delete process.env.DEBUG;
    else process.env.DEBUG = debugBefore;
  }
  const stdout = io.out.text;
  let json: JsonDoc;
  try {
    json = stdout.trim() ? JSON.parse(stdout) : undefined;
  } catch {
    json = undefined;
  }
  return { code, signal: null, stdout, stderr: io.err.text, json };
}
