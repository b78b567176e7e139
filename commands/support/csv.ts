/**
 * The one CSV writer of recon (`ops list --csv`, `audit duplicates --csv`). Auditors open these
 * files in spreadsheets, and cells such as `client_reference` come from provider metadata anyone
 * with an API key could set: a text cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage
 * return would be read as a formula (`=HYPERLINK(…)`), so it is prefixed with a single quote, as
 * OWASP's "CSV injection" advice says. A number is written as it is (an amount is never a formula).
 * Then a cell holding a comma, a quote or a line break is quoted, quotes doubled (RFC 4180).
 */

/** A text that a spreadsheet would evaluate. */
const FORMULA_START = /^[=+\-@\t\r]/;

export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'number' || typeof value === 'bigint' ? String(value) : textOf(value);
  if (typeof value !== 'number' && typeof value !== 'bigint' && FORMULA_START.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvRow(values: readonly unknown[]): string {
  return values.map(csvCell).join(',');
}

function textOf(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  return String(value);
}
