import { describe, expect, it } from 'vitest';
import { formatAmount } from '../../commands/support/format.js';
import { formatDuration } from '../../src/lib/durations.js';
import { fitColumns, wrapText } from '../../commands/support/style.js';

describe('formatAmount', () => {
  it('shows major units with the currency, as Intl knows its exponent', () => {
    expect(formatAmount(2599, 'usd')).toBe('25.99 USD');
    expect(formatAmount(1000, 'jpy')).toBe('1,000 JPY');
    expect(formatAmount(123456, 'eur')).toBe('1,234.56 EUR');
    expect(formatAmount(1234, 'kwd')).toBe('1.234 KWD');
    expect(formatAmount(null, 'usd')).toBe('');
  });
});

describe('formatDuration, the one formatter', () => {
  it('56s, 13m, 2h 5m, 3d 4h', () => {
    expect(formatDuration(56_400)).toBe('56s');
    expect(formatDuration(13 * 60_000 + 20_000)).toBe('13m');
    expect(formatDuration(2 * 3_600_000 + 5 * 60_000)).toBe('2h 5m');
    expect(formatDuration(2 * 3_600_000)).toBe('2h');
    expect(formatDuration(3 * 86_400_000 + 4 * 3_600_000)).toBe('3d 4h');
  });
});

describe('table layout', () => {
  const atom = (natural: number, headWord = 2) => ({ natural, headWord, cells: natural, text: false });
  const text = (natural: number) => ({ natural, headWord: 3, cells: natural, text: true });

  it('wraps free text first and never narrows an atom below its widest cell', () => {
    // 3 columns: 10 of borders; 50 left for 10 + 20 + 40.
    expect(fitColumns([atom(10), atom(20), text(40)], 60)).toEqual([10, 20, 20]);
  });

  it('gives up the grid (null: one record per block) when the atoms alone do not fit', () => {
    expect(fitColumns([atom(30), atom(30), text(40)], 60)).toBeNull();
  });

  it('wraps text at spaces by display width, breaking a word only wider than the column', () => {
    const width = (s: string) => s.length;
    expect(wrapText('no recon metadata', 9, width)).toEqual(['no recon', 'metadata']);
    expect(wrapText('re_abcdefghij', 5, width)).toEqual(['re_ab', 'cdefg', 'hij']);
  });
});
