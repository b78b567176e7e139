/**
 * `GET /v1/events` of the Stripe sandbox (docs.stripe.com/api/events/list): the events the sandbox
 * made (refund.created, refund.updated, refund.failed), newest first, with Stripe's list parameters —
 * `type` (an exact type, or a prefix ending in `*`: `refund.*`), `types` (up to 20 exact types; not
 * with `type`), `created` (an integer or `created[gt|gte|lt|lte]`), `limit` (1–100, 10 by default),
 * `starting_after` / `ending_before` (an event id). Each event is visible from the moment it is made.
 */
import type { FormObject, FormValue } from '../http.js';
import { inRange, listParams, str } from './params.js';
import { isError, missingResource, paramError, type EndpointError, type StripeEvent } from './types.js';

const EVENT_LIST_PARAMS = new Set(['created', 'ending_before', 'limit', 'starting_after', 'type', 'types']);

/** `events` in the order they were made; a page of them newest first, or Stripe's error for the parameters. */
export function listEvents(
  events: readonly StripeEvent[],
  params: FormObject,
): { data: StripeEvent[]; has_more: boolean } | EndpointError {
  const common = listParams(params, EVENT_LIST_PARAMS);
  if (isError(common)) return common;
  const { limit, range, after, before } = common;
  if (params.type !== undefined && params.types !== undefined) {
    return paramError('You may only specify one of these parameters: type, types.', 'types');
  }
  const type = str(params.type);
  if (params.type !== undefined && type === undefined) return paramError('Invalid string: type', 'type');
  const types = stringList(params.types);
  if (types === null || (types && types.length > 20)) {
    return paramError('Invalid array: types must be a list of at most 20 event types', 'types');
  }
  // Newest first: by `created`, then the later made first (several events share a second).
  const order = events.map((event, made) => ({ event, made }));
  order.sort((a, b) => b.event.created - a.event.created || b.made - a.made);
  const cursorId = after ?? before;
  const at = cursorId ? order.findIndex((x) => x.event.id === cursorId) : -1;
  if (cursorId && at < 0) {
    return { ...missingResource('event', cursorId, after ? 'starting_after' : 'ending_before'), stored: false };
  }
  const typed = (t: string) =>
    type !== undefined
      ? type.endsWith('*')
        ? t.startsWith(type.slice(0, -1))
        : t === type
      : !types?.length || types.includes(t);
  const matches = order.filter(
    (x, i) => typed(x.event.type) && inRange(x.event.created, range) && (!after || i > at) && (!before || i < at),
  );
  // ending_before: the page just newer than the cursor, still newest first.
  const page = before ? matches.slice(Math.max(0, matches.length - limit)) : matches.slice(0, limit);
  return { data: page.map((x) => structuredClone(x.event)), has_more: matches.length > limit };
}

/** `types[]` as Stripe's SDKs send it (`types[0]=…&types[1]=…`); undefined when absent, null when not a list of strings. */
function stringList(v: FormValue | undefined): string[] | undefined | null {
  if (v === undefined) return undefined;
  const list = Array.isArray(v) ? v : typeof v === 'object' ? Object.values(v) : null;
  if (list === null || !list.every((x): x is string => typeof x === 'string' && x !== '')) return null;
  return list;
}
