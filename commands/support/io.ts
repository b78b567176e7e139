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
}

export function systemIO(opts: { color: boolean; quiet: boolean; json: boolean; env: NodeJS.ProcessEnv }): IO {
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
  };
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
