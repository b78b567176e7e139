/**
 * Helpers for the on-call tests (issue 11): recon piped, in this process (test/support/in-process.ts)
 * or as a child process where a real one is the point, and under a pseudo-terminal (`script -q`,
 * util-linux), in throw-away directories with their own embedded store. RECON_BIN runs them all as
 * child processes of another build (to show a test failed before its fix).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Db } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import { migratedStoreAt } from '../support/backends.js';
import { BIN, cleanEnv, collect, type CliOptions, type CliResult } from '../support/cli.js';
import { runInProcess, type InProcessOptions } from '../support/in-process.js';

export const RECON_BIN = process.env.RECON_BIN || BIN;
/** No user-wide config (`$XDG_CONFIG_HOME/recon/config.json`) from the machine running the tests. */
const NO_XDG = path.join(os.tmpdir(), 'recon-oncall-no-xdg');

const dirs: string[] = [];
export function tempDir(prefix = 'recon-oncall-'): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  dirs.push(dir);
  return dir;
}
export function removeTempDirs(): void {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
}

/**
 * Runs recon piped (no TTY): what cron and scripts see. In this process (the same main(), commander
 * and exit-code mapping as the binary; the command finds or creates its store as the binary does,
 * unless `store` gives it an open one), or with RECON_BIN set, as a child process of that build.
 */
export function recon(args: string[], opts: InProcessOptions = {}): Promise<CliResult> {
  if (process.env.RECON_BIN) return reconProcess(args, opts);
  return runInProcess(args, { ...opts, env: { XDG_CONFIG_HOME: NO_XDG, ...opts.env } });
}

/** Runs the built recon piped, as a child process: for what needs a real process. */
function reconProcess(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  const child = spawn(process.execPath, [RECON_BIN, ...args], {
    cwd: opts.cwd,
    env: cleanEnv({ XDG_CONFIG_HOME: NO_XDG, ...opts.env }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return collect(child, opts);
}

/**
 * Gives `dir` the store `recon init` or a first `ops record` would create there (`.recon/db`, at
 * the latest schema), copied from the run's migrated template: creating one costs PGlite's initdb
 * and the migrations, seconds each time. For tests where the store's creation is not the point.
 */
export async function withStore(dir: string): Promise<string> {
  await migratedStoreAt(path.join(dir, '.recon', 'db'));
  return dir;
}

/**
 * `recon` on one open store for the in-process commands of a test file, the one `dir` holds in
 * `.recon/db` (opened on first use, not once per command). `release()` closes it, so that a child
 * process may take it (the embedded store admits one process); the next command opens it again.
 */
export function sharedStore(dir: string): {
  recon: (args: string[], opts?: InProcessOptions) => Promise<CliResult>;
  release: () => Promise<void>;
} {
  let db: Promise<Db> | undefined;
  const release = async () => {
    const open = db;
    db = undefined;
    if (open) await (await open.catch(() => null))?.close();
  };
  return {
    recon: async (args, opts = {}) => {
      if (process.env.RECON_BIN) return reconProcess(args, { cwd: dir, ...opts });
      db ??= openStore(`pglite:${path.join(dir, '.recon', 'db')}`).catch((err: unknown) => {
        db = undefined;
        throw err;
      });
      return recon(args, { cwd: dir, ...opts, store: await db });
    },
    release,
  };
}

export interface TtyResult {
  code: number | null;
  /** Everything the terminal showed (stdout and stderr together), CRs removed. */
  screen: string;
}

/** Options of a run under a pseudo-terminal. */
interface TtyOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  cols?: number;
  rows?: number;
  keys?: string;
  /** Type `keys` once the screen shows this (e.g. a prompt's "(y/N)"). */
  waitFor?: RegExp;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Runs recon under a pseudo-terminal of `cols` columns: stdin, stdout and stderr are a TTY.
 * `keys` are typed once the screen matches `waitFor` (e.g. "\u0003", Ctrl-C, at a prompt).
 */
export function reconTty(args: string[], opts: TtyOptions = {}): Promise<TtyResult> {
  return underTty(`${quote(process.execPath)} ${quote(RECON_BIN)} ${args.map(quote).join(' ')}`, opts);
}

/**
 * Runs several recon commands one after the other in one process under a pseudo-terminal of
 * `cols` columns, each as the binary runs it (bin/recon calls dist/bin/main.js's main() with its
 * argv; each command opens and closes its store itself), and returns what each one showed and its
 * exit code. One process boots the embedded store's runtime (PGlite's WebAssembly, ~1 s of CPU)
 * once instead of once per command: for screens of several commands, where what the terminal shows
 * is the point and not the process. A command given as `{ args, cols, rows }` gets a terminal of
 * that size: the window is resized before it (`stty`, as a person resizing it; the process sees
 * SIGWINCH), and the commands after it keep the size. Not for bin/recon's own paths (`--help`,
 * `--version`), signals or prompts: reconTty.
 */
export async function reconTtyEach(
  commands: (string[] | TtyCommand)[],
  opts: Omit<TtyOptions, 'keys' | 'waitFor'> = {},
): Promise<TtyResult[]> {
  const main = path.join(path.dirname(RECON_BIN), '..', 'dist', 'bin', 'main.js');
  const driver = [
    `const { main } = await import(${JSON.stringify(pathToFileURL(main).href)});`,
    `const { execFileSync } = await import('node:child_process');`,
    `for (const [i, { args, cols, rows }] of JSON.parse(process.argv[1]).entries()) {`,
    `  if (cols !== undefined && (process.stdout.columns !== cols || process.stdout.rows !== rows)) {`,
    // Node hears SIGWINCH on an unreferenced handle: the timer keeps the process alive until then.
    `    const resized = new Promise((resolve, reject) => {`,
    `      const timer = setTimeout(() => reject(new Error('no SIGWINCH after stty')), 30000);`,
    `      process.stdout.once('resize', () => resolve(clearTimeout(timer)));`,
    `    });`,
    `    execFileSync('stty', ['cols', String(cols), 'rows', String(rows)], { stdio: ['inherit', 'ignore', 'inherit'] });`,
    `    await resized;`,
    `  }`,
    `  process.exitCode = undefined;`,
    `  await main([process.execPath, ${JSON.stringify(RECON_BIN)}, ...args]);`,
    `  process.stdout.write('\\n${EACH_END} ' + i + ' exit ' + (process.exitCode ?? 0) + '\\n');`,
    `}`,
    `process.exitCode = 0;`,
  ].join('\n');
  const list = commands.map((c) =>
    Array.isArray(c) ? { args: c } : { args: c.args, cols: c.cols, rows: c.rows ?? opts.rows ?? DEFAULT_ROWS },
  );
  const cmd = `${quote(process.execPath)} --input-type=module -e ${quote(driver)} ${quote(JSON.stringify(list))}`;
  const all = await underTty(cmd, opts);
  if (all.code !== 0) throw new Error(`reconTtyEach: the commands' process exited ${all.code}:\n${all.screen}`);
  const parts = all.screen.split(new RegExp(`\\n${EACH_END} (\\d+) exit (\\d+)\\n`));
  // [screen 0, "0", code 0, screen 1, "1", code 1, …, what followed the last one]
  return list.map(({ args }, i) => {
    if (parts[3 * i + 1] !== String(i))
      throw new Error(`reconTtyEach: no end of \`recon ${args.join(' ')}\`:\n${all.screen}`);
    return { code: Number(parts[3 * i + 2]), screen: parts[3 * i] };
  });
}

/** A command of reconTtyEach on a terminal of its own size (rows: the run's, else DEFAULT_ROWS). */
interface TtyCommand {
  args: string[];
  cols: number;
  rows?: number;
}
/** The line the reconTtyEach driver writes after each command. */
const EACH_END = '@@reconTtyEach';

const DEFAULT_ROWS = 50;

function underTty(command: string, opts: TtyOptions): Promise<TtyResult> {
  const cmd = `stty cols ${opts.cols ?? 100} rows ${opts.rows ?? DEFAULT_ROWS}; ${command}`;
  // PAGER=cat unless a test names one: a pager waiting for a key would hold the test until its timeout.
  const env = cleanEnv({
    TERM: 'xterm',
    PAGER: 'cat',
    XDG_CONFIG_HOME: path.join(os.tmpdir(), 'recon-oncall-no-xdg'),
    ...opts.env,
  });
  delete env.NO_COLOR;
  if (opts.env && 'NO_COLOR' in opts.env && opts.env.NO_COLOR !== undefined) env.NO_COLOR = opts.env.NO_COLOR;
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-q', '-e', '-c', cmd, '/dev/null'], {
      cwd: opts.cwd,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    // Decoded as a stream: a box-drawing character split across two chunks stays one character.
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    let typed = false;
    const type = () => {
      if (typed || opts.keys === undefined || !opts.waitFor?.test(plain(out))) return;
      typed = true;
      child.stdin.write(opts.keys);
    };
    child.stdout.on('data', type);
    child.stderr.on('data', type);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, screen: out.replace(/\r/g, '') });
    });
  });
}

/** Strips colour and cursor escape codes from a captured screen. */
export function plain(screen: string): string {
  return screen.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '').replace(/\u001b\][^\u0007]*\u0007/g, '');
}

export function hasScript(): boolean {
  return spawnSync('script', ['--version']).status === 0;
}

export const refund = (id: string, over: Record<string, unknown> = {}) => ({
  id,
  provider: 'stripe',
  action: 'refund',
  payload: { payment_intent: 'pi_1', amount: 1999, currency: 'usd' },
  client_reference: id.replace(/^refund:/, ''),
  approval: 'TICKET-1',
  ...over,
});

/** A directory with a config pointing a `stripe` provider at `apiBase` and a short window. */
export function configDir(apiBase: string, over: Record<string, unknown> = {}, dir = tempDir()): string {
  fs.writeFileSync(
    path.join(dir, 'recon.config.json'),
    JSON.stringify({
      providers: {
        stripe: {
          type: 'stripe',
          apiKey: '${STRIPE_API_KEY}',
          apiBase,
          webhookSecret: '${STRIPE_WEBHOOK_SECRET}',
          uncertaintyWindow: '1s',
          timeout: '2s',
          lease: '4s',
          rateLimit: 200,
          ...over,
        },
      },
    }),
  );
  return dir;
}

export const STRIPE_ENV = { STRIPE_API_KEY: 'sk_test_sandbox', STRIPE_WEBHOOK_SECRET: 'whsec_test_oncall' };
