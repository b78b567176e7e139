import type { Command } from 'commander';

/**
 * What a command may need of the whole program, handed down by commands/program.ts instead of
 * imported back (no circle): `recon completion` walks every command, loaded.
 */
export interface ProgramSeam {
  everyCommand: () => Promise<Command>;
}
