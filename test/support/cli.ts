/**
 * Runs the BUILT recon (bin/recon → dist/) as a child process, the way users and cron run it.
 * `npm test` builds first; when running one file by hand, run `npm run build` before.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = path.join(ROOT, 'bin', 'recon');

/**
 * A parsed JSON document from a command's stdout (`--json`), asserted on field by field with
 * expect(): the README documents its shape. The one `any` of the tests, named.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type JsonDoc = any;

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON when it is JSON. */
  json: JsonDoc;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
  input?: string;
  timeoutMs?: number;
}

function assertBuilt(): void {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'bin', 'main.js'))) {
    throw new Error('dist/ is missing: run `npm run build` (npm test does it) before the CLI tests');
  }
}

/** A clean environment: no RECON_*, STRIPE_* or DATABASE_URL leaking in from the developer's shell. */
export function cleanEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(RECON_|STRIPE_|DATABASE_URL$|PG)/.test(k) && k !== 'RECON_TEST_PG_URL') continue;
    env[k] = v;
  }
  env.NO_COLOR = '1';
  env.RECON_ACTOR = 'test-suite';
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export function spawnRecon(args: string[], opts: CliOptions = {}): ChildProcess {
  assertBuilt();
  return spawn(process.execPath, [BIN, ...args], {
    cwd: opts.cwd ?? ROOT,
    env: cleanEnv(opts.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

export function recon(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  const child = spawnRecon(args, opts);
  return collect(child, opts);
}

export function collect(child: ChildProcess, opts: Pick<CliOptions, 'input' | 'timeoutMs'> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      let json: JsonDoc;
      try {
        json = stdout.trim() ? JSON.parse(stdout) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code, signal, stdout, stderr, json });
    });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
    else child.stdin!.end();
  });
}
