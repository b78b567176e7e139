/**
 * The program: commander's tree of recon's commands, with one configuration for the program and
 * every subcommand. bin/main.ts runs it; `recon completion` walks it (every command loaded).
 */
import type { Command as CommandType } from 'commander';
import { PROGRAM, registerAll } from './index.js';
import { Command, Option } from './support/commander.js';

/**
 * The program, with the command `argv` names loaded (every command with `all`); `version` is the
 * text `--version` prints (bin/main.ts reads it only when argv asks for it).
 */
export async function buildProgram(
  argv: string[] = [],
  o: { all?: boolean; version?: string } = {},
): Promise<CommandType> {
  const version = o.version ?? '';
  const program = new Command('recon').description(PROGRAM.description).version(version, '-V, --version');
  for (const g of PROGRAM.options) {
    const option = new Option(g.flags, g.description);
    program.addOption(g.default === undefined ? option : option.default(g.default));
  }
  // Every command, the program and each subcommand alike: commander never calls process.exit
  // itself, a usage error ends with the hint, and one error prefix everywhere (commander's own
  // "error: unknown option" becomes "recon: …").
  const configure = (cmd: CommandType) =>
    cmd
      .exitOverride()
      .showHelpAfterError('(run with --help for usage)')
      .configureOutput({
        writeErr: (s) => process.stderr.write(s),
        writeOut: (s) => process.stdout.write(s),
        outputError: (s, write) => write(s.replace(/^error: /, 'recon: ')),
      });
  configure(program).addHelpText('after', PROGRAM.after);
  await registerAll(program, { everyCommand: () => buildProgram([], { all: true }) }, argv, o);
  const inherit = (cmd: CommandType) => {
    for (const sub of cmd.commands) {
      configure(sub);
      inherit(sub);
    }
  };
  inherit(program);
  return program;
}
