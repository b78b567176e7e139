/**
 * A dictionary for keys that come from outside (operation ids, provider names, metadata keys, JSON
 * members): an object without a prototype, so a key such as `__proto__` is stored as a key rather
 * than replacing the prototype (and silently vanishing), and `constructor` or `hasOwnProperty` read
 * as absent until set.
 */
export function dict<T>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}

/** A JSON object (not null, not an array): what a record, a payload or an answer must be. */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
