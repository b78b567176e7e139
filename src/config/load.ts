/**
 * Loading recon's configuration (SPEC §6): discovery, `${ENV}` substitution, validation into typed
 * values with defaults, and registration of every secret for `redact()`.
 *
 * Discovery: `--config FILE`, else `RECON_CONFIG`, else the nearest `recon.config.json` in the
 * current directory or a parent (like git's `.git`), else `$XDG_CONFIG_HOME/recon/config.json`
 * (default `~/.config/recon/config.json`), else none; without a file, a provider `stripe` exists
 * when `STRIPE_API_KEY` is set.
 */
import { existsSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { UsageError } from '../errors.js';
import { readAuditKeySource } from './audit-key.js';
import { substituteEnv, type Env } from './env.js';
import { DEFAULT_CAPABILITIES, readProvider, withStripeEnvironment } from './providers.js';
import { Section } from './read.js';
import { redact, registerSecret } from './redact.js';
import { isCovered, readConfigFile } from './trust.js';
import type { LoadedConfig, ProviderConfig, StripeProviderConfig, TrustList } from './types.js';
import { dict } from '../lib/dict.js';

const DEFAULT_CONFIG_FILE = 'recon.config.json';

export interface LoadConfigOptions {
  /** `--config FILE`. */
  flag?: string;
  env: Env;
  cwd: string;
}

export async function loadConfig(options: LoadConfigOptions): Promise<LoadedConfig> {
  const found = discover(options);
  if (found === null) return fromEnvironment(options.env);
  let read: { text: string; untrusted: string | null };
  try {
    read = await readConfigFile(found.path, found.source);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(
      code === 'ENOENT'
        ? `${found.source}: config file ${found.path} does not exist; check the path or run \`recon init\``
        : `${found.source}: cannot read ${found.path} (${code ?? 'error'})`,
      { cause: err },
    );
  }
  const user = userConfigPath(options.env);
  const isUserConfig = user !== null && path.resolve(user) === found.path;
  let trust: TrustList | undefined;
  const trustList = async (): Promise<TrustList> => (trust ??= await readTrustList(user, options.env));
  if (read.untrusted !== null && !found.vouched) {
    // The user's own config cannot vouch for itself: its trust list is read only when it is trusted.
    if (isUserConfig || !isCovered((await trustList()).entries, found.path)) {
      throw new UsageError(refusal(found.path, read.untrusted, isUserConfig ? null : (user ?? null)));
    }
  }
  const display = displayPath(found.path, options.cwd);
  let loaded: LoadedConfig;
  try {
    loaded = parseConfig(read.text, { path: found.path, env: options.env, userConfig: isUserConfig });
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    // Redacted here, not only in the CLI: a message built from a substituted secret must not leak
    // through String(err) or a stack trace either.
    throw new UsageError(redact(`${display}: ${err.message}`));
  }
  for (const provider of Object.values(loaded.providers)) {
    if (provider.type === 'module') provider.trust = await trustList();
  }
  return loaded;
}

interface Found {
  path: string;
  /** What pointed at the file, for the "does not exist" message. */
  source: string;
  /** Named by --config or RECON_CONFIG: the user vouches for it, whoever owns it. */
  vouched: boolean;
}

function discover({ flag, env, cwd }: LoadConfigOptions): Found | null {
  if (flag !== undefined && flag !== '') return { path: path.resolve(cwd, flag), source: '--config', vouched: true };
  const fromEnv = env['RECON_CONFIG'];
  if (fromEnv !== undefined && fromEnv !== '')
    return { path: path.resolve(cwd, fromEnv), source: 'RECON_CONFIG', vouched: true };
  for (let dir = path.resolve(cwd); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, DEFAULT_CONFIG_FILE);
    if (existsSync(candidate)) return { path: candidate, source: DEFAULT_CONFIG_FILE, vouched: false };
    if (path.dirname(dir) === dir) break;
  }
  const user = userConfigPath(env);
  return user && existsSync(user) ? { path: path.resolve(user), source: user, vouched: false } : null;
}

/** The one-line refusal of a config file found but not trusted: the file, its owner, the fix. */
function refusal(file: string, reason: string, user: string | null): string {
  const chmod = /writable by/.test(reason) ? `run \`chmod go-w ${file}\`, or, ` : '';
  const trust = user !== null ? `, or add ${JSON.stringify(path.dirname(file))} to "trust" in ${user}` : '';
  return (
    `refusing the config file ${file}: ${reason}; a config decides what runs as you (module providers) and ` +
    `where your keys are sent. ${chmod}if you trust it, name it with --config ${file} (or RECON_CONFIG)${trust}`
  );
}

/**
 * The `"trust"` list of the user's own config, read only when the file itself is trusted (owned by
 * the user or root, not writable by group or others): a file anyone may write cannot vouch for
 * anything. A list that does not parse vouches for nothing here; loading that file as the config
 * reports the error.
 */
async function readTrustList(user: string | null, env: Env): Promise<TrustList> {
  const none: TrustList = { entries: [], file: user };
  if (user === null) return none;
  let raw: unknown;
  try {
    const read = await readConfigFile(user, user);
    if (read.untrusted !== null) return none;
    raw = parseJson(read.text);
  } catch {
    return none;
  }
  const list = (raw as Record<string, unknown> | null)?.['trust'];
  if (!Array.isArray(list)) return none;
  const entries: string[] = [];
  for (const item of list) {
    const entry = typeof item === 'string' ? trustEntry(item, env) : null;
    if (entry === null) continue;
    entries.push(entry);
    try {
      entries.push(realpathSync(entry));
    } catch {
      // Not there (yet): the path as written.
    }
  }
  return { entries, file: user };
}

/** An absolute path, or `~/…` from $HOME; null for anything else. */
function trustEntry(item: string, env: Env): string | null {
  const home = env['HOME'];
  const expanded = item.startsWith('~/') && home ? path.join(home, item.slice(2)) : item;
  return path.isAbsolute(expanded) ? path.resolve(expanded) : null;
}

/** `$XDG_CONFIG_HOME/recon/config.json`, default `~/.config/recon/config.json`. */
function userConfigPath(env: Env): string | null {
  const base = env['XDG_CONFIG_HOME'] || (env['HOME'] ? path.join(env['HOME'], '.config') : '');
  return base ? path.join(base, 'recon', 'config.json') : null;
}

/** Where the config would be found (for `recon doctor`), without reading it. */
export function configLocation(options: LoadConfigOptions): string | null {
  return discover(options)?.path ?? null;
}

function displayPath(file: string, cwd: string): string {
  const rel = path.relative(cwd, file);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
}

/**
 * Parses and validates config text; `path` is used to resolve module providers; `userConfig`: the
 * text is the user's own config, the one file that may hold `"trust"`. Throws UsageError.
 */
export function parseConfig(text: string, where: { path: string; env: Env; userConfig?: boolean }): LoadedConfig {
  const raw = parseJson(text);
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new UsageError('the config file must hold one JSON object such as {"providers": {...}}');
  }
  // Providers are substituted one by one: a provider whose variable is not set (no
  // STRIPE_API_KEY on the machine that only runs `recon ops list`) is kept by name and fails
  // only when it is used, with the message naming the key.
  const { providers: rawProviders, ...rest } = raw as Record<string, unknown>;
  const substituted = {
    ...(substituteEnv(rest, '', where.env) as Record<string, unknown>),
    ...(rawProviders !== undefined ? { providers: rawProviders } : {}),
  };
  const unavailable = dict<string>();
  const root = new Section(substituted, '', ['$schema', 'db', 'providers', 'auditKey', 'trust']);
  if (root.has('trust')) checkTrust(root, where);
  const auditKey = readAuditKeySource(root, path.dirname(where.path));
  const db = root.string('db', null);
  if (db !== null) registerDsnPassword(db);
  const providers = dict<ProviderConfig>();
  const entries = root.has('providers') ? root.section('providers', Object.keys(substituted['providers'] ?? {})) : null;
  for (const [name, value] of Object.entries(entries?.value ?? {})) {
    if (name.startsWith('//') || name === '$comment') continue;
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) {
      throw new UsageError(`providers.${JSON.stringify(name)}: provider names use letters, digits, '.', '_' and '-'`);
    }
    let resolved: unknown;
    try {
      resolved = substituteEnv(value, `providers.${name}`, where.env);
    } catch (err) {
      if (!(err instanceof UsageError) || !/environment variable/.test(err.message)) throw err;
      unavailable[name] = err.message;
      continue;
    }
    providers[name] = withStripeEnvironment(readProvider(name, resolved, path.dirname(where.path)), where.env);
  }
  return {
    path: where.path,
    ...(db !== null ? { db } : {}),
    providers,
    ...(Object.keys(unavailable).length ? { unavailable } : {}),
    ...(auditKey ? { auditKey } : {}),
  };
}

/** `"trust"`: absolute paths (or `~/…`), and only in the user's own config. */
function checkTrust(root: Section, where: { env: Env; userConfig?: boolean }): void {
  if (!where.userConfig) {
    throw new UsageError(
      'trust: only your own config ($XDG_CONFIG_HOME/recon/config.json, default ~/.config/recon/config.json) can vouch for files; move this list there',
    );
  }
  root.stringList('trust').forEach((item, i) => {
    if (trustEntry(item, where.env) === null) {
      throw new UsageError(`trust[${i}]: expected an absolute path (or ~/…) of a file or folder you vouch for`);
    }
  });
}

function fromEnvironment(env: Env): LoadedConfig {
  const apiKey = env['STRIPE_API_KEY'];
  if (apiKey === undefined || apiKey === '') return { path: null, providers: dict() };
  const webhookSecret = env['STRIPE_WEBHOOK_SECRET'] || null;
  registerSecret(apiKey);
  registerSecret(webhookSecret);
  const stripe: StripeProviderConfig = {
    name: 'stripe',
    type: 'stripe',
    capabilities: { ...DEFAULT_CAPABILITIES, keyRetentionMs: 24 * 3_600_000, lookupAuthoritative: true },
    apiKey,
    apiBase: env['STRIPE_API_BASE'] || null,
    webhookSecret,
  };
  return { path: null, providers: Object.assign(dict<ProviderConfig>(), { stripe }) };
}

function registerDsnPassword(dsn: string): void {
  try {
    const url = new URL(dsn);
    if (url.password) registerSecret(decodeURIComponent(url.password));
  } catch {
    // Not a URL (pglite:PATH, memory:): nothing secret in it.
  }
}

function parseJson(text: string): unknown {
  const stripped = stripComments(text);
  try {
    return JSON.parse(stripped);
  } catch (err) {
    const message = (err as Error).message;
    const position = /at position (\d+)/.exec(message);
    let where = '';
    if (position) {
      const before = stripped.slice(0, Number(position[1]));
      const line = before.split('\n').length;
      const column = before.length - before.lastIndexOf('\n');
      where = ` at line ${line}, column ${column}`;
    }
    // V8's message may quote the offending text, which could be a secret: keep only its first clause.
    const reason = message
      .replace(/ in JSON at position \d+.*$/s, '')
      .replace(/^Unexpected token.*$/s, 'unexpected token');
    throw new UsageError(`invalid JSON${where}: ${reason}; fix the syntax`);
  }
}

/**
 * `recon init` writes a commented file, so `//` and `/* *\/` comments outside strings are allowed.
 * They are blanked (newlines kept) so the line numbers in syntax errors still match the file.
 */
function stripComments(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === '/' && text[i + 1] === '/') {
      const end = text.indexOf('\n', i);
      const stop = end === -1 ? text.length : end;
      out += ' '.repeat(stop - i);
      i = stop;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      const stop = end === -1 ? text.length : end + 2;
      out += text.slice(i, stop).replace(/[^\n]/g, ' ');
      i = stop;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}
