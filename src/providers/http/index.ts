/**
 * The `http` provider (SPEC §6): a declarative mapping onto a JSON service such as a warehouse,
 * through global fetch. Submit sends the payload as JSON with the operation's key in
 * `idempotencyHeader`; lookup and get read objects back through `fields` and `status`.
 */
import { ProviderUnavailableError } from '../../errors.js';
import type { HttpProviderConfig, HttpRequestMapping } from '../../config/types.js';
import type {
  ListRange,
  LookupQuery,
  LookupResult,
  Provider,
  ProviderTxn,
  SubmitRequest,
  SubmitResult,
} from '../../types.js';
import { backoffDelay, realSleep, retryAfterMs, TokenBucket, withRetries, type Sleep } from '../../lib/ratelimit.js';
import { redact } from '../../config/redact.js';
import { lookupResultOf, unavailableLookup } from '../../core/found/lookup-result.js';
import { classifyAnswer, classifyNetworkError, parseJson, summarise, type HttpAnswer } from './classify.js';
import { carriesIdentity, fillPath, getPath, operationValues, toTxn } from './mapping.js';

const MAX_RETRIES = 3;
const MAX_RETRY_AFTER_MS = 60_000;

export interface HttpProviderDeps {
  sleep?: Sleep;
  random?: () => number;
  fetch?: typeof fetch;
}

class HttpStatusError extends Error {
  constructor(readonly answer: HttpAnswer) {
    super(`HTTP ${answer.status}: ${redact(summarise(answer.text))}`);
  }
}

/**
 * What must hold before anything is sent: the submit and lookup paths can be filled from the
 * operation. A lookup path that cannot be filled would leave the operation unreconcilable for ever
 * (every lookup `unavailable`), so it is refused when recorded too.
 */
export function validateHttpRequest(config: HttpProviderConfig, req: SubmitRequest): void {
  const where = `providers.${config.name}`;
  fillPath(config.submit.path, operationValues(req), `${where}.submit.path`);
  fillPath(
    config.lookup.path,
    operationValues({ ...req, client_reference: req.client_reference ?? undefined }),
    `${where}.lookup.path`,
  );
}

export function createHttpProvider(config: HttpProviderConfig, deps: HttpProviderDeps = {}): Provider {
  const sleep = deps.sleep ?? realSleep;
  const random = deps.random ?? Math.random;
  const doFetch = deps.fetch ?? fetch;
  const bucket = new TokenBucket({ ratePerSec: config.capabilities.rateLimit, sleep });
  const where = `providers.${config.name}`;

  /** One request under the rate limit; a 429 is retried after Retry-After (it proves nothing was done). */
  async function send(
    mapping: HttpRequestMapping,
    path: string,
    init: { body?: string; key?: string } = {},
  ): Promise<HttpAnswer> {
    const headers: Record<string, string> = { Accept: 'application/json', ...config.headers };
    if (init.body !== undefined) headers['Content-Type'] = 'application/json';
    if (init.key !== undefined) headers[config.idempotencyHeader] = init.key;
    const once = async (): Promise<HttpAnswer> => {
      await bucket.take();
      const res = await doFetch(config.baseUrl + path, {
        method: mapping.method,
        headers,
        ...(init.body !== undefined ? { body: init.body } : {}),
        // Covers the body too: a server that sends headers and then stalls is a timeout as well.
        signal: AbortSignal.timeout(config.capabilities.timeoutMs),
      });
      const answer = { status: res.status, headers: res.headers, text: await res.text() };
      if (answer.status === 429) throw new HttpStatusError(answer);
      return answer;
    };
    try {
      return await withRetries(once, {
        retries: MAX_RETRIES,
        isRetryable: (err) => err instanceof HttpStatusError && retryAfterOf(err) <= MAX_RETRY_AFTER_MS,
        delayFor: (err, attempt) => {
          // Retry-After concerns the whole client: every request waits, not only the one that was refused.
          bucket.pause(retryAfterOf(err));
          return retryAfterOf(err) + backoffDelay(attempt, { baseMs: 250, maxMs: 5_000, random });
        },
        sleep,
      });
    } catch (err) {
      if (err instanceof HttpStatusError) return err.answer;
      throw err;
    }
  }

  /** Reads: any network failure or non-2xx other than 404 is provider trouble. */
  async function read(mapping: HttpRequestMapping, path: string): Promise<unknown> {
    let answer: HttpAnswer;
    try {
      answer = await send(mapping, path);
    } catch (err) {
      throw new ProviderUnavailableError(`${config.name}: ${classifyNetworkError(err).message}`, { cause: err });
    }
    if (answer.status === 404) return null;
    if (answer.status < 200 || answer.status >= 300) {
      const e = new ProviderUnavailableError(
        `${config.name}: HTTP ${answer.status} from ${mapping.method} ${path}: ${redact(summarise(answer.text))}`,
      );
      Object.assign(e, { retryAfterMs: retryAfterMs(answer.headers.get('retry-after')) });
      throw e;
    }
    const body = parseJson(answer.text);
    if (body === undefined)
      throw new ProviderUnavailableError(`${config.name}: ${mapping.method} ${path} did not return JSON`);
    return body;
  }

  return {
    name: config.name,
    type: 'http',
    capabilities: config.capabilities,

    validatePayload(req: SubmitRequest): void {
      validateHttpRequest(config, req);
    },

    async submit(req: SubmitRequest): Promise<SubmitResult> {
      // Validated when recorded and again in the attempt's claim (validatePayload): this cannot throw.
      const path = fillPath(config.submit.path, operationValues(req), `${where}.submit.path`);
      try {
        return classifyAnswer(
          await send(config.submit, path, { body: JSON.stringify(req.payload), key: req.idempotency_key }),
          config,
        );
      } catch (err) {
        return classifyNetworkError(err);
      }
    },

    async lookup(query: LookupQuery): Promise<LookupResult> {
      const path = fillPath(config.lookup.path, operationValues(query), `${where}.lookup.path`);
      let body: unknown;
      try {
        body = await read(config.lookup, path);
      } catch (err) {
        const retry = (err as { retryAfterMs?: number }).retryAfterMs;
        return unavailableLookup((err as Error).message, { retry_after_ms: retry });
      }
      const single = config.lookup.list === null;
      const items = body === null ? [] : single ? [body] : getPath(body, config.lookup.list!);
      if (!Array.isArray(items)) {
        return unavailableLookup(`${config.name}: no list at "${config.lookup.list}" in the lookup response`);
      }
      const matches: ProviderTxn[] = [];
      for (const item of items) {
        const txn = toTxn(item, config);
        if (!txn) continue;
        const identity = carriesIdentity(txn, query, config.fields);
        // A lookup that returns one object was addressed by identity already; a list must prove it per item.
        if (identity === true || (single && identity === undefined)) matches.push(txn);
      }
      return { result: lookupResultOf(matches, []), matches, candidates: [], note: `${config.lookup.method} ${path}` };
    },

    async get(providerId: string): Promise<ProviderTxn | null> {
      const path = fillPath(config.get.path, { id: providerId }, `${where}.get.path`);
      const body = await read(config.get, path);
      return body === null ? null : toTxn(body, config);
    },

    ...(config.list ? { list: (range: ListRange) => listAll(range) } : {}),
  };

  async function* listAll(range: ListRange): AsyncGenerator<ProviderTxn> {
    const list = config.list!;
    const values: Record<string, unknown> = {
      ...(range.since ? { since: Math.floor(range.since.getTime() / 1000), since_iso: range.since.toISOString() } : {}),
      ...(range.until ? { until: Math.floor(range.until.getTime() / 1000), until_iso: range.until.toISOString() } : {}),
    };
    const first = fillPath(list.path, values, `${where}.list.path`, { dropMissingQuery: true });
    let cursor: string | null = null;
    for (let page = 1; ; page++) {
      const path: string =
        cursor === null
          ? first
          : `${first}${first.includes('?') ? '&' : '?'}${list.cursorParam}=${encodeURIComponent(cursor)}`;
      const body = await read(list, path);
      const items = body === null ? [] : getPath(body, list.list);
      if (!Array.isArray(items))
        throw new ProviderUnavailableError(`${config.name}: no list at "${list.list}" in the list response`);
      range.onPage?.({ page, items: items.length });
      let last: ProviderTxn | null = null;
      for (const item of items) {
        const txn = toTxn(item, config);
        if (txn) yield (last = txn);
      }
      if (getPath(body, list.hasMore) !== true || last === null) return;
      cursor = last.provider_id;
    }
  }
}

function retryAfterOf(err: unknown): number {
  return err instanceof HttpStatusError ? (retryAfterMs(err.answer.headers.get('retry-after')) ?? 0) : 0;
}
