/** Validation of one `providers.NAME` entry into a typed ProviderConfig (SPEC §4, §6). */
import path from 'node:path';
import { UsageError } from '../errors.js';
import type { ProviderCapabilities } from '../types.js';
import { formatDuration } from '../lib/durations.js';
import { describe, didYouMean, Section } from './read.js';
import { registerSecret } from './redact.js';
import { isCurrency } from '../lib/money.js';
import {
  PROVIDER_TYPES,
  type AutoApprovePolicy,
  type HttpProviderConfig,
  type ModuleProviderConfig,
  type ProviderConfig,
  type ProviderType,
  type StripeProviderConfig,
} from './types.js';

const H = 3_600_000;

/** SPEC §4 defaults; keyRetention and lookupAuthoritative differ per type (see TYPE_DEFAULTS). */
export const DEFAULT_CAPABILITIES: ProviderCapabilities = {
  keyRetentionMs: 24 * H,
  lookupAuthoritative: false,
  uncertaintyWindowMs: 10 * 60_000,
  maxAttempts: 3,
  escalateAfterMs: 72 * H,
  rateLimit: 25,
  concurrency: 8,
  timeoutMs: 20_000,
  leaseMs: 2 * 60_000,
};

const TYPE_DEFAULTS: Record<ProviderType, Partial<ProviderCapabilities>> = {
  // Stripe keeps idempotency keys 24h; listing refunds by payment intent/charge is complete.
  stripe: { keyRetentionMs: 24 * H, lookupAuthoritative: true },
  http: {},
  module: {},
};

const CAPABILITY_KEYS = [
  'keyRetention',
  'lookupAuthoritative',
  'uncertaintyWindow',
  'maxAttempts',
  'escalateAfter',
  'rateLimit',
  'concurrency',
  'timeout',
  'lease',
] as const;

const TYPE_KEYS: Record<ProviderType, readonly string[]> = {
  stripe: ['apiKey', 'apiBase', 'webhookSecret'],
  http: ['baseUrl', 'headers', 'idempotencyHeader', 'submit', 'lookup', 'get', 'list', 'fields', 'status', 'conflict'],
  module: ['module', 'options'],
};

export function readProvider(name: string, raw: unknown, configDir: string): ProviderConfig {
  const where = `providers.${name}`;
  const typeValue = (raw as Record<string, unknown> | null)?.['type'];
  if (typeof typeValue !== 'string') {
    throw new UsageError(`${where}.type: required; one of ${PROVIDER_TYPES.join(', ')}`);
  }
  if (!(PROVIDER_TYPES as readonly string[]).includes(typeValue)) {
    const hint = didYouMean(typeValue, PROVIDER_TYPES);
    throw new UsageError(
      `${where}.type: unknown provider type ${JSON.stringify(typeValue)}; ${hint ? `did you mean "${hint}"? ` : ''}use one of ${PROVIDER_TYPES.join(', ')}`,
    );
  }
  const type = typeValue as ProviderType;
  const s = new Section(raw, where, ['type', 'autoApprove', ...CAPABILITY_KEYS, ...TYPE_KEYS[type]]);
  const capabilities = readCapabilities(s, { ...DEFAULT_CAPABILITIES, ...TYPE_DEFAULTS[type] });
  const autoApprove = readAutoApprove(s);
  if (type === 'stripe') return { ...readStripe(name, s, capabilities), autoApprove };
  if (type === 'http') return { ...readHttp(name, s, capabilities), autoApprove };
  return { ...readModule(name, s, capabilities, configDir), autoApprove };
}

/** `autoApprove: {maxAmount, currencies}`: both required, so a policy never approves more than it says. */
function readAutoApprove(s: Section): AutoApprovePolicy | null {
  const p = s.optionalSection('autoApprove', ['maxAmount', 'currencies']);
  if (!p) return null;
  const maxAmount = p.value['maxAmount'];
  if (typeof maxAmount !== 'number' || !Number.isSafeInteger(maxAmount) || maxAmount < 0) {
    throw new UsageError(
      `${p.at('maxAmount')}: required, a non-negative integer in minor units (e.g. 5000 for 50.00), got ${describe(maxAmount)}`,
    );
  }
  const currencies = p.stringList('currencies').map((c) => c.toLowerCase());
  if (currencies.length === 0 || currencies.some((c) => !/^[a-z]{3}$/.test(c) || !isCurrency(c))) {
    throw new UsageError(`${p.at('currencies')}: required, a list of ISO 4217 codes such as ["usd"]`);
  }
  return { maxAmount, currencies };
}

function readCapabilities(s: Section, d: ProviderCapabilities): ProviderCapabilities {
  const c: ProviderCapabilities = {
    keyRetentionMs: s.duration('keyRetention', d.keyRetentionMs),
    lookupAuthoritative: s.boolean('lookupAuthoritative', d.lookupAuthoritative),
    uncertaintyWindowMs: s.duration('uncertaintyWindow', d.uncertaintyWindowMs),
    maxAttempts: s.positiveInteger('maxAttempts', d.maxAttempts),
    escalateAfterMs: s.duration('escalateAfter', d.escalateAfterMs),
    rateLimit: s.positiveNumber('rateLimit', d.rateLimit),
    concurrency: s.positiveInteger('concurrency', d.concurrency),
    timeoutMs: s.duration('timeout', d.timeoutMs),
    leaseMs: s.duration('lease', d.leaseMs),
  };
  if (c.timeoutMs <= 0) throw new UsageError(`${s.at('timeout')}: must be greater than 0`);
  checkLease(s.path, c);
  return c;
}

/** A lease that can expire while the request is still running lets a second worker resubmit it. */
export function checkLease(where: string, c: ProviderCapabilities): void {
  if (c.leaseMs <= c.timeoutMs) {
    throw new UsageError(
      `${where}.lease: ${formatDuration(c.leaseMs)} must exceed the timeout (${formatDuration(c.timeoutMs)}); raise lease or lower timeout`,
    );
  }
}

function readStripe(name: string, s: Section, capabilities: ProviderCapabilities): StripeProviderConfig {
  const apiKey = s.string('apiKey');
  registerSecret(apiKey);
  const webhookSecret = s.string('webhookSecret', null);
  registerSecret(webhookSecret);
  const apiBase = s.string('apiBase', null);
  if (apiBase !== null && checkUrl(s.at('apiBase'), apiBase).authorization !== null) {
    throw new UsageError(`${s.at('apiBase')}: must not hold credentials (user:password@); the key is apiKey`);
  }
  return { name, type: 'stripe', capabilities, apiKey, apiBase, webhookSecret };
}

function readHttp(name: string, s: Section, capabilities: ProviderCapabilities): HttpProviderConfig {
  const { url: baseUrl, authorization } = checkUrl(s.at('baseUrl'), s.string('baseUrl'));
  const headers = s.stringMap('headers');
  if (authorization !== null && !Object.keys(headers).some((h) => h.toLowerCase() === 'authorization')) {
    headers['Authorization'] = authorization;
  }
  // Every header value is treated as a secret: Authorization is the common case, API-key headers the next.
  for (const value of Object.values(headers)) registerSecret(value);
  const request = (key: string, method: string) => {
    const r = s.section(key, key === 'lookup' ? ['method', 'path', 'list'] : ['method', 'path']);
    return { r, mapping: { method: r.string('method', method).toUpperCase(), path: r.string('path') } };
  };
  const submit = request('submit', 'POST').mapping;
  const lookup = request('lookup', 'GET');
  const get = request('get', 'GET').mapping;
  const listSection = s.optionalSection('list', ['method', 'path', 'list', 'hasMore', 'cursorParam']);
  const f = s.section('fields', [
    'id',
    'status',
    'idempotencyKey',
    'clientReference',
    'operationId',
    'amount',
    'currency',
    'created',
  ]);
  const st = s.section('status', ['confirmed', 'pending', 'failed']);
  const status = {
    confirmed: st.stringList('confirmed'),
    pending: st.stringList('pending'),
    failed: st.stringList('failed'),
  };
  if (status.confirmed.length === 0) {
    throw new UsageError(
      `${st.at('confirmed')}: required; list the provider statuses that mean done, e.g. ["created"]`,
    );
  }
  const conflict = s.optionalSection('conflict', ['statuses', 'bodyContains']);
  return {
    name,
    type: 'http',
    capabilities,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    headers,
    idempotencyHeader: s.string('idempotencyHeader', 'Idempotency-Key'),
    submit,
    lookup: { ...lookup.mapping, list: lookup.r.string('list', null) },
    get,
    list: listSection && {
      method: listSection.string('method', 'GET').toUpperCase(),
      path: listSection.string('path'),
      list: listSection.string('list', 'data'),
      hasMore: listSection.string('hasMore', 'has_more'),
      cursorParam: listSection.string('cursorParam', 'starting_after'),
    },
    fields: {
      id: f.string('id'),
      status: f.string('status'),
      idempotencyKey: f.string('idempotencyKey', null),
      clientReference: f.string('clientReference', null),
      operationId: f.string('operationId', null),
      amount: f.string('amount', null),
      currency: f.string('currency', null),
      created: f.string('created', null),
    },
    status,
    conflict: {
      statuses: conflict?.numberList('statuses', [400, 422]) ?? [400, 422],
      bodyContains: conflict ? conflict.string('bodyContains', null) : 'idempoten',
    },
  };
}

function readModule(
  name: string,
  s: Section,
  capabilities: ProviderCapabilities,
  configDir: string,
): ModuleProviderConfig {
  const moduleSpec = s.string('module');
  const options = s.value['options'] ?? {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new UsageError(`${s.at('options')}: expected an object, got ${describe(options)}`);
  }
  const capabilityOverrides: Partial<ProviderCapabilities> = {};
  const names: Record<(typeof CAPABILITY_KEYS)[number], keyof ProviderCapabilities> = {
    keyRetention: 'keyRetentionMs',
    lookupAuthoritative: 'lookupAuthoritative',
    uncertaintyWindow: 'uncertaintyWindowMs',
    maxAttempts: 'maxAttempts',
    escalateAfter: 'escalateAfterMs',
    rateLimit: 'rateLimit',
    concurrency: 'concurrency',
    timeout: 'timeoutMs',
    lease: 'leaseMs',
  };
  for (const [key, field] of Object.entries(names)) {
    if (s.has(key)) (capabilityOverrides as Record<string, unknown>)[field] = capabilities[field];
  }
  return {
    name,
    type: 'module',
    capabilities,
    module: path.resolve(configDir, moduleSpec),
    moduleSpec,
    options: options as Record<string, unknown>,
    capabilityOverrides,
  };
}

/**
 * A URL recon will call, and the credentials written in it: `https://user:pw@host` is a secret like
 * any other (registered for redaction), and fetch refuses a URL that carries one, so it is taken out
 * of the URL and returned as an HTTP Basic `Authorization` value.
 */
function checkUrl(where: string, value: string): { url: string; authorization: string | null } {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`${where}: not a URL; write it like https://api.example.com`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`${where}: must start with https:// (or http:// for a local sandbox)`);
  }
  if (url.username === '' && url.password === '') return { url: value, authorization: null };
  const user = decodeURIComponent(url.username);
  const password = decodeURIComponent(url.password);
  registerSecret(url.password);
  registerSecret(password);
  if (url.password === '') registerSecret(user);
  const authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  registerSecret(authorization);
  url.username = '';
  url.password = '';
  // URL adds a '/' to a bare origin; the rest of the text is kept as written.
  const bare = url.toString();
  return { url: /\/$/.test(value) || url.pathname !== '/' ? bare : bare.replace(/\/$/, ''), authorization };
}

/**
 * For the provider named `stripe`, the environment wins over the file (the order `--db` >
 * `RECON_DB` > file has for the store): `STRIPE_API_KEY`, `STRIPE_API_BASE` and
 * `STRIPE_WEBHOOK_SECRET`, where set and not empty, replace its `apiKey`, `apiBase` and
 * `webhookSecret`. So pointing recon at a sandbox takes the three lines `recon sandbox stripe`
 * prints, whatever the file says. Other providers read their variables through `${VAR}`.
 */
export function withStripeEnvironment(p: ProviderConfig, env: Record<string, string | undefined>): ProviderConfig {
  if (p.type !== 'stripe' || p.name !== 'stripe') return p;
  const apiKey = env['STRIPE_API_KEY'] || p.apiKey;
  const apiBase = env['STRIPE_API_BASE'] || p.apiBase;
  const webhookSecret = env['STRIPE_WEBHOOK_SECRET'] || p.webhookSecret;
  if (env['STRIPE_API_BASE']) checkUrl('STRIPE_API_BASE', env['STRIPE_API_BASE']);
  registerSecret(apiKey);
  registerSecret(webhookSecret);
  return { ...p, apiKey, apiBase, webhookSecret };
}
