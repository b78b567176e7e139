import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import { redact } from '../../src/config/redact.js';
import type { HttpProviderConfig, StripeProviderConfig } from '../../src/config/types.js';
import { clearSecrets } from '../../src/config/redact.js';
import { UsageError } from '../../src/errors.js';
import { createProvider } from '../../src/providers/index.js';
import { warehouseProviderConfig } from '../../src/sandbox/warehouse/provider-config.js';

const H = 3_600_000;

const made: string[] = [];
afterAll(() => {
  for (const folder of made.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function dir(): string {
  const folder = mkdtempSync(path.join(tmpdir(), 'recon-config-'));
  made.push(folder);
  return folder;
}

function writeConfig(folder: string, config: unknown, name = 'recon.config.json'): string {
  const file = path.join(folder, name);
  writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config, null, 2));
  return file;
}

/** The SPEC §6 example, verbatim except for the hosts. */
export const SPEC_EXAMPLE = {
  db: 'postgres://recon:hunter2pass@db.internal/ops',
  providers: {
    stripe: {
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
    // SPEC §6's example, as the warehouse sandbox's own mapping.
    warehouse: warehouseProviderConfig('https://warehouse.internal', '${WAREHOUSE_TOKEN}', {
      uncertaintyWindow: '10m',
    }),
    calendar: { type: 'module', module: './providers/calendar.js' },
  },
};

const ENV = {
  STRIPE_API_KEY: 'sk_test_abc123secret',
  STRIPE_WEBHOOK_SECRET: 'whsec_topsecret',
  WAREHOUSE_TOKEN: 'wh-tok-9876',
};

async function loadError(config: unknown, env: Record<string, string> = ENV): Promise<UsageError> {
  const folder = dir();
  writeConfig(folder, config);
  const err = await loadConfig({ env, cwd: folder }).then(
    () => {
      throw new Error('expected loadConfig to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UsageError);
  return err as UsageError;
}

function stripeOnly(extra: Record<string, unknown>): unknown {
  return { providers: { stripe: { type: 'stripe', apiKey: 'sk_test_x1234', ...extra } } };
}

afterEach(() => clearSecrets());

describe('discovery', () => {
  it('prefers --config over RECON_CONFIG over ./recon.config.json', async () => {
    const folder = dir();
    const local = writeConfig(folder, stripeOnly({ maxAttempts: 1 }));
    const viaEnv = writeConfig(folder, stripeOnly({ maxAttempts: 2 }), 'env.json');
    const viaFlag = writeConfig(folder, stripeOnly({ maxAttempts: 4 }), 'flag.json');
    const env = { RECON_CONFIG: 'env.json' };
    expect((await loadConfig({ flag: 'flag.json', env, cwd: folder })).path).toBe(viaFlag);
    expect((await loadConfig({ env, cwd: folder })).path).toBe(viaEnv);
    const loaded = await loadConfig({ env: {}, cwd: folder });
    expect(loaded.path).toBe(local);
    expect(loaded.providers['stripe'].capabilities.maxAttempts).toBe(1);
  });

  it('a --config file that does not exist is a usage error naming the flag', async () => {
    await expect(loadConfig({ flag: 'nope.json', env: {}, cwd: dir() })).rejects.toThrow(
      /--config: config file .*nope\.json does not exist/,
    );
  });

  it('without a file, a stripe provider exists exactly when STRIPE_API_KEY is set', async () => {
    const folder = dir();
    expect((await loadConfig({ env: {}, cwd: folder })).providers).toEqual({});
    const loaded = await loadConfig({
      env: {
        STRIPE_API_KEY: 'sk_test_fromenv1',
        STRIPE_API_BASE: 'http://127.0.0.1:12111',
        STRIPE_WEBHOOK_SECRET: 'whsec_env',
      },
      cwd: folder,
    });
    expect(loaded.path).toBeNull();
    const stripe = loaded.providers['stripe'] as StripeProviderConfig;
    expect(stripe).toMatchObject({
      type: 'stripe',
      apiKey: 'sk_test_fromenv1',
      apiBase: 'http://127.0.0.1:12111',
      webhookSecret: 'whsec_env',
    });
    expect(stripe.capabilities).toMatchObject({ keyRetentionMs: 24 * H, lookupAuthoritative: true });
  });
});

describe('the SPEC example', () => {
  it('loads into typed values with defaults applied', async () => {
    const folder = dir();
    writeConfig(folder, SPEC_EXAMPLE);
    const loaded = await loadConfig({ env: ENV, cwd: folder });
    expect(loaded.db).toBe('postgres://recon:hunter2pass@db.internal/ops');
    const stripe = loaded.providers['stripe'] as StripeProviderConfig;
    expect(stripe.apiKey).toBe(ENV.STRIPE_API_KEY);
    expect(stripe.capabilities).toEqual({
      keyRetentionMs: 24 * H,
      lookupAuthoritative: true,
      uncertaintyWindowMs: 600_000,
      maxAttempts: 3,
      escalateAfterMs: 72 * H,
      rateLimit: 25,
      concurrency: 8,
      timeoutMs: 20_000,
      leaseMs: 120_000,
    });
    const warehouse = loaded.providers['warehouse'] as HttpProviderConfig;
    expect(warehouse.headers).toEqual({ Authorization: 'Bearer wh-tok-9876' });
    expect(warehouse.get).toEqual({ method: 'GET', path: '/v1/shipments/{id}' });
    expect(warehouse.capabilities).toMatchObject({
      keyRetentionMs: 7 * 24 * H,
      lookupAuthoritative: false,
      maxAttempts: 3,
    });
    const calendar = loaded.providers['calendar'];
    expect(calendar).toMatchObject({ type: 'module', module: path.join(folder, 'providers/calendar.js') });
  });

  it('http defaults: keyRetention 24h and lookupAuthoritative false', () => {
    const { providers } = parseConfig(
      JSON.stringify({
        providers: {
          w: { ...SPEC_EXAMPLE.providers.warehouse, keyRetention: undefined, lookupAuthoritative: undefined },
        },
      }),
      { path: '/x/recon.config.json', env: ENV },
    );
    expect(providers['w'].capabilities).toMatchObject({ keyRetentionMs: 24 * H, lookupAuthoritative: false });
  });

  it('accepts // comments and "//" keys, as `recon init` writes them', () => {
    const text = '{\n  // where the store lives\n  "//": "a note",\n  "providers": { /* none yet */ }\n}\n';
    expect(parseConfig(text, { path: '/x/c.json', env: {} }).providers).toEqual({});
  });
});

describe('one-line errors naming the key and the fix', () => {
  it('a missing environment variable names the key path and the variable, when that provider is used', async () => {
    // Deferred: a machine without STRIPE_API_KEY can still list and record; only using stripe fails.
    const folder = dir();
    writeConfig(folder, SPEC_EXAMPLE);
    const loaded = await loadConfig({ env: { STRIPE_WEBHOOK_SECRET: 'whsec_x', WAREHOUSE_TOKEN: 't' }, cwd: folder });
    expect(Object.keys(loaded.providers)).not.toContain('stripe');
    expect(Object.keys(loaded.unavailable ?? {})).toEqual(['stripe']);
    const err = await createProvider('stripe', loaded).then(
      () => {
        throw new Error('expected createProvider to fail');
      },
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(UsageError);
    expect(err.message).toContain('providers.stripe.apiKey: environment variable STRIPE_API_KEY is not set');
  });

  it('an unknown provider type', async () => {
    const err = await loadError({ providers: { pay: { type: 'strpe' } } });
    expect(err.message).toMatch(/providers\.pay\.type: unknown provider type "strpe"; did you mean "stripe"\?/);
  });

  it('a bad duration', async () => {
    const err = await loadError(stripeOnly({ timeout: '20 seconds' }));
    expect(err.message).toMatch(/providers\.stripe\.timeout: "20 seconds" is not a duration; use e\.g\./);
  });

  it('a lease that does not exceed the timeout', async () => {
    const err = await loadError(stripeOnly({ timeout: '2m', lease: '2m' }));
    expect(err.message).toMatch(
      /providers\.stripe\.lease: 2m must exceed the timeout \(2m\); raise lease or lower timeout/,
    );
  });

  it('negative or fractional numbers', async () => {
    expect((await loadError(stripeOnly({ maxAttempts: -1 }))).message).toMatch(
      /providers\.stripe\.maxAttempts: expected a whole number of at least 1, got -1/,
    );
    expect((await loadError(stripeOnly({ concurrency: 2.5 }))).message).toMatch(
      /providers\.stripe\.concurrency: .* got 2\.5/,
    );
    expect((await loadError(stripeOnly({ rateLimit: 0 }))).message).toMatch(
      /providers\.stripe\.rateLimit: expected a number greater than 0/,
    );
  });

  it('an unknown key, with a suggestion', async () => {
    const err = await loadError(stripeOnly({ maxAttempt: 3 }));
    expect(err.message).toMatch(/providers\.stripe\.maxAttempt: unknown key; did you mean "maxAttempts"\?/);
    const top = await loadError({ provider: {} });
    expect(top.message).toMatch(/provider: unknown key; did you mean "providers"\?/);
  });

  it('a missing required key of an http provider', async () => {
    const { fields: _omit, ...rest } = SPEC_EXAMPLE.providers.warehouse;
    const err = await loadError({ providers: { warehouse: rest } });
    expect(err.message).toMatch(/providers\.warehouse\.fields: expected an object/);
  });

  it('JSON syntax errors name the file and the line', async () => {
    const err = await loadError('{\n  "providers": {\n    "stripe": { "type": "stripe", }\n  }\n}\n');
    expect(err.message).toMatch(/^recon\.config\.json: invalid JSON at line 3, column \d+/);
    expect(err.message.split('\n')).toHaveLength(1);
  });
});

describe('secrets', () => {
  it('redact() hides configured secrets, substituted secret variables and key-shaped strings', async () => {
    const folder = dir();
    writeConfig(folder, {
      ...SPEC_EXAMPLE,
      providers: { ...SPEC_EXAMPLE.providers, extra: { type: 'stripe', apiKey: '${MY_API_KEY}' } },
    });
    await loadConfig({ env: { ...ENV, MY_API_KEY: 'opaque-value-42' }, cwd: folder });
    const text = [
      ENV.STRIPE_API_KEY,
      ENV.STRIPE_WEBHOOK_SECRET,
      'Bearer wh-tok-9876',
      'opaque-value-42',
      'sk_live_unconfigured999',
      'whsec_other',
      'postgres://u:pa55word@h/db',
    ].join(' | ');
    const out = redact(text);
    for (const secret of [
      'abc123secret',
      'topsecret',
      'wh-tok-9876',
      'opaque-value-42',
      'unconfigured999',
      'whsec_other',
      'pa55word',
    ]) {
      expect(out).not.toContain(secret);
    }
    expect(out).toContain('postgres://u:[redacted]@h/db');
  });

  it('an API key never appears in an error, its String() or its stack', async () => {
    const key = 'sk_test_neverShowMe123';
    // The key is substituted into apiBase, which then fails validation: the message must not echo it.
    const err = await loadError(
      { providers: { stripe: { type: 'stripe', apiKey: '${STRIPE_API_KEY}', apiBase: 'x${STRIPE_API_KEY}' } } },
      {
        STRIPE_API_KEY: key,
      },
    );
    expect(err.message).toMatch(/providers\.stripe\.apiBase: not a URL/);
    for (const text of [err.message, String(err), err.stack ?? '']) expect(text).not.toContain(key);
    const unknown = await createProvider('nope', await loadConfig({ env: { STRIPE_API_KEY: key }, cwd: dir() })).catch(
      (e: Error) => e,
    );
    expect(String(unknown as Error)).toBe('UsageError: unknown provider "nope"; configured: stripe');
  });
});

describe('credentials in a provider URL', () => {
  it('an http baseUrl’s user-info becomes HTTP Basic authentication, and is a secret', () => {
    const warehouse = (baseUrl: string, headers: Record<string, string> = {}) =>
      parseConfig(JSON.stringify({ providers: { w: { ...SPEC_EXAMPLE.providers.warehouse, baseUrl, headers } } }), {
        path: '/x/recon.config.json',
        env: ENV,
      }).providers['w'] as HttpProviderConfig;
    const w = warehouse('http://svc%40corp:p%2Fw0rd_9@wh.internal:8080/api/');
    expect(w.baseUrl).toBe('http://wh.internal:8080/api');
    expect(w.headers['Authorization']).toBe(`Basic ${Buffer.from('svc@corp:p/w0rd_9').toString('base64')}`);
    expect(redact(`failed: p/w0rd_9, p%2Fw0rd_9, ${w.headers['Authorization']}`)).toBe(
      'failed: [redacted], [redacted], [redacted]',
    );
    expect(warehouse('https://tok_1234abcd@wh.internal').baseUrl).toBe('https://wh.internal');
    // An Authorization header written in the config wins.
    expect(warehouse('https://u:pw12345@wh.internal', { Authorization: 'Bearer t0ken' }).headers).toEqual({
      Authorization: 'Bearer t0ken',
    });
  });

  it('a stripe apiBase with credentials is refused without echoing them', async () => {
    const err = await loadError(stripeOnly({ apiBase: 'https://u:s3cretpw@api.stripe.com' }));
    expect(err.message).toContain('providers.stripe.apiBase: must not hold credentials');
    expect(err.message).not.toContain('s3cretpw');
  });
});

describe('createProvider', () => {
  it('names the configured providers when asked for another', async () => {
    const folder = dir();
    mkdirSync(path.join(folder, 'providers'));
    writeConfig(folder, SPEC_EXAMPLE);
    const loaded = await loadConfig({ env: ENV, cwd: folder });
    await expect(createProvider('x', loaded)).rejects.toThrow(
      'unknown provider "x"; configured: stripe, warehouse, calendar',
    );
  });
});

describe('precedence: environment over file for the provider named stripe', () => {
  it('STRIPE_API_BASE, STRIPE_API_KEY and STRIPE_WEBHOOK_SECRET win over the values `recon init` writes', async () => {
    const folder = dir();
    writeConfig(folder, {
      providers: {
        stripe: {
          type: 'stripe',
          apiKey: 'sk_test_file',
          apiBase: 'https://api.stripe.com',
          webhookSecret: 'whsec_file',
        },
        stripe_eu: { type: 'stripe', apiKey: 'sk_test_eu', apiBase: 'https://api.stripe.com' },
      },
    });
    const env = {
      STRIPE_API_BASE: 'http://127.0.0.1:12111',
      STRIPE_API_KEY: 'sk_test_sandbox',
      STRIPE_WEBHOOK_SECRET: 'whsec_sandbox',
    };
    const loaded = await loadConfig({ env, cwd: folder });
    expect(loaded.providers.stripe).toMatchObject({
      apiBase: 'http://127.0.0.1:12111',
      apiKey: 'sk_test_sandbox',
      webhookSecret: 'whsec_sandbox',
    });
    // Another Stripe provider keeps its own values (it names its variables with ${VAR}).
    expect(loaded.providers.stripe_eu).toMatchObject({ apiBase: 'https://api.stripe.com', apiKey: 'sk_test_eu' });
    // Unset or empty variables leave the file's values.
    const fromFile = await loadConfig({ env: { STRIPE_API_BASE: '' }, cwd: folder });
    expect(fromFile.providers.stripe).toMatchObject({ apiBase: 'https://api.stripe.com', apiKey: 'sk_test_file' });
  });

  it('a STRIPE_API_BASE that is not a URL is a usage error naming the variable', async () => {
    const folder = dir();
    writeConfig(folder, { providers: { stripe: { type: 'stripe', apiKey: 'sk_test_file' } } });
    await expect(loadConfig({ env: { STRIPE_API_BASE: 'localhost:12111' }, cwd: folder })).rejects.toThrow(
      /STRIPE_API_BASE: must start with https:\/\//,
    );
  });
});
