/**
 * `recon --help` lists the command table without loading the commands' modules (start-up time):
 * the table's usage and description of each command must be what its module registers, so the
 * help a person reads is the same either way.
 */
import { Help, type Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../commands/program.js';
import { COMMANDS } from '../../commands/index.js';

function helpOf(program: Command, path: string[]): string {
  let cmd = program;
  for (const name of path) cmd = cmd.commands.find((c) => c.name() === name)!;
  return cmd.helpInformation();
}

describe('the command table', () => {
  it('names each command with the usage and description its module registers', async () => {
    const loaded = await buildProgram([], { all: true });
    const help = new Help();
    for (const entry of COMMANDS) {
      const top = loaded.commands.find((c) => c.name() === entry.name)!;
      expect(top.description()).toBe(entry.description);
      const rows =
        'commands' in entry ? entry.commands.map((e) => ({ e, parent: top })) : [{ e: entry, parent: loaded }];
      for (const { e, parent } of rows) {
        const cmd = parent.commands.find((c) => c.name() === e.name);
        expect(cmd, e.name).toBeDefined();
        expect(help.subcommandTerm(cmd!)).toBe(e.usage);
        expect(cmd!.description()).toBe(e.description);
      }
    }
    expect(loaded.commands.map((c) => c.name())).toEqual(COMMANDS.map((e) => e.name));
  });

  it('recon --help and recon ops --help read the same from the table as from the loaded commands', async () => {
    const loaded = await buildProgram([], { all: true });
    const table = await buildProgram(['node', 'recon', '--help']);
    expect(helpOf(table, [])).toBe(helpOf(loaded, []));
    expect(helpOf(table, ['ops'])).toBe(helpOf(loaded, ['ops']));
    expect(helpOf(table, ['audit'])).toBe(helpOf(loaded, ['audit']));
  });

  it('loads the named command for real, after global options and their values', async () => {
    const program = await buildProgram(['node', 'recon', '--db', 'memory:', 'ops', 'list', '--json']);
    const list = program.commands.find((c) => c.name() === 'ops')!.commands.find((c) => c.name() === 'list')!;
    expect(list.options.length).toBeGreaterThan(0);
    const run = program.commands.find((c) => c.name() === 'run')!;
    expect(run.options).toHaveLength(0);
  });
});
