/** Quotes a word for a POSIX shell only when it needs it (ids are usually safe as they are). */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9._:@/=+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
