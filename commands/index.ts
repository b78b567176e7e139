import type { Command } from 'commander';
import type { ProgramSeam } from './support/program-seam.js';

/**
 * The command table. `recon --help` (and `recon ops --help`) needs each command's name, usage and
 * description only: those are here, and a command's module — which loads the store, providers and
 * the rest of src/ — is imported only when that command runs or its own help is asked for. Loading
 * every module made `recon --help` take 2× as long as starting node (npm run bench, startup).
 *
 * To add a command: a row here (in the order `recon --help` lists them), and `commands/<name>.ts`
 * exporting `register(parent)`, an options type and a `run…(options, deps)` that does the work and
 * returns data (cli/cli's options struct and run function): the commander action only parses,
 * calls it and renders, and tests call it directly (test/integration/command-seams.test.ts).
 * test/unit/commands.test.ts checks that each row's usage and description are what its module registers.
 */
export interface CommandEntry {
  name: string;
  /** How `recon --help` lists it: the name, `[options]` when it has any, its arguments. */
  usage: string;
  description: string;
  load: () => Promise<{ register(parent: Command, program: ProgramSeam): void }>;
}

export interface CommandGroup {
  name: string;
  description: string;
  examples: string;
  commands: CommandEntry[];
}

/** A global option: commander's flags and description; `default` is shown as commander shows it. */
export interface GlobalOption {
  flags: string;
  description: string;
  default?: boolean;
}

/**
 * The program itself: its description, its global options (after commander's `-V, --version`) and
 * the text `recon --help` ends with. bin/main.ts registers them with commander; bin/recon prints the
 * top-level help from them (commands/support/help.ts) without loading commander.
 */
export const PROGRAM: { description: string; options: GlobalOption[]; after: string } = {
  description:
    'Reconcile side effects whose outcome is unknown: find out what the provider did, finish it exactly once.',
  options: [
    {
      flags: '--db <url>',
      description:
        'store: postgres://…, pglite:PATH or memory: (default: RECON_DB, DATABASE_URL, config db, the nearest .recon/ here or above)',
    },
    {
      flags: '--config <file>',
      description:
        'config file (default: RECON_CONFIG, the nearest recon.config.json here or above, $XDG_CONFIG_HOME/recon/config.json)',
    },
    { flags: '--json', description: 'machine output: one JSON document on stdout', default: false },
    { flags: '--no-color', description: 'no colours (also NO_COLOR)' },
    { flags: '--no-pager', description: 'print long output directly, not through $PAGER (default less -FRX)' },
    {
      flags: '--actor <name>',
      description: 'who is acting, for the audit trail (default: RECON_ACTOR, else user@host)',
    },
    { flags: '-y, --yes', description: 'skip confirmations', default: false },
    { flags: '-q, --quiet', description: 'no progress or notes on stderr', default: false },
  ],
  after: `
Examples:
  $ recon demo                          play the incidents on a throw-away store
  $ recon ops list --unresolved         what is not finished
  $ recon run --json                    one reconciliation pass (cron: alert on exit 8)

Exit codes: 0 done, 1 unexpected, 2 usage, 3 not found, 4 refused by a rule,
            5 provider unavailable (wins over 8), 6 store locked, missing or unreachable,
            7 outcome unknown (submit, retry: do not retry), 8 needs a human, 130 interrupted`,
};

export const COMMANDS: (CommandEntry | CommandGroup)[] = [
  {
    name: 'init',
    usage: 'init',
    description: 'write a commented recon.config.json (if absent) and migrate the store',
    load: () => import('./init.js'),
  },
  {
    name: 'db',
    usage: 'db',
    description: 'the store: migrations and status',
    load: () => import('./db.js'),
  },
  {
    name: 'ops',
    description: 'record, approve, submit, list and show operations',
    examples:
      '\nExamples:\n  $ recon ops record ops.ndjson\n  $ recon ops list --unresolved\n  $ recon ops show refund:ord_1042',
    commands: [
      {
        name: 'record',
        usage: 'record [file]',
        description: 'record operations before calling the provider: a JSON object, an array, or NDJSON lines',
        load: () => import('./ops-record.js'),
      },
      {
        name: 'approve',
        usage: 'approve [options] <id>',
        description: 'approve a proposed operation so it may be submitted',
        load: () => import('./ops-approve.js'),
      },
      {
        name: 'submit',
        usage: 'submit <id>',
        description: 'claim an approved operation and make its first attempt now, with its own idempotency key',
        load: () => import('./ops-submit.js'),
      },
      {
        name: 'list',
        usage: 'list [options]',
        description: 'operations, newest first',
        load: () => import('./ops-list.js'),
      },
      {
        name: 'show',
        usage: 'show <id>',
        description: 'one operation: record, attempts, provider transactions, observations and the audit timeline',
        load: () => import('./ops-show.js'),
      },
    ],
  },
  {
    name: 'lookup',
    usage: 'lookup [options] [id]',
    description: 'ask the provider what it holds, in any state (read-only at the provider)',
    load: () => import('./lookup.js'),
  },
  {
    name: 'attach',
    usage: 'attach [options] <id> <txn>',
    description: 'link a provider transaction to an operation, after fetching and checking it',
    load: () => import('./attach.js'),
  },
  {
    name: 'retry',
    usage: 'retry [options] <id>',
    description: 'evaluate the rule now; retry with the original key and payload only if it allows',
    load: () => import('./retry.js'),
  },
  {
    name: 'escalate',
    usage: 'escalate [options] <id>',
    description:
      'put an operation in front of a human (→ needs_review, from any state but cancelled); on one already in review: reassign it or add a reason',
    load: () => import('./escalate.js'),
  },
  {
    name: 'review',
    usage: 'review',
    description: 'the human queue: operations in needs_review',
    load: () => import('./review.js'),
  },
  {
    name: 'run',
    usage: 'run [options]',
    description: 'one reconciliation pass over unresolved operations: look up, decide by the rule, act',
    load: () => import('./run.js'),
  },
  {
    name: 'webhook',
    usage: 'webhook',
    description: 'ingest provider events: verified, deduplicated, matched to operations',
    load: () => import('./webhook.js'),
  },
  {
    name: 'mcp',
    usage: 'mcp [options]',
    description:
      "serve recon's tools to an AI agent (Model Context Protocol): over stdio, or Streamable HTTP with --http",
    load: () => import('./mcp.js'),
  },
  {
    name: 'stats',
    usage: 'stats [options]',
    description: 'unresolved by state and age, duplicates, time to reconciliation, attempts per operation',
    load: () => import('./stats.js'),
  },
  {
    name: 'sandbox',
    usage: 'sandbox [options] <kind>',
    description: 'start a local provider sandbox (Stripe-compatible or warehouse) for trying recon; Ctrl-C to stop',
    load: () => import('./sandbox.js'),
  },
  {
    name: 'demo',
    usage: 'demo',
    description: 'play the incidents of the spec against built-in sandbox providers on a throw-away store',
    load: () => import('./demo.js'),
  },
  {
    name: 'doctor',
    usage: 'doctor',
    description:
      'check the store, the config, each provider (key, rate limit, clock) and webhook secrets; say what to fix',
    load: () => import('./doctor.js'),
  },
  {
    name: 'completion',
    usage: 'completion <shell>',
    description: 'print a shell completion script (bash, zsh or fish)',
    load: () => import('./completion.js'),
  },
  {
    name: 'audit',
    description: 'the audit trail and provider-side duplicate audits',
    examples: '\nExamples:\n  $ recon audit verify\n  $ recon audit duplicates --provider stripe --since 30d --csv',
    commands: [
      {
        name: 'duplicates',
        usage: 'duplicates [options]',
        description:
          'find provider-side duplicates: several transactions for one operation or client reference, same-charge same-amount refunds close in time',
        load: () => import('./audit-duplicates.js'),
      },
      {
        name: 'verify',
        usage: 'verify [options]',
        description: 're-compute every hash chain of the audit trail; report the first broken link per operation',
        load: () => import('./audit-verify.js'),
      },
    ],
  },
];

/** Global options that take a value: their value is not a command name. */
const VALUE_OPTIONS = new Set(['--db', '--config', '--actor']);

/** The command words of argv (after node and the script): `recon --db X ops list -n 3` → ['ops', 'list', '3']. */
function words(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') break;
    if (a.startsWith('-')) {
      if (VALUE_OPTIONS.has(a)) i++;
      continue;
    }
    out.push(a);
  }
  return out;
}

/** Usage text for the listing of a command that was not loaded. */
const usages = new WeakMap<Command, string>();

/**
 * Registers the command table on `program`: the command that `argv` names (or whose help it asks
 * for, `recon help NAME`) for real, every other one as its name, usage and description only.
 * `all` loads every command (tests, and anything that walks the whole tree).
 */
export async function registerAll(
  program: Command,
  seam: ProgramSeam,
  argv: string[] = [],
  o: { all?: boolean } = {},
): Promise<void> {
  let [first, second] = words(argv.slice(2));
  if (first === 'help') [first, second] = [second, words(argv.slice(2))[2]];
  // Set before the subcommands are made, which inherit it (`recon ops --help` lists stubs too).
  const help = program.createHelp();
  program.configureHelp({ subcommandTerm: (cmd) => usages.get(cmd) ?? help.subcommandTerm(cmd) });
  const stub = (parent: Command, e: CommandEntry) => {
    const cmd = parent.command(e.name).description(e.description);
    usages.set(cmd, e.usage);
  };
  for (const entry of COMMANDS) {
    if ('commands' in entry) {
      const group = program.command(entry.name).description(entry.description).addHelpText('after', entry.examples);
      for (const e of entry.commands) {
        if (o.all || (first === entry.name && second === e.name)) (await e.load()).register(group, seam);
        else stub(group, e);
      }
    } else if (o.all || first === entry.name) (await entry.load()).register(program, seam);
    else stub(program, entry);
  }
}
