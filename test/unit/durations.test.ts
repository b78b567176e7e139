import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration, parseSinceOrDate, tryParseDuration } from '../../src/lib/durations.js';
import { UsageError } from '../../src/errors.js';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['10m', 600_000],
    ['24h', 86_400_000],
    ['7d', 604_800_000],
    ['0s', 0],
    ['1h30m', 5_400_000],
    ['1d4h', 100_800_000],
    ['3m12s', 192_000],
    ['1s500ms', 1_500],
    [' 10m ', 600_000],
  ])('%j is %d ms', (text, ms) => {
    expect(parseDuration(text, '--x')).toBe(ms);
  });

  it.each(['', '   ', '10', '-5m', '1.5h', '1.5x', '10 minutes', '10M', 'm', '10m5h', '1h1h', '5mss', '1e3ms', '+5m'])(
    'refuses %j with a UsageError naming the field and the fix',
    (text) => {
      let caught: unknown;
      try {
        parseDuration(text, '--older-than');
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(UsageError);
      expect((caught as UsageError).exitCode).toBe(2);
      expect((caught as Error).message).toBe(
        `--older-than: ${JSON.stringify(text)} is not a duration; use e.g. 500ms, 30s, 10m, 24h, 7d`,
      );
    },
  );

  it('refuses values beyond safe integers rather than rounding them', () => {
    expect(tryParseDuration('99999999999999999999d')).toBeUndefined();
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [500, '500ms'],
    [1_500, '1s'],
    [33_066, '33s'],
    [56_400, '56s'],
    [13 * 60_000 + 20_000, '13m'],
    [192_999, '3m'],
    [2 * 3_600_000 + 5 * 60_000, '2h 5m'],
    [7_200_000, '2h'],
    [100_800_000, '1d 4h'],
    [86_400_000 + 5 * 60_000, '1d'],
    [-192_000, '-3m'],
    [-(2 * 3_600_000 + 5 * 60_000), '-2h 5m'],
    [0.4, '0s'],
  ])('%d ms is %j', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('is the one formatter: `not found for 33s66ms` is gone (issue 26)', () => {
    expect(formatDuration(33_066)).toBe('33s');
  });

  it('round-trips through parseDuration for two-unit values', () => {
    for (const ms of [500, 1_000, 180_000, 7_500_000, 100_800_000, 604_800_000]) {
      expect(parseDuration(formatDuration(ms), 'x')).toBe(ms);
    }
  });
});

describe('parseSinceOrDate', () => {
  const now = new Date('2024-05-10T12:00:00.000Z');

  it('takes a duration as that long before now', () => {
    expect(parseSinceOrDate('24h', '--since', now).toISOString()).toBe('2024-05-09T12:00:00.000Z');
    expect(parseSinceOrDate('7d', '--since', now).toISOString()).toBe('2024-05-03T12:00:00.000Z');
  });

  it.each([
    ['2024-05-01', '2024-05-01T00:00:00.000Z'],
    ['2024-05-01T12:30', '2024-05-01T12:30:00.000Z'],
    ['2024-05-01T12:30:15Z', '2024-05-01T12:30:15.000Z'],
    ['2024-05-01T12:30:15.25Z', '2024-05-01T12:30:15.250Z'],
    ['2024-05-01T14:30:00+02:00', '2024-05-01T12:30:00.000Z'],
    ['2024-05-01T07:30:00-05:00', '2024-05-01T12:30:00.000Z'],
    ['2024-05-01 12:30:00', '2024-05-01T12:30:00.000Z'],
  ])('takes the date %j as %s (UTC when no offset)', (text, iso) => {
    expect(parseSinceOrDate(text, '--since', now).toISOString()).toBe(iso);
  });

  it.each(['yesterday', '2024-02-30', '2024-13-01', '2024-05-01T25:00', '2024-5-1', '5', '2024-05-01T12:00+25:00'])(
    'refuses %j naming the field',
    (text) => {
      expect(() => parseSinceOrDate(text, '--since', now)).toThrow(UsageError);
      expect(() => parseSinceOrDate(text, '--since', now)).toThrow(
        `--since: ${JSON.stringify(text)} is not a duration or a date; use e.g. 24h, 7d, 2024-05-01 or 2024-05-01T12:00:00Z`,
      );
    },
  );
});
