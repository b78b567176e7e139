import { describe, expect, it } from 'vitest';
import { formatAge, formatAmount } from '../../commands/support/format.js';
import { fitWidths, wrapCell } from '../../commands/support/style.js';

describe('formatAmount', () => {
  it('shows major units with the currency, as Intl knows its exponent', () => {
    expect(formatAmount(2599, 'usd')).toBe('25.99 USD');
    expect(formatAmount(1000, 'jpy')).toBe('1,000 JPY');
    expect(formatAmount(123456, 'eur')).toBe('1,234.56 EUR');
    expect(formatAmount(1234, 'kwd')).toBe('1.234 KWD');
    expect(formatAmount(null, 'usd')).toBe('');
  });
});

describe('formatAge', () => {
  it('56s, 13m, 2h 5m, 3d 4h', () => {
    expect(formatAge(56_400)).toBe('56s');
    expect(formatAge(13 * 60_000 + 20_000)).toBe('13m');
    expect(formatAge(2 * 3_600_000 + 5 * 60_000)).toBe('2h 5m');
    expect(formatAge(2 * 3_600_000)).toBe('2h');
    expect(formatAge(3 * 86_400_000 + 4 * 3_600_000)).toBe('3d 4h');
  });
});

describe('table layout', () => {
  it('shrinks to the width, wrapping at spaces before breaking ids', () => {
    expect(fitWidths([10, 30, 20], [5, 30, 8], 60)).toEqual([10, 30, 10]);
    expect(wrapCell('no recon metadata', 9)).toEqual(['no recon', 'metadata']);
    expect(wrapCell('re_abcdefghij', 5)).toEqual(['re_ab', 'cdefg', 'hij']);
  });
});
