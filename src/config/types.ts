/**
 * The validated shape of recon's configuration (SPEC §6). Everything here has passed validation:
 * durations are milliseconds, `${ENV}` references are substituted, defaults are applied.
 */
import type { ProviderCapabilities } from '../types.js';

export const PROVIDER_TYPES = ['stripe', 'http', 'module'] as const;
export type ProviderType = (typeof PROVIDER_TYPES)[number];

/**
 * `autoApprove`: operations at or under `maxAmount` (minor units) in one of `currencies` are approved
 * when an agent proposes them (`recon mcp`), with approval reference `policy:autoApprove`. Anything
 * else waits for a person (`recon ops approve`). Absent: every agent proposal waits for a person.
 */
export interface AutoApprovePolicy {
  maxAmount: number;
  /** Lower-case ISO 4217 codes. */
  currencies: string[];
}

interface BaseProviderConfig {
  /** The key under `providers`, e.g. `stripe`, `warehouse`. */
  name: string;
  /** Every capability with its default applied (see ProviderCapabilities for the defaults). */
  capabilities: ProviderCapabilities;
  /** Default null: no action is approved without a person. */
  autoApprove?: AutoApprovePolicy | null;
}

export interface StripeProviderConfig extends BaseProviderConfig {
  type: 'stripe';
  apiKey: string;
  /** e.g. `https://api.stripe.com` (the SDK's default when null) or a sandbox's `http://127.0.0.1:PORT`. */
  apiBase: string | null;
  /** `whsec_…`; null when webhooks are not verified for this provider. */
  webhookSecret: string | null;
}

export interface HttpRequestMapping {
  method: string;
  /** Path relative to baseUrl; `{name}` placeholders are filled from the operation, URL-encoded. */
  path: string;
}

interface HttpLookupMapping extends HttpRequestMapping {
  /** Dotted path of the array in the response (`data`); absent when the response is one object. */
  list: string | null;
}

interface HttpListMapping extends HttpRequestMapping {
  /** Dotted path of the array in each page. Default `data`. */
  list: string;
  /** Dotted path of the "more pages" flag. Default `has_more`. */
  hasMore: string;
  /** Query parameter that takes the last item's id to fetch the next page. Default `starting_after`. */
  cursorParam: string;
}

/** Dotted paths into a provider object. */
export interface HttpFieldMapping {
  id: string;
  status: string;
  idempotencyKey: string | null;
  clientReference: string | null;
  operationId: string | null;
  amount: string | null;
  currency: string | null;
  created: string | null;
}

/**
 * How an "idempotency key reused with other parameters" answer looks. Default follows the IETF
 * idempotency-key draft: 422 (or 400) whose body mentions idempotency. 409 is deliberately not
 * here: the draft and Stripe both use it for "a request with this key is still in flight".
 */
interface HttpConflictMapping {
  statuses: number[];
  /** Case-insensitive substring the response body must contain; null = the status alone decides. */
  bodyContains: string | null;
}

export interface HttpProviderConfig extends BaseProviderConfig {
  type: 'http';
  baseUrl: string;
  headers: Record<string, string>;
  idempotencyHeader: string;
  submit: HttpRequestMapping;
  lookup: HttpLookupMapping;
  get: HttpRequestMapping;
  list: HttpListMapping | null;
  fields: HttpFieldMapping;
  status: { confirmed: string[]; pending: string[]; failed: string[] };
  conflict: HttpConflictMapping;
}

export interface ModuleProviderConfig extends BaseProviderConfig {
  type: 'module';
  /** Absolute path, resolved against the config file's folder. */
  module: string;
  /** As written in the config, for error messages (`./providers/calendar.js`). */
  moduleSpec: string;
  /** Free-form settings handed to the module's factory. */
  options: Record<string, unknown>;
  /** Only the capabilities written in the config: they override what the module declares. */
  capabilityOverrides: Partial<ProviderCapabilities>;
  /** What vouches for the module file beyond its ownership (src/config/trust.ts); none when absent. */
  trust?: TrustList;
}

/** The `"trust"` list of the user's own config: absolute paths of files or folders vouched for. */
export interface TrustList {
  entries: string[];
  /** The user's own config file, named in messages as where to add an entry. */
  file: string | null;
}

export type ProviderConfig = StripeProviderConfig | HttpProviderConfig | ModuleProviderConfig;

/** `auditKey` (SPEC §5 "Keyed chain"): a file holding the audit key (absolute path), or a command that prints it. */
export type AuditKeySource = { file: string } | { command: string[] };

export interface LoadedConfig {
  /** The config file read, or null when recon runs from the environment alone. */
  path: string | null;
  /** The config file's `db`, when set (lowest precedence, SPEC §5). */
  db?: string;
  providers: Record<string, ProviderConfig>;
  /** Providers configured but not usable here (an unset `${VAR}`): name → the error to raise when one is used. */
  unavailable?: Record<string, string>;
  /** Where the audit key comes from; RECON_AUDIT_KEY takes precedence. */
  auditKey?: AuditKeySource;
}
