import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { LoadedConfig } from '../../src/config/types.js';
import type { AuditKey } from '../../src/lib/keyed-hash.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { UsageError } from '../../src/errors.js';
import type { ProviderDeps } from '../../src/providers/index.js';
import type { Db } from '../../src/store/db.js';
import type { OpenStoreOptions } from '../../src/store/open.js';
import type { Provider } from '../../src/types.js';
import type { IO } from './io.js';

/** The global options of SPEC §7, as commander parses them. */
export interface GlobalOptions {
  db?: string;
  config?: string;
  json: boolean;
  color: boolean;
  /** false with --no-pager. */
  pager?: boolean;
  actor?: string;
  yes: boolean;
  quiet: boolean;
}

/** The commands that may create a new embedded store (SPEC §5); every other one finds it or fails (exit 6). */
const STORE_CREATORS = ['init', 'ops record', 'mcp', 'demo'];

/**
 * Everything a command needs, built lazily (cli/cli's factory): `recon --version` loads no
 * store, no SDK, no config. Tests swap any part.
 */
export interface Deps {
  io: IO;
  env: NodeJS.ProcessEnv;
  cwd: string;
  globals: GlobalOptions;
  now: () => Date;
  actor(): string;
  config(): Promise<LoadedConfig>;
  /** Opens the store once; `opts` matter only on the first call (db migrate/status open without auto-migration). */
  store(opts?: OpenStoreOptions): Promise<Db>;
  /** The audit key (RECON_AUDIT_KEY, else the config's `auditKey`), resolved once; null when none is set. */
  auditKey(): Promise<AuditKey | null>;
  core(): Promise<CoreContext>;
  /** The core on the store, or null when no store is named or found (for a command that works without one). */
  coreIfStore(): Promise<CoreContext | null>;
  provider(name: string): Promise<Provider>;
  /** Asks a person; without a TTY, fails unless --yes was given. */
  confirm(message: string): Promise<boolean>;
  close(): Promise<void>;
}

/** The commands that change something: they name the store and the provider mode on stderr. */
const CHANGERS = [
  'ops record',
  'ops approve',
  'ops submit',
  'attach',
  'retry',
  'escalate',
  'review resolve',
  'run',
  'webhook ingest',
];

/** ` · stripe live` (sk_live_/rk_live_ key) or ` · stripe test`, per provider; never the key. */
function providerModes(config: LoadedConfig): string {
  const modes = Object.entries(config.providers).map(([name, p]) => {
    if (p.type !== 'stripe') return name;
    const mode = /^(sk|rk)_live_/.test(p.apiKey)
      ? 'live'
      : /^(sk|rk)_test_/.test(p.apiKey)
        ? 'test'
        : 'key of unknown mode';
    return `${name} ${mode}`;
  });
  return modes.map((m) => ` · ${m}`).join('');
}

/** False when `p` or a folder above it is a file (`pglite:notes.txt/db`). */
function isDirectoryOrMissing(p: string): boolean {
  for (let dir = p; ; dir = path.dirname(dir)) {
    try {
      return fs.statSync(dir).isDirectory();
    } catch {
      if (path.dirname(dir) === dir) return true;
    }
  }
}

function defaultActor(env: NodeJS.ProcessEnv): string {
  if (env.RECON_ACTOR) return env.RECON_ACTOR;
  let user = env.USER ?? 'unknown';
  try {
    user = os.userInfo().username;
  } catch {
    // no passwd entry (some containers): keep $USER
  }
  return `${user}@${os.hostname()}`;
}

export function createDeps(
  io: IO,
  globals: GlobalOptions,
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
  /** The command path (`ops list`): decides whether a missing embedded store may be created. */
  command = '',
  /** What the providers are built with (their retry back-off's sleep): tests inject it; default real timers. */
  providerDeps: ProviderDeps = {},
): Deps {
  let config: Promise<LoadedConfig> | undefined;
  let store: Promise<Db> | undefined;
  let auditKey: Promise<AuditKey | null> | undefined;
  const providers = new Map<string, Promise<Provider>>();
  const deps: Deps = {
    io,
    env,
    cwd,
    globals,
    now: () => new Date(),
    actor: () => globals.actor ?? defaultActor(env),
    config() {
      config ??= import('../../src/config/load.js').then((m) => m.loadConfig({ flag: globals.config, env, cwd }));
      return config;
    },
    store(opts) {
      store ??= (async () => {
        const { openStore } = await import('../../src/store/open.js');
        const { chooseStore } = await import('../../src/store/discover.js');
        const { existsSync } = await import('node:fs');
        // The config file is only read for `db` when no flag or variable decides the store.
        const explicit = globals.db || env.RECON_DB || env.DATABASE_URL;
        const config = explicit ? undefined : await deps.config();
        const create = STORE_CREATORS.includes(command);
        const choice = chooseStore({
          flag: globals.db,
          env,
          configDb: config?.db,
          configPath: config?.path,
          cwd,
          create,
        });
        const isNew = choice.folder !== undefined && !existsSync(choice.folder);
        // Only init, ops record, mcp and demo create a store, whether found upward or named by
        // --db/RECON_DB/config (SPEC §5): `RECON_DB=pglite:/tmp/typo-db recon run` must not make
        // an empty store at the typo and report a green pass over it.
        // (A path through a file is left to openStore, which names it: exit 2.)
        if (isNew && !create && isDirectoryOrMissing(path.dirname(choice.folder!))) {
          const { StoreMissingError } = await import('../../src/errors.js');
          const from = { flag: '--db', env: env.RECON_DB ? 'RECON_DB' : 'DATABASE_URL', config: 'the config file' }[
            choice.source as 'flag' | 'env' | 'config'
          ];
          throw new StoreMissingError(
            `no recon store at ${choice.folder}${from ? ` (named by ${from})` : ''}; check the path, or create it with \`recon init\``,
          );
        }
        const db = await openStore(choice.url, opts).catch(async (err) => {
          const { StoreLockedError } = await import('../../src/errors.js');
          if (err instanceof StoreLockedError && choice.folder && /locked by/.test(err.message))
            throw new StoreLockedError(
              `${err.message}. If that is a long-running server (recon webhook serve, recon mcp), the embedded ` +
                'store allows one process at a time: use PostgreSQL (RECON_DB=postgres://…) for a server beside other commands',
              { cause: err },
            );
          throw err;
        });
        if (isNew && create && !io.quiet) io.err.write(`created a new recon store at ${choice.folder}\n`);
        // Which store and which account a command that changes something works on, as kubectl
        // names its context: a RECON_DB left exported in a shell must not send `run` elsewhere unseen.
        if (CHANGERS.includes(command) && !io.quiet && !globals.json)
          io.err.write(`recon: store ${db.displayUrl}${providerModes(await deps.config())}\n`);
        return db;
      })();
      return store;
    },
    auditKey() {
      auditKey ??= (async () => {
        const { resolveAuditKey } = await import('../../src/config/audit-key.js');
        // The variable alone decides without reading the config (as --db does for the store).
        const config = env.RECON_AUDIT_KEY ? undefined : await deps.config();
        return resolveAuditKey(env, config?.auditKey);
      })();
      return auditKey;
    },
    async core() {
      const db = await deps.store();
      return { db, actor: deps.actor(), now: deps.now, auditKey: await deps.auditKey() };
    },
    async coreIfStore() {
      const { StoreMissingError } = await import('../../src/errors.js');
      return deps.core().catch((err) => {
        if (err instanceof StoreMissingError) return null;
        throw err;
      });
    },
    provider(name) {
      let p = providers.get(name);
      if (!p) {
        p = (async () => {
          const { createProvider } = await import('../../src/providers/index.js');
          return createProvider(name, await deps.config(), providerDeps);
        })();
        providers.set(name, p);
      }
      return p;
    },
    async confirm(message) {
      if (globals.yes) return true;
      if (!io.canPrompt) throw new UsageError('--yes is required when not running interactively');
      const { confirm } = await import('@inquirer/prompts');
      try {
        return await confirm({ message, default: false }, { output: io.err });
      } catch (err) {
        // Ctrl-C at the prompt: inquirer's "User force closed the prompt" is an interruption, exit 130.
        if ((err as Error).name === 'ExitPromptError' || (err as Error).name === 'AbortPromptError') {
          const { CancelledError } = await import('../../src/errors.js');
          throw new CancelledError('cancelled', { cause: err });
        }
        throw err;
      }
    },
    async close() {
      for (const p of providers.values()) {
        const provider = await p.catch(() => null);
        await provider?.close?.();
      }
      if (store) {
        const db = await store.catch(() => null);
        await db?.close();
      }
    },
  };
  return deps;
}
