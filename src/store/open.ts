/**
 * Choosing and opening the store (SPEC §5). The backend modules are imported only here and
 * only for the URL given, so a command that never opens a store loads neither `pg` nor PGlite.
 */
import { UsageError } from '../errors.js';
import type { Db } from './db.js';
import { redact } from '../config/redact.js';
import { migrate, refuseNewer, schemaStatus, SchemaVersionError } from './migrate.js';

const DEFAULT_STORE_URL = 'pglite:.recon/db';

/** §5: --db, else RECON_DB, else DATABASE_URL, else config `db`, else `pglite:.recon/db`. */
export function resolveStoreUrl(s: { flag?: string; env: NodeJS.ProcessEnv; configDb?: string }): string {
  // An empty value (`RECON_DB=` in a cron file) means "not set", as it does for most tools.
  return s.flag || s.env.RECON_DB || s.env.DATABASE_URL || s.configDb || DEFAULT_STORE_URL;
}

export type StoreTarget = { kind: 'postgres'; url: string } | { kind: 'pglite'; path: string } | { kind: 'memory' };

/** Validates a store URL; UsageError (exit 2) names the accepted forms. */
export function parseStoreUrl(url: string): StoreTarget {
  if (/^postgres(ql)?:\/\//i.test(url)) {
    try {
      new URL(url);
    } catch {
      throw new UsageError(`invalid --db URL ${redact(url)}: not a valid postgres:// URL`);
    }
    return { kind: 'postgres', url };
  }
  if (url.startsWith('pglite:')) {
    const path = url.slice('pglite:'.length);
    if (!path) throw new UsageError('invalid --db URL pglite: (no folder): use pglite:PATH, e.g. pglite:.recon/db');
    return { kind: 'pglite', path };
  }
  if (url === 'memory:') return { kind: 'memory' };
  throw new UsageError(`invalid --db URL ${redact(url)}: use postgres://…, postgresql://…, pglite:PATH or memory:`);
}

export interface OpenStoreOptions {
  /**
   * Apply the migrations to an empty store (SPEC: "automatically on first use of an empty
   * store"). Default true. A store that has a schema is never migrated implicitly: upgrading a
   * shared database is `recon db migrate`'s job.
   */
  autoMigrate?: boolean;
  /**
   * Refuse a store with pending migrations (exit 1, "run `recon db migrate`"). Default true;
   * `recon db migrate` and `recon db status` pass false.
   */
  requireCurrent?: boolean;
  /** Migrations folder (tests). */
  migrationsDir?: string;
  /**
   * Create a new embedded store (`memory:`, or a `pglite:` folder missing or empty) from the migrated
   * store template (src/store/template.ts) when this build has one. Default: `autoMigrate`, and never
   * with `migrationsDir`. `recon init` passes true (it migrates right after opening).
   */
  template?: boolean;
}

/**
 * Validates the URL, opens the store, migrates an empty one, and refuses a schema newer
 * than this binary (SchemaVersionError). Throws StoreLockedError (exit 6) when the store is
 * locked by another process or unreachable.
 */
export async function openStore(url: string, opts: OpenStoreOptions = {}): Promise<Db> {
  const target = parseStoreUrl(url);
  const template = opts.migrationsDir === undefined && (opts.template ?? opts.autoMigrate ?? true);
  const db = await openTarget(target, url, template);
  try {
    const dir = opts.migrationsDir;
    let status = await schemaStatus(db, { dir });
    refuseNewer(db, status);
    if (status.version === 0 && status.pending.length > 0 && (opts.autoMigrate ?? true)) {
      await migrate(db, { dir });
      status = await schemaStatus(db, { dir });
    }
    if ((opts.requireCurrent ?? true) && status.pending.length > 0) {
      throw new SchemaVersionError(
        status.version === 0
          ? `store ${db.displayUrl} has no schema yet: run \`recon db migrate\``
          : `store ${db.displayUrl} has schema version ${status.version}, this recon needs ${status.latest}: ` +
              `run \`recon db migrate\``,
      );
    }
    return db;
  } catch (err) {
    await db.close();
    throw err;
  }
}

/**
 * Starts what opening a new `memory:` store begins with, in the background: reading and compiling
 * PGlite's WebAssembly (once per process) and inflating the migrated store template (for the next
 * store made from it). Both run on other threads: a caller with modules to load before it opens the
 * store (`recon demo`) calls this first, and the store's start overlaps with them. Other URLs: nothing.
 */
export async function prefetchStore(url: string): Promise<void> {
  if (url !== 'memory:') return;
  const [{ prefetchRuntime }, { prefetchTemplate }] = await Promise.all([
    import('./pglite.js'),
    import('./template.js'),
  ]);
  prefetchRuntime();
  prefetchTemplate();
}

async function openTarget(target: StoreTarget, url: string, useTemplate: boolean): Promise<Db> {
  if (target.kind === 'postgres') {
    const { openPostgres } = await import('./postgres.js');
    return openPostgres(target.url);
  }
  const [{ openPglite }, { readTemplate }] = await Promise.all([import('./pglite.js'), import('./template.js')]);
  return openPglite(url, target.kind === 'pglite' ? target.path : undefined, {
    template: useTemplate ? readTemplate : undefined,
  });
}
