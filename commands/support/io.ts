import type { Writable } from 'node:stream';
import { redact } from '../../src/config/redact.js';

/**
 * The one object that knows about the terminal (gh's IOStreams): where data goes (stdout),
 * where progress and warnings go (stderr), whether colour and prompts are allowed.
 * Commands ask it; they never look at process.stdout themselves.
 */
export interface IO {
  out: Writable;
  err: Writable;
  isStdoutTTY: boolean;
  isStderrTTY: boolean;
  /** A person can answer a prompt: stdin and stderr are terminals. */
  canPrompt: boolean;
  /** Colour is allowed: stdout is a TTY, no NO_COLOR, no --no-color, no --json. */
  color: boolean;
  quiet: boolean;
  stdin: NodeJS.ReadableStream;
  /** Width of the terminal (stdout's, else COLUMNS, else 80): tables wrap to it. */
  columns?: number;
  /** Height of the terminal: output longer than this goes through the pager. */
  rows?: number;
  /**
   * The pager for long output on a terminal (`$PAGER`, else `less -FRX`, as git and gh do), or
   * null: not a terminal, --json, --no-pager, or `PAGER=cat`/empty.
   */
  pager?: string | null;
}

export function systemIO(opts: {
  color: boolean;
  quiet: boolean;
  json: boolean;
  env: NodeJS.ProcessEnv;
  /** false with --no-pager. */
  pager?: boolean;
}): IO {
  const isStdoutTTY = Boolean(process.stdout.isTTY);
  const isStderrTTY = Boolean(process.stderr.isTTY);
  const noColor = opts.env.NO_COLOR !== undefined && opts.env.NO_COLOR !== '';
  return {
    out: process.stdout,
    err: process.stderr,
    isStdoutTTY,
    isStderrTTY,
    canPrompt: Boolean(process.stdin.isTTY) && isStderrTTY,
    color: isStdoutTTY && opts.color && !noColor && !opts.json,
    quiet: opts.quiet,
    stdin: process.stdin,
    columns: process.stdout.columns || Number(opts.env.COLUMNS) || 80,
    // A terminal that reports no size (some CI pseudo-terminals): no paging, nothing to measure against.
    rows: process.stdout.rows || undefined,
    pager: isStdoutTTY && opts.pager !== false && !opts.json ? pagerCommand(opts.env) : null,
  };
}

function pagerCommand(env: NodeJS.ProcessEnv): string | null {
  const pager = env.PAGER ?? 'less -FRX';
  return pager.trim() === '' || pager.trim() === 'cat' ? null : pager;
}

/**
 * Data for a person: through the pager when it is longer than the window (`review list` with 55
 * items is 350 lines), else printed as it is. The pager runs through the shell, as git runs
 * $PAGER; `less` gets `LESS=FRX` unless the user set LESS. A pager that cannot start leaves the
 * output printed, not lost.
 */
export async function printPaged(io: IO, text: string): Promise<void> {
  const lines = text.split('\n').length;
  if (!io.pager || !io.rows || lines < io.rows) return println(io, text);
  const { spawn } = await import('node:child_process');
  const child = spawn(io.pager, {
    shell: true,
    stdio: ['pipe', 'inherit', 'inherit'],
    env: { LESS: 'FRX', ...process.env },
  });
  const done = new Promise<boolean>((resolve) => {
    child.on('error', () => resolve(false));
    child.on('close', (code) => resolve(code !== 127));
  });
  // The reader quit the pager before the end (q in less): the rest is not wanted.
  child.stdin.on('error', () => undefined);
  child.stdin.end(redact(text) + '\n');
  if (!(await done)) println(io, text);
}

// Every line recon prints goes through redact() (SPEC §6: secrets are never printed): a secret that
// reached a value by a path nobody foresaw is still hidden at the last boundary.

/** Writes a line of data to stdout. */
export function println(io: IO, text = ''): void {
  io.out.write(redact(text) + '\n');
}

/** Progress, warnings and "done" go to stderr, and not at all with --quiet. */
export function info(io: IO, text: string): void {
  if (!io.quiet) io.err.write(redact(text) + '\n');
}

export function warn(io: IO, text: string): void {
  io.err.write(`warning: ${redact(text)}\n`);
}

/** `--json` output: exactly one document on stdout. */
export function printJson(io: IO, value: unknown): void {
  io.out.write(redact(JSON.stringify(value, null, 2)) + '\n');
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}
