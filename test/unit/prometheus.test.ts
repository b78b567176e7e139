/**
 * The one Prometheus writer (src/lib/prometheus.ts), read back by the strict reference reader
 * (test/support/prometheus.ts): any label value or HELP text arrives as it was given.
 */
import { describe, expect, it } from 'vitest';
import { prometheusText } from '../../src/lib/prometheus.js';
import { parsePrometheus } from '../support/prometheus.js';

describe('prometheusText', () => {
  it('escapes backslash, double quote and newline in label values, and backslash and newline in HELP', () => {
    const provider = 'acme "eu"\\west\nsecond line';
    const help = 'Lookups per provider (C:\\path)\nsee the README.';
    const text = prometheusText([
      {
        name: 'recon_lookups',
        help,
        type: 'counter',
        samples: [
          { labels: { provider, state: 'pending' }, value: 3 },
          { labels: { provider: 'plain', state: 'pending' }, value: 1 },
        ],
      },
    ]);
    // Each sample stays on its own line: the newline in the value did not break the line.
    expect(text.split('\n').filter((l) => l.startsWith('recon_lookups'))).toHaveLength(2);
    const family = parsePrometheus(text).get('recon_lookups')!;
    expect(family.help).toBe(help);
    expect(family.samples).toEqual([
      { name: 'recon_lookups', labels: { provider, state: 'pending' }, value: 3 },
      { name: 'recon_lookups', labels: { provider: 'plain', state: 'pending' }, value: 1 },
    ]);
  });

  it('writes summary suffixes and the special values the format names', () => {
    const text = prometheusText([
      {
        name: 'recon_wait_seconds',
        help: 'Wait.',
        type: 'summary',
        samples: [
          { labels: { quantile: '0.5' }, value: Infinity },
          { labels: { quantile: '0.9' }, value: NaN },
          { suffix: '_count', value: 2 },
        ],
      },
    ]);
    const samples = parsePrometheus(text).get('recon_wait_seconds')!.samples;
    expect(samples.map((s) => [s.name, s.value])).toEqual([
      ['recon_wait_seconds', Infinity],
      ['recon_wait_seconds', NaN],
      ['recon_wait_seconds_count', 2],
    ]);
  });
});

describe('the reference reader', () => {
  it('refuses an unescaped double quote in a label value and an unknown escape in HELP', () => {
    expect(() => parsePrometheus('# HELP x h\n# TYPE x gauge\nx{a="say "hi""} 1\n')).toThrow(/line 3/);
    expect(() => parsePrometheus('# HELP x h\\q\n# TYPE x gauge\nx 1\n')).toThrow(/bad escape/);
  });
});
