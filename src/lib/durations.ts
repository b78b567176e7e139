/**
 * Durations at the edges of recon (flags, config) are strings like `500ms`, `30s`, `10m`, `24h`, `7d`;
 * inside recon they are milliseconds (SPEC §6).
 */
import { UsageError } from '../errors.js';

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 } as const;
type Unit = keyof typeof UNIT_MS;
/** Largest first: the order a compound duration such as `1h30m` must be written in. */
const UNITS: readonly Unit[] = ['d', 'h', 'm', 's', 'ms'];

const EXAMPLES = 'use e.g. 500ms, 30s, 10m, 24h, 7d';
// `ms` before `m` so that `500ms` is not read as 500 minutes followed by garbage.
const SEGMENT = /(\d+)(ms|d|h|m|s)/y;

/**
 * Parses `500ms`, `30s`, `10m`, `24h`, `7d`, or a compound of them in decreasing units (`1h30m`,
 * or `1h 30m` as `formatDuration` prints it), into milliseconds.
 *
 * A unit is required: a bare `600` is refused because users mean seconds as often as milliseconds,
 * and a window off by a factor of 1000 either retries too early or never. Fractions are refused too
 * (`1.5h` → write `1h30m`), so every accepted string names a whole number of milliseconds.
 *
 * @param field the flag or config key, named in the error message (e.g. `--older-than`).
 * @throws UsageError naming the field and the accepted forms.
 */
export function parseDuration(text: string, field: string): number {
  const ms = tryParseDuration(text);
  if (ms === undefined) {
    throw new UsageError(`${field}: ${JSON.stringify(text)} is not a duration; ${EXAMPLES}`);
  }
  return ms;
}

/** Like `parseDuration`, but returns undefined instead of throwing. */
export function tryParseDuration(text: string): number | undefined {
  const s = typeof text === 'string' ? text.trim() : '';
  if (s === '') return undefined;
  let total = 0;
  let pos = 0;
  let lastUnitIndex = -1;
  while (pos < s.length) {
    // `2h 5m`: a space between segments, as formatDuration prints them.
    if (pos > 0 && s[pos] === ' ') pos++;
    SEGMENT.lastIndex = pos;
    const m = SEGMENT.exec(s);
    if (!m) return undefined;
    const unit = m[2] as Unit;
    const unitIndex = UNITS.indexOf(unit);
    // `10m5h` or `1h1h` is far more likely a typo than an intent; refuse rather than guess.
    if (unitIndex <= lastUnitIndex) return undefined;
    lastUnitIndex = unitIndex;
    total += Number(m[1]) * UNIT_MS[unit];
    pos = SEGMENT.lastIndex;
  }
  return Number.isSafeInteger(total) ? total : undefined;
}

/**
 * The one way recon shows a duration to people (ages, waits, explanations): `500ms` under a second,
 * `56s` under a minute, `13m` under an hour, then the unit and the next one down when not zero:
 * `2h 5m`, `3d 4h`. Seconds beside minutes, milliseconds beside seconds are noise to a tired
 * reader (`33s66ms`): the rest is truncated. `parseDuration` reads every form back (`2h 5m`).
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const sign = ms < 0 ? '-' : '';
  const rest = Math.round(Math.abs(ms));
  if (rest === 0) return '0s';
  if (rest < UNIT_MS.s) return `${sign}${rest}ms`;
  const s = Math.floor(rest / UNIT_MS.s);
  if (s < 60) return `${sign}${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${sign}${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${sign}${h}h${m % 60 ? ` ${m % 60}m` : ''}`;
  const d = Math.floor(h / 24);
  return `${sign}${d}d${h % 24 ? ` ${h % 24}h` : ''}`;
}

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const ISO_DATETIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?$/i;

/**
 * `--since`-style values: a duration means "that long before `now`"; otherwise an ISO date
 * (`2024-05-01`, midnight UTC) or datetime (`2024-05-01T12:00:00Z`, `2024-05-01T14:00+02:00`).
 * A datetime without an offset is taken as UTC, as recon prints its times, so the same command
 * selects the same rows on every host whatever its TZ.
 *
 * @throws UsageError naming the field and the accepted forms.
 */
export function parseSinceOrDate(text: string, field: string, now: Date): Date {
  const ms = tryParseDuration(text);
  if (ms !== undefined) return new Date(now.getTime() - ms);
  const date = parseIsoDate(typeof text === 'string' ? text.trim() : '');
  if (date) return date;
  const fix = 'use e.g. 24h, 7d, 2024-05-01 or 2024-05-01T12:00:00Z';
  throw new UsageError(`${field}: ${JSON.stringify(text)} is not a duration or a date; ${fix}`);
}

function parseIsoDate(s: string): Date | undefined {
  const d = ISO_DATE.exec(s);
  const t = d ? undefined : ISO_DATETIME.exec(s);
  const m = d ?? t;
  if (!m) return undefined;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const [hour, minute, second] = t ? [Number(t[4]), Number(t[5]), Number(t[6] ?? 0)] : [0, 0, 0];
  const millis = t?.[7] ? Math.round(Number(t[7]) * 1000) : 0;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, millis);
  // Date.UTC rolls 2024-02-30 over to March 1st; a date that does not survive the round trip is a typo.
  const check = new Date(utc);
  if (
    check.getUTCFullYear() !== year ||
    check.getUTCMonth() !== month - 1 ||
    check.getUTCDate() !== day ||
    check.getUTCHours() !== hour ||
    check.getUTCMinutes() !== minute ||
    check.getUTCSeconds() !== second
  ) {
    return undefined;
  }
  const offset = t?.[8];
  if (!offset || offset.toUpperCase() === 'Z') return check;
  const sign = offset.startsWith('-') ? -1 : 1;
  const [oh, om] = offset.slice(1).split(':').map(Number) as [number, number];
  if (oh > 23 || om > 59) return undefined;
  return new Date(utc - sign * (oh * 60 + om) * 60_000);
}
