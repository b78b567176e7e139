/**
 * A reader that closes its end of the pipe early (`recon --help | head -1`): recon stops writing
 * and exits with the command's own code, quietly, instead of dying on an unhandled EPIPE with a
 * stack trace on stderr.
 */
import { describe, expect, it } from 'vitest';
import { spawnRecon } from '../support/cli.js';

/** Runs recon with its stdout pipe closed by the reader before the first byte is read. */
function withStdoutClosed(
  args: string[],
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  const child = spawnRecon(args);
  child.stdout!.destroy();
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  child.stdin!.end();
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stderr }));
  });
}

describe('stdout closed by the reader', () => {
  it.each([[['--help']], [['--version']], [['ops', '--help']], [['completion', 'bash']]])(
    'recon %j exits 0 without a word on stderr',
    async (args) => {
      const r = await withStdoutClosed(args);
      expect(r.stderr).toBe('');
      expect(r.signal).toBeNull();
      expect(r.code).toBe(0);
    },
  );
});
