import { formatDuration } from '../../src/lib/durations.js';

/**
 * How values are shown to people (SPEC §7): amounts in major units with their currency, durations
 * by src/lib/durations.ts's formatDuration (the one formatter). JSON output never goes through here: it keeps minor units and ISO times.
 */

export { formatAmount } from '../../src/lib/money.js';

/** A time for people: `2026-12-03 08:27:12 UTC` (UTC, as recon prints every time). */
export function formatTime(d: Date | string | null | undefined): string {
  if (!d) return '';
  const date = typeof d === 'string' ? new Date(d) : d;
  if (Number.isNaN(date.getTime())) return '';
  return date
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');
}

/**
 * A wait says when a retry may be allowed. The uncertainty window counts from the first `not_found`
 * of the current streak (SPEC §4), not from the attempt: a lookup long after the attempt still waits.
 */
export function waitingLine(retryAt: string, now: Date): string {
  return `a retry may be allowed from ${formatTime(retryAt)} (in ${formatDuration(Date.parse(retryAt) - now.getTime())}) if the provider still shows nothing`;
}
