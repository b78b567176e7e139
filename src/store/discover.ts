/**
 * Finding the store like git finds `.git` (SPEC §5). A cron job started in the wrong directory
 * must fail loudly (exit 6), never open a fresh empty store there and report it green.
 */
import fs from 'node:fs';
import path from 'node:path';
import { StoreMissingError } from '../errors.js';
import { resolveStoreUrl } from './open.js';

/** The folder that holds an embedded store: `.recon/db` inside it. */
const STORE_FOLDER = '.recon';

export interface StoreChoice {
  url: string;
  /** What decided the store, for messages and `recon doctor`. */
  source: 'flag' | 'env' | 'config' | 'discovered' | 'new';
  /** For a pglite store: its data folder, absolute. */
  folder?: string;
}

export interface ChooseStoreOptions {
  flag?: string;
  env: NodeJS.ProcessEnv;
  /** The config file's `db`, and the file's path (a relative `pglite:` path is relative to the file). */
  configDb?: string;
  configPath?: string | null;
  cwd: string;
  /** Only `init`, `ops record`, `mcp` and `demo` may create a new embedded store. */
  create: boolean;
}

/** The nearest `.recon/` folder in `cwd` or a parent, or null. */
function findStoreFolder(cwd: string): string | null {
  let dir = path.resolve(cwd);
  for (;;) {
    const candidate = path.join(dir, STORE_FOLDER);
    if (isDirectory(candidate)) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/**
 * --db, RECON_DB, DATABASE_URL, config `db` (a relative pglite path is taken from the config file's
 * folder, not from wherever the command runs), else the nearest `.recon/`; else a new one in `cwd`
 * when the command may create it, else StoreMissingError (exit 6).
 */
export function chooseStore(o: ChooseStoreOptions): StoreChoice {
  const explicit = o.flag || o.env.RECON_DB || o.env.DATABASE_URL;
  if (explicit)
    return withFolder({ url: resolveStoreUrl({ flag: o.flag, env: o.env }), source: o.flag ? 'flag' : 'env' });
  if (o.configDb) {
    let url = o.configDb;
    const m = /^pglite:(.+)$/.exec(url);
    if (m && !path.isAbsolute(m[1]) && o.configPath) url = `pglite:${path.resolve(path.dirname(o.configPath), m[1])}`;
    return withFolder({ url, source: 'config' });
  }
  const found = findStoreFolder(o.cwd);
  if (found) return { url: `pglite:${path.join(found, 'db')}`, source: 'discovered', folder: path.join(found, 'db') };
  const cwd = path.resolve(o.cwd);
  if (!o.create) {
    throw new StoreMissingError(`no recon store in ${cwd} or a parent; run \`recon init\` here or set RECON_DB`);
  }
  // Inside a `.recon/` folder itself, the store is that folder's: never `.recon/.recon`.
  const folder = path.basename(cwd) === STORE_FOLDER ? path.join(cwd, 'db') : path.join(cwd, STORE_FOLDER, 'db');
  return { url: `pglite:${folder}`, source: 'new', folder };
}

function withFolder(c: StoreChoice): StoreChoice {
  const m = /^pglite:(.+)$/.exec(c.url);
  return m ? { ...c, folder: path.resolve(m[1]) } : c;
}

function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}
