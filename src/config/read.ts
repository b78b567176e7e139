/**
 * Typed readers over one JSON object of the config file. Every error names the key path and the
 * fix, in one line, so `recon` can print it as is.
 */
import { UsageError } from '../errors.js';
import { parseDuration } from '../lib/durations.js';
import { joinPath } from './env.js';
import { dict } from '../lib/dict.js';

/** JSON has no comments: keys like `"//"` or `"$comment"` are the conventional stand-in and are ignored. */
function isCommentKey(key: string): boolean {
  return key.startsWith('//') || key === '$comment';
}

export class Section {
  readonly value: Record<string, unknown>;

  constructor(
    value: unknown,
    readonly path: string,
    allowed: readonly string[],
  ) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new UsageError(`${path}: expected an object, got ${describe(value)}`);
    }
    this.value = value as Record<string, unknown>;
    for (const key of Object.keys(this.value)) {
      if (allowed.includes(key) || isCommentKey(key)) continue;
      const hint = didYouMean(key, allowed);
      throw new UsageError(
        `${this.at(key)}: unknown key${hint ? `; did you mean "${hint}"?` : `; allowed: ${allowed.join(', ')}`}`,
      );
    }
  }

  at(key: string): string {
    return joinPath(this.path, key);
  }

  has(key: string): boolean {
    return this.value[key] !== undefined;
  }

  string(key: string): string;
  string(key: string, fallback: string): string;
  string(key: string, fallback: null): string | null;
  string(key: string, fallback?: string | null): string | null {
    const v = this.value[key];
    if (v === undefined) {
      if (fallback !== undefined) return fallback;
      throw new UsageError(`${this.at(key)}: required; add it to the config file`);
    }
    if (typeof v !== 'string') throw new UsageError(`${this.at(key)}: expected a string, got ${describe(v)}`);
    if (v.trim() === '') throw new UsageError(`${this.at(key)}: must not be empty`);
    return v;
  }

  boolean(key: string, fallback: boolean): boolean {
    const v = this.value[key];
    if (v === undefined) return fallback;
    if (typeof v !== 'boolean') throw new UsageError(`${this.at(key)}: expected true or false, got ${describe(v)}`);
    return v;
  }

  duration(key: string, fallbackMs: number): number {
    const v = this.value[key];
    if (v === undefined) return fallbackMs;
    if (typeof v !== 'string') {
      throw new UsageError(`${this.at(key)}: expected a duration string such as "30s", got ${describe(v)}`);
    }
    return parseDuration(v, this.at(key));
  }

  /** A whole number ≥ 1 (attempts, concurrency). */
  positiveInteger(key: string, fallback: number): number {
    const v = this.value[key];
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
      throw new UsageError(`${this.at(key)}: expected a whole number of at least 1, got ${describe(v)}`);
    }
    return v;
  }

  /** A number > 0 (requests per second may be fractional). */
  positiveNumber(key: string, fallback: number): number {
    const v = this.value[key];
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
      throw new UsageError(`${this.at(key)}: expected a number greater than 0, got ${describe(v)}`);
    }
    return v;
  }

  section(key: string, allowed: readonly string[]): Section {
    return new Section(this.value[key], this.at(key), allowed);
  }

  optionalSection(key: string, allowed: readonly string[]): Section | null {
    return this.value[key] === undefined ? null : this.section(key, allowed);
  }

  stringMap(key: string): Record<string, string> {
    const v = this.value[key];
    if (v === undefined) return {};
    if (v === null || typeof v !== 'object' || Array.isArray(v)) {
      throw new UsageError(`${this.at(key)}: expected an object of strings, got ${describe(v)}`);
    }
    const out = dict<string>();
    for (const [k, item] of Object.entries(v)) {
      if (isCommentKey(k)) continue;
      if (typeof item !== 'string') {
        throw new UsageError(`${joinPath(this.at(key), k)}: expected a string, got ${describe(item)}`);
      }
      out[k] = item;
    }
    return out;
  }

  stringList(key: string): string[] {
    const v = this.value[key];
    if (v === undefined) return [];
    const list = typeof v === 'string' ? [v] : v;
    if (!Array.isArray(list) || list.some((item) => typeof item !== 'string')) {
      throw new UsageError(`${this.at(key)}: expected a list of strings such as ["created"], got ${describe(v)}`);
    }
    return list as string[];
  }

  numberList(key: string, fallback: number[]): number[] {
    const v = this.value[key];
    if (v === undefined) return fallback;
    if (!Array.isArray(v) || v.some((item) => !Number.isInteger(item))) {
      throw new UsageError(`${this.at(key)}: expected a list of HTTP status codes such as [422], got ${describe(v)}`);
    }
    return v as number[];
  }
}

/** Never echoes a string value: it may be a secret that was substituted from the environment. */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return 'a string';
  if (typeof v === 'number') return String(v);
  return typeof v === 'object' ? 'an object' : typeof v;
}

export function didYouMean(word: string, choices: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const choice of choices) {
    const d = choice.toLowerCase() === word.toLowerCase() ? 0 : levenshtein(word.toLowerCase(), choice.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [choice, d];
  }
  return bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : null;
}

function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length];
}
