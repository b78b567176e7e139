import type { Command } from 'commander';
import type { StoreStatus } from '../src/core/report/store-status.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, println } from './support/io.js';

export function register(program: Command): void {
  const db = program
    .command('db')
    .description('the store: migrations and status')
    .addHelpText('after', '\nExamples:\n  $ recon db migrate\n  $ recon db status --json');
  db.command('migrate')
    .description('apply pending schema migrations')
    .addHelpText('after', '\nExample:\n  $ recon db migrate --db postgres://recon@localhost/ops')
    .action(
      action(async (_a, _o, deps) => {
        const r = await runMigrate({}, deps);
        if (deps.globals.json) return printJson(deps.io, r);
        info(
          deps.io,
          r.applied.length
            ? `applied migrations ${r.applied.join(', ')}; schema version ${r.version}`
            : `schema is up to date (version ${r.version})`,
        );
      }),
    );
  db.command('status')
    .description('schema version and counts')
    .addHelpText('after', '\nExample:\n  $ recon db status --json')
    .action(
      action(async (_a, _o, deps) => {
        const doc = await runStatus({}, deps);
        const total = doc.operations;
        const byState = doc.by_state;
        if (deps.globals.json) return printJson(deps.io, doc);
        println(deps.io, `store           ${doc.store} (${doc.backend})`);
        println(
          deps.io,
          `schema version  ${doc.schema_version} (latest ${doc.latest_version}${doc.pending_migrations.length ? `, pending ${doc.pending_migrations.join(', ')}` : ''})`,
        );
        println(
          deps.io,
          `operations      ${total}${
            total
              ? '  (' +
                Object.entries(byState)
                  .map(([s, n]) => `${s} ${n}`)
                  .join(', ') +
                ')'
              : ''
          }`,
        );
        println(deps.io, `audit events    ${doc.audit_events}`);
      }),
    );
}

/** `db migrate` and `db status` take no options of their own (the store is --db's, as for every command). */
export type DbOptions = Record<string, never>;

/** Applies pending migrations to the store (opened without auto-migration). */
export async function runMigrate(
  _o: DbOptions,
  deps: Deps,
): Promise<{ store: string; applied: number[]; version: number }> {
  const store = await deps.store({ autoMigrate: false, requireCurrent: false });
  const { migrate } = await import('../src/store/migrate.js');
  const r = await migrate(store);
  return { store: store.displayUrl, applied: r.applied, version: r.version };
}

/** The store's schema version, pending migrations and counts. */
export async function runStatus(_o: DbOptions, deps: Deps): Promise<StoreStatus> {
  const store = await deps.store({ requireCurrent: false });
  const { storeStatus } = await import('../src/core/report/store-status.js');
  return storeStatus(store);
}
