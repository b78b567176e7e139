/**
 * How values are shown to people (SPEC §7): amounts in major units with their currency, durations
 * short. JSON output never goes through here: it keeps minor units and ISO times.
 */

const digitsCache = new Map<string, number>();

/** The currency's exponent (USD 2, JPY 0, KWD 3) as Intl knows it; null for a code Intl does not know. */
function exponent(currency: string): number | null {
  const code = currency.toUpperCase();
  let digits = digitsCache.get(code);
  if (digits === undefined) {
    try {
      const resolved = new Intl.NumberFormat('en-US', { style: 'currency', currency: code }).resolvedOptions()
        .maximumFractionDigits;
      if (resolved === undefined) return null;
      digits = resolved;
    } catch {
      return null;
    }
    digitsCache.set(code, digits);
  }
  return digits;
}

/** `2599, usd` → `25.99 USD`; `1000, jpy` → `1,000 JPY`; no amount → ''. */
export function formatAmount(amount: number | null | undefined, currency: string | null | undefined): string {
  if (amount === null || amount === undefined) return '';
  if (!currency) return String(amount);
  const digits = exponent(currency);
  if (digits === null) return `${amount} ${currency.toUpperCase()} (minor units)`;
  const major = new Intl.NumberFormat('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }).format(
    amount / 10 ** digits,
  );
  return `${major} ${currency.toUpperCase()}`;
}

/** `56s`, `13m`, `2h 5m`, `3d 4h`: the largest unit and the next one when it is not zero. */
export function formatAge(ms: number): string {
  if (!Number.isFinite(ms)) return '';
  const sign = ms < 0 ? '-' : '';
  const s = Math.floor(Math.abs(ms) / 1000);
  if (s < 60) return `${sign}${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${sign}${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${sign}${h}h${m % 60 ? ` ${m % 60}m` : ''}`;
  const d = Math.floor(h / 24);
  return `${sign}${d}d${h % 24 ? ` ${h % 24}h` : ''}`;
}

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
  return `a retry may be allowed from ${formatTime(retryAt)} (in ${formatAge(Date.parse(retryAt) - now.getTime())}) if the provider still shows nothing`;
}
