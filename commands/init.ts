import { existsSync } from 'node:fs';
import { access, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson } from './support/io.js';

/** JSON has no comments: keys starting with "//" are notes that the config loader ignores. */
export const CONFIG_TEMPLATE = {
  '//': 'recon configuration. Durations: 500ms, 30s, 10m, 24h, 7d. ${VAR} is read from the environment; secrets never go in this file.',
  db: 'pglite:.recon/db',
  '// db':
    'the store: pglite:PATH (embedded, one process at a time), memory:, or postgres://user@host/db for several workers',
  providers: {
    stripe: {
      '//': 'refunds through the official Stripe SDK; apiBase may point at a local sandbox (recon sandbox stripe)',
      type: 'stripe',
      apiKey: '${STRIPE_API_KEY}',
      apiBase: 'https://api.stripe.com',
      webhookSecret: '${STRIPE_WEBHOOK_SECRET}',
      keyRetention: '24h',
      uncertaintyWindow: '10m',
      maxAttempts: 3,
      escalateAfter: '72h',
      rateLimit: 25,
      concurrency: 8,
      timeout: '20s',
      lease: '2m',
    },
  },
};

export function register(program: Command): void {
  program
    .command('init')
    .description('write a commented recon.config.json (if absent) and migrate the store')
    .addHelpText('after', '\nExample:\n  $ recon init && recon db status')
    .action(
      action(async (_a, _o, deps) => {
        const r = await runInit({ config: deps.globals.config, db: deps.globals.db }, deps);
        if (deps.globals.json)
          return printJson(deps.io, {
            config: r.config,
            config_written: r.config_written,
            store: r.store,
            schema_version: r.schema_version,
            applied: r.applied,
          });
        info(deps.io, r.config_written ? `wrote ${r.config}` : `${r.config} exists; left unchanged`);
        info(
          deps.io,
          `store ${r.store}: schema version ${r.schema_version}${r.applied.length ? ` (applied ${r.applied.join(', ')})` : ''}`,
        );
        info(
          deps.io,
          [
            '',
            'Next steps:',
            '  export STRIPE_API_KEY=sk_test_…            # or try it locally: recon sandbox stripe --port 12111',
            '  export STRIPE_WEBHOOK_SECRET=whsec_…       # verifies webhooks (recon webhook serve refuses without it)',
            '  recon doctor                               # checks the store, the config, the key and the clock',
            '  recon ops record refund.json && recon ops submit refund:ord_1042',
            '  recon ops list --unresolved                # then: recon run, recon review list',
            '',
            'recon finds this store and config from any folder below this one (like git); from anywhere',
            'else, set RECON_DB (and RECON_CONFIG), as cron jobs should.',
          ].join('\n'),
        );
      }),
    );
}

export interface InitOptions {
  /** --config: where the config file is written (else RECON_CONFIG, else ./recon.config.json). */
  config?: string;
  /** --db: the store to create or migrate (else as every command finds it). */
  db?: string;
}

/** What init did: the config file (written or left), the store and the migrations applied. */
export interface InitResult {
  config: string;
  config_written: boolean;
  store: string;
  schema_version: number;
  applied: number[];
}

/**
 * Writes the config if absent, then creates or migrates the store. Its one note, "created a new
 * recon store at …", is said as the store is made (as Deps.store says it), before the migrations run.
 */
export async function runInit(o: InitOptions, deps: Deps): Promise<InitResult> {
  const file = path.resolve(deps.cwd, o.config || deps.env.RECON_CONFIG || 'recon.config.json');
  let wrote = false;
  try {
    await access(file);
  } catch {
    // Not group-writable even under umask 002: recon refuses a found config that group may write.
    await writeFile(file, JSON.stringify(CONFIG_TEMPLATE, null, 2) + '\n', { flag: 'wx', mode: 0o644 });
    wrote = true;
  }
  const { openStore } = await import('../src/store/open.js');
  const { chooseStore } = await import('../src/store/discover.js');
  const { migrate } = await import('../src/store/migrate.js');
  // The store is the one every other command will use (SPEC §5): an existing config's `db`
  // counts, and a relative pglite path in it is relative to the config file.
  const config = await deps.config();
  const choice = chooseStore({
    flag: o.db,
    env: deps.env,
    configDb: config.db,
    configPath: config.path,
    cwd: deps.cwd,
    create: true,
  });
  const isNew = choice.folder !== undefined && !existsSync(choice.folder);
  // A new embedded store starts as a copy of the migrated template: its migrations are applied.
  const db = await openStore(choice.url, { autoMigrate: false, requireCurrent: false, template: true });
  const { templateVersions } = await import('../src/store/pglite.js');
  if (isNew) info(deps.io, `created a new recon store at ${choice.folder}`);
  try {
    const migrated = await migrate(db);
    return {
      config: file,
      config_written: wrote,
      store: db.displayUrl,
      schema_version: migrated.version,
      applied: [...templateVersions(db), ...migrated.applied],
    };
  } finally {
    await db.close();
  }
}
