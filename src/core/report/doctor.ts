/**
 * `recon doctor`: is this machine ready to reconcile? Each check says what it found and, when it
 * fails, what to fix. Read-only everywhere: no migration, no provider write.
 */
import type { LoadedConfig, ProviderConfig } from '../../config/types.js';
import { exitCodeOf, StoreMissingError, type ExitCode } from '../../errors.js';
import type { Db } from '../../store/db.js';

export interface Check {
  name: string;
  ok: boolean;
  /** A warning: not a failure, but worth knowing. */
  warn?: boolean;
  detail: string;
  fix?: string;
  /** The exit code a failure of this check stands for (SPEC §7). */
  exit_code?: ExitCode;
}

/** HTTP dates have one-second resolution; webhook signatures allow 5 minutes, the rule's windows minutes. */
const MAX_SKEW_MS = 30_000;

export interface DoctorDeps {
  env: NodeJS.ProcessEnv;
  cwd: string;
  configFlag?: string;
  dbFlag?: string;
  now: () => Date;
  fetch?: typeof fetch;
}

export async function runDoctor(d: DoctorDeps): Promise<Check[]> {
  const checks: Check[] = [];
  const { loadConfig, configLocation } = await import('../../config/load.js');
  let config: LoadedConfig | null = null;
  const where = configLocation({ flag: d.configFlag, env: d.env, cwd: d.cwd });
  try {
    config = await loadConfig({ flag: d.configFlag, env: d.env, cwd: d.cwd });
    checks.push({
      name: 'config',
      ok: true,
      detail: `${where ? `${where} parsed` : 'no config file; providers from the environment'}; ${providerList(config)}`,
    });
    for (const [name, why] of Object.entries(config.unavailable ?? {}))
      checks.push({
        name: `provider ${name}: secrets`,
        ok: false,
        detail: why,
        fix: 'set the variable in the environment of recon',
        exit_code: 2,
      });
  } catch (err) {
    checks.push({
      name: 'config',
      ok: false,
      detail: (err as Error).message,
      fix: 'fix the file (recon init writes a commented example)',
      exit_code: 2,
    });
  }
  checks.push(await storeCheck(d, config));
  for (const p of Object.values(config?.providers ?? {})) checks.push(...(await providerChecks(p, d)));
  if (config && Object.keys(config.providers).length === 0 && !config.unavailable)
    checks.push({
      name: 'providers',
      ok: false,
      warn: true,
      detail: 'no provider configured',
      fix: 'add one to the config file, or set STRIPE_API_KEY',
    });
  return checks;
}

/** What the config line says of the providers, naming those a later check fails (never "none" above a FAIL). */
function providerList(config: LoadedConfig): string {
  const usable = Object.keys(config.providers);
  const unavailable = Object.keys(config.unavailable ?? {});
  if (usable.length === 0 && unavailable.length === 0) return 'providers: none';
  const parts = [...usable, ...unavailable.map((n) => `${n} (not usable: see below)`)];
  return `providers: ${parts.join(', ')}`;
}

async function storeCheck(d: DoctorDeps, config: LoadedConfig | null): Promise<Check> {
  const { chooseStore } = await import('../../store/discover.js');
  const { openStore } = await import('../../store/open.js');
  const { schemaStatus } = await import('../../store/migrate.js');
  let db: Db | undefined;
  try {
    const explicit = d.dbFlag || d.env.RECON_DB || d.env.DATABASE_URL;
    const choice = chooseStore({
      flag: d.dbFlag,
      env: d.env,
      configDb: explicit ? undefined : config?.db,
      configPath: config?.path,
      cwd: d.cwd,
      create: false,
    });
    if (choice.folder) {
      const { existsSync } = await import('node:fs');
      if (!existsSync(choice.folder))
        return {
          name: 'store',
          ok: false,
          detail: `no store at ${choice.folder}`,
          fix: 'run `recon init` there, or set RECON_DB',
          exit_code: 6,
        };
    }
    db = await openStore(choice.url, { autoMigrate: false, requireCurrent: false });
    const s = await schemaStatus(db);
    const lock = choice.folder ? '; embedded: this process could take its lock (no other recon holds it)' : '';
    if (s.pending.length)
      return {
        name: 'store',
        ok: false,
        detail: `${db.displayUrl}: schema version ${s.version}, this recon needs ${s.latest}`,
        fix: 'run `recon db migrate`',
        exit_code: 6,
      };
    return {
      name: 'store',
      ok: true,
      detail: `${db.displayUrl} (${choice.source}): schema version ${s.version} of ${s.latest}${lock}`,
    };
  } catch (err) {
    const code = exitCodeOf(err);
    return {
      name: 'store',
      ok: false,
      detail: (err as Error).message,
      fix: /locked by/.test((err as Error).message)
        ? 'wait for that process, or use PostgreSQL (RECON_DB=postgres://…) for several processes'
        : err instanceof StoreMissingError
          ? 'run `recon init` in the folder you work from, or set RECON_DB'
          : 'check RECON_DB / --db / the config `db`',
      exit_code: code,
    };
  } finally {
    await db?.close();
  }
}

async function providerChecks(p: ProviderConfig, d: DoctorDeps): Promise<Check[]> {
  const out: Check[] = [];
  const f = d.fetch ?? fetch;
  const caps = p.capabilities;
  const limits = `rate limit ${caps.rateLimit}/s, concurrency ${caps.concurrency}`;
  let url: string | null;
  let headers: Record<string, string>;
  if (p.type === 'stripe') {
    // A read-only call: the newest refund (GET /v1/refunds?limit=1).
    url = `${(p.apiBase ?? 'https://api.stripe.com').replace(/\/$/, '')}/v1/refunds?limit=1`;
    headers = { authorization: `Bearer ${p.apiKey}` };
    out.push(
      p.webhookSecret
        ? { name: `provider ${p.name}: webhook secret`, ok: true, detail: 'set' }
        : {
            name: `provider ${p.name}: webhook secret`,
            ok: false,
            warn: true,
            detail: 'not set: `recon webhook serve` refuses to start and `webhook ingest` cannot verify events',
            fix: `set providers.${p.name}.webhookSecret (e.g. "\${STRIPE_WEBHOOK_SECRET}")`,
          },
    );
  } else if (p.type === 'http') {
    url = p.baseUrl;
    headers = p.headers;
  } else {
    out.push({
      name: `provider ${p.name}`,
      ok: true,
      detail: `module ${p.module}: not checked (no generic read-only call); ${limits}`,
    });
    return out;
  }
  const started = d.now().getTime();
  try {
    const res = await f(url, { method: 'GET', headers, signal: AbortSignal.timeout(10_000) });
    const ended = d.now().getTime();
    await res.body?.cancel();
    const date = res.headers.get('date');
    const skew = date ? Date.parse(date) - (started + ended) / 2 : NaN;
    const skewed = Number.isFinite(skew) && Math.abs(skew) > MAX_SKEW_MS;
    // A skew past the limit is the clock check's FAIL below, never also part of an ok line.
    const skewText = !Number.isFinite(skew)
      ? 'clock skew unknown (no Date header)'
      : skewed
        ? 'clock: see below'
        : `clock skew ${Math.round(skew / 1000)}s`;
    if (p.type === 'stripe' && (res.status === 401 || res.status === 403))
      // A configuration error, not an outage (SPEC §4 step 6): exit 2, as `run` and `lookup` say it.
      out.push({
        name: `provider ${p.name}`,
        ok: false,
        detail: `${url}: the provider refused the key for ${p.name} (${res.status})`,
        fix: 'check STRIPE_API_KEY (providers.' + p.name + '.apiKey)',
        exit_code: 2,
      });
    else if (res.status === 429)
      out.push({
        name: `provider ${p.name}`,
        ok: false,
        warn: true,
        detail: `${url}: rate limited right now (429); ${limits}`,
        fix: 'lower providers.' + p.name + '.rateLimit',
      });
    else if (res.status >= 500 || (p.type === 'stripe' && res.status >= 400))
      out.push({ name: `provider ${p.name}`, ok: false, detail: `${url}: HTTP ${res.status}`, exit_code: 5 });
    else
      out.push({
        name: `provider ${p.name}`,
        ok: true,
        detail: `${p.type === 'stripe' ? 'key valid, ' : ''}reachable (HTTP ${res.status}); ${limits}; ${skewText}`,
      });
    if (skewed)
      // A machine set up wrong, as a bad config is (exit 2); exit 1 stays for an unexpected error.
      out.push({
        name: `provider ${p.name}: clock`,
        ok: false,
        detail: `this machine's clock is ${Math.round(skew / 1000)}s off the provider's (more than ${MAX_SKEW_MS / 1000}s)`,
        fix: 'sync the clock (NTP): the rule and webhook signatures depend on it',
        exit_code: 2,
      });
  } catch (err) {
    out.push({
      name: `provider ${p.name}`,
      ok: false,
      detail: `${url}: unreachable (${(err as Error).message})`,
      fix: 'check apiBase/baseUrl and the network',
      exit_code: 5,
    });
  }
  return out;
}
