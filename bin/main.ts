import type { Command as CommandType } from 'commander';
import { buildProgram } from '../commands/program.js';
import { CommanderError } from '../commands/support/commander.js';

/*
 * `recon ops --help` (any help but the top level's, which bin/recon prints without commander) loads
 * this file, commander and the command table, nothing else: the error classes are imported once a
 * command has failed, the version (read from package files) when argv asks for it.
 */

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
  // The hidden command of the completion scripts (bin/recon answers it before loading this file).
  if (argv[2] === '__complete') return (await import('../commands/complete.js')).completeMain(argv.slice(3));
  // -V, --version, or -V among combined short flags (-qV).
  const wantsVersion = argv.slice(2).some((a) => a === '--version' || /^-[^-]*V/.test(a));
  const version = wantsVersion ? (await import('./version.js')).versionText() : '';
  const program = await buildProgram(argv, { version });
  const json = argv.includes('--json');
  // --json asks for one JSON document on stdout, help and version included (SPEC §7).
  if (json && argv.slice(2).some((a) => a === '--version' || a === '-V')) {
    const { versionInfo } = await import('./version.js');
    process.stdout.write(JSON.stringify(versionInfo(), null, 2) + '\n');
    process.exitCode = 0;
    return;
  }
  if (json && argv.slice(2).some((a) => a === '--help' || a === '-h')) {
    process.stdout.write(JSON.stringify(helpJson(program, argv), null, 2) + '\n');
    process.exitCode = 0;
    return;
  }
  try {
    await program.parseAsync(argv);
    process.exitCode = 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here with code 0; parse errors were already printed by commander
      // on stderr. A script that asked for --json still gets the error document on stdout.
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      // `recon ops --json` (a group without its subcommand): commander showed the group's help on
      // stderr; a script gets the usage error as its JSON document.
      const missingSubcommand = err.code === 'commander.help' && err.exitCode !== 0;
      if (json && err.exitCode !== 0 && (!HELP_CODES.includes(err.code) || missingSubcommand)) {
        const message = missingSubcommand
          ? `${commandWords(program, argv).join(' ')}: a subcommand is required; see recon ${commandWords(program, argv).join(' ')} --help`
          : err.message.replace(/^error: /, '');
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

/** The commands argv names, as far as the program knows them: `recon --json ops list` → [ops, list]. */
function commandWords(program: CommandType, argv: string[]): string[] {
  const out: string[] = [];
  let cmd = program;
  for (const word of argv.slice(2)) {
    if (word.startsWith('-')) continue;
    const sub = cmd.commands.find((c) => c.name() === word);
    if (!sub) break;
    out.push(word);
    cmd = sub;
  }
  return out;
}

/** `recon [command] --help --json`: the help of that command as one JSON document. */
function helpJson(program: CommandType, argv: string[]): unknown {
  let cmd = program;
  for (const word of commandWords(program, argv)) cmd = cmd.commands.find((c) => c.name() === word)!;
  const help = cmd.createHelp();
  return {
    command: ['recon', ...commandWords(program, argv)].join(' '),
    usage: help.commandUsage(cmd),
    description: help.commandDescription(cmd),
    arguments: help
      .visibleArguments(cmd)
      .map((a) => ({ name: a.name(), required: a.required, description: a.description })),
    options: help.visibleOptions(cmd).map((o) => ({ flags: o.flags, description: o.description })),
    global_options: help.visibleGlobalOptions(cmd).map((o) => ({ flags: o.flags, description: o.description })),
    commands: help
      .visibleCommands(cmd)
      .map((c) => ({ name: c.name(), usage: help.subcommandTerm(c), description: c.description() })),
  };
}
