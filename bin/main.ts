import type { Command as CommandType } from 'commander';
import { PROGRAM, registerAll } from '../commands/index.js';
import { Command, CommanderError, Option } from '../commands/support/commander.js';

/*
 * `recon ops --help` (any help but the top level's, which bin/recon prints without commander) loads
 * this file, commander and the command table, nothing else: the error classes are imported once a
 * command has failed, the version (read from package files) when argv asks for it.
 */

/** The program, with the command `argv` names loaded (every command with `all`). */
export async function buildProgram(argv: string[] = [], o: { all?: boolean } = {}): Promise<CommandType> {
  // -V, --version, or -V among combined short flags (-qV).
  const wantsVersion = argv.slice(2).some((a) => a === '--version' || /^-[^-]*V/.test(a));
  const version = wantsVersion ? (await import('./version.js')).versionText() : '';
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
  await registerAll(program, argv, o);
  const inherit = (cmd: CommandType) => {
    for (const sub of cmd.commands) {
      configure(sub);
      inherit(sub);
    }
  };
  inherit(program);
  return program;
}

async function redactor(): Promise<(s: string) => string> {
  try {
    const { redact } = await import('../src/config/redact.js');
    return redact;
  } catch {
    return (s) => s;
  }
}

/** Commander's codes for help shown on purpose (`recon ops` with no subcommand shows help too). */
const HELP_CODES = ['commander.helpDisplayed', 'commander.version', 'commander.help'];

/** The one place that maps an error to an exit code and a message (SPEC §7). */
export async function main(argv: string[]): Promise<void> {
  const program = await buildProgram(argv);
  const json = argv.includes('--json');
  try {
    await program.parseAsync(argv);
    process.exitCode = 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here with code 0; parse errors were already printed by commander
      // on stderr. A script that asked for --json still gets the error document on stdout.
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      if (json && err.exitCode !== 0 && !HELP_CODES.includes(err.code)) {
        const message = err.message.replace(/^error: /, '');
        process.stdout.write(
          JSON.stringify({ error: { message, exit_code: 2, type: 'UsageError', code: err.code } }) + '\n',
        );
      }
      return;
    }
    const { ResultExit, UsageError, exitCodeOf } = await import('../src/errors.js');
    // The command printed its result; the exit code says what it was.
    if (err instanceof ResultExit) {
      process.exitCode = err.exitCode;
      return;
    }
    const redact = await redactor();
    const code = exitCodeOf(err);
    const message = redact(err instanceof Error ? err.message : String(err));
    process.stderr.write(`recon: ${message}\n`);
    if (err instanceof UsageError) process.stderr.write('(run with --help for usage)\n');
    if (process.env.DEBUG && err instanceof Error && err.stack) process.stderr.write(redact(err.stack) + '\n');
    if (json)
      process.stdout.write(
        JSON.stringify({ error: { message, exit_code: code, type: err instanceof Error ? err.name : 'Error' } }) + '\n',
      );
    process.exitCode = code;
  }
}
