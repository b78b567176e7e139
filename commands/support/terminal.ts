/**
 * Stored text printed for a person. A client reference, a review note, a provider's error text or
 * request id may hold control characters (rows written before validation refused them, provider
 * data): printed raw, `\x1b[2J` clears the on-call engineer's screen, `\x1b]0;…\x07` retitles the
 * terminal, `\r` overwrites a line. Every stored value shown by a human-output command goes through
 * `printable()`; `--json` needs nothing (JSON escapes control characters itself).
 */

// C0 controls, DEL, C1 controls, and the bidirectional overrides that reorder what is shown.
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** The text with every control character written as a visible escape (`\x1b`, `\n`, `\u202e`). */
export function printable(text: string | null | undefined): string {
  if (text === null || text === undefined) return '';
  return String(text).replace(UNPRINTABLE, (c) => {
    const named = NAMED[c];
    if (named) return named;
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
