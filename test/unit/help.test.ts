/**
 * bin/recon prints the top-level help without commander (commands/support/help.ts, for start-up
 * time): it must be what commander prints for the same program, byte for byte, at any width.
 */
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../commands/program.js';
import { programHelp } from '../../commands/support/help.js';

/** commander's `recon --help` on a stdout `width` columns wide (undefined: not a terminal). */
async function commanderHelp(width: number | undefined): Promise<string> {
  const program = await buildProgram(['node', 'recon', '--help']);
  let out = '';
  program.configureOutput({ writeOut: (s) => (out += s), getOutHelpWidth: (() => width) as () => number });
  program.outputHelp();
  return out;
}

describe('the top-level help without commander', () => {
  it('is commander’s, not on a terminal (80 columns)', async () => {
    const expected = await commanderHelp(undefined);
    expect(expected).toMatch(/^Usage: recon \[options\] \[command\]\n/);
    expect(programHelp()).toBe(expected);
  });

  // 20: too narrow to wrap anything; 61/62: where descriptions beside the terms stop being wrapped
  // (fewer than 40 columns left); 200: nothing needs wrapping.
  it.each([0, 20, 39, 40, 41, 61, 62, 72, 79, 81, 100, 132, 200])(
    'is commander’s on a terminal %i columns wide',
    async (w) => {
      expect(programHelp(w)).toBe(await commanderHelp(w));
    },
  );

  it('uses the width it is given: the options and commands fill 100 columns, and stay within 80', () => {
    const widest = (w: number) =>
      Math.max(
        ...programHelp(w)
          .split('\nExamples:')[0]
          .split('\n')
          .map((l) => l.length),
      );
    expect(widest(100)).toBeLessThanOrEqual(100);
    expect(widest(100)).toBeGreaterThan(80);
    expect(widest(80)).toBeLessThanOrEqual(80);
  });
});
