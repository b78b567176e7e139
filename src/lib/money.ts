/**
 * Amounts as people and models read them (SPEC §7, §9): major units with the currency, the
 * currency's own exponent ("25.00 USD", "1,000 JPY", "1.234 KWD"). JSON fields never go through
 * here: they keep minor units.
 */

let currencies: Set<string> | null = null;
/** ISO 4217 codes known to this Node's ICU (no dependency needed). */
export function isCurrency(code: string): boolean {
  currencies ??= new Set(Intl.supportedValuesOf('currency').map((c) => c.toLowerCase()));
  return currencies.has(code.toLowerCase());
}

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

/** `2599, usd` → `25.99`; `1000, jpy` → `1,000`: major units in the currency's exponent; null for a code Intl does not know. */
export function formatMajor(amount: number, currency: string): string | null {
  const digits = exponent(currency);
  if (digits === null) return null;
  return new Intl.NumberFormat('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }).format(
    amount / 10 ** digits,
  );
}

/** `2599, usd` → `25.99 USD`; `1000, jpy` → `1,000 JPY`; no amount → ''. */
export function formatAmount(amount: number | null | undefined, currency: string | null | undefined): string {
  if (amount === null || amount === undefined) return '';
  if (!currency) return String(amount);
  const major = formatMajor(amount, currency);
  if (major === null) return `${amount} ${currency.toUpperCase()} (minor units)`;
  return `${major} ${currency.toUpperCase()}`;
}
