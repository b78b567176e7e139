/**
 * The pure parts of `recon stats`: nearest-rank percentiles and the Prometheus text a
 * node_exporter textfile collector reads (a malformed file makes the collector drop all of it).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AGE_BUCKETS, percentile, statsPrometheus, type Stats } from '../../src/core/report/stats.js';
import { parsePrometheus } from '../support/prometheus.js';

describe('percentile (nearest rank)', () => {
  it('is null for no values', () => {
    expect(percentile([], 50)).toBeNull();
  });

  it('picks the value at rank ceil(p/100 · n)', () => {
    const v = Array.from({ length: 100 }, (_, i) => i + 1);
    expect([percentile(v, 50), percentile(v, 90), percentile(v, 99), percentile(v, 100)]).toEqual([50, 90, 99, 100]);
    expect([percentile([7], 50), percentile([7], 99)]).toEqual([7, 7]);
    expect([percentile([1, 2], 50), percentile([1, 2], 51)]).toEqual([1, 2]);
    expect([
      percentile([10, 20, 30, 40], 0),
      percentile([10, 20, 30, 40], 25),
      percentile([10, 20, 30, 40], 26),
    ]).toEqual([10, 10, 20]);
  });

  it('returns a member such that at least p% of the values are at or below it, and fewer than p% strictly below', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 1, max: 100 }),
        (raw, p) => {
          const sorted = [...raw].sort((a, b) => a - b);
          const q = percentile(sorted, p)!;
          expect(sorted).toContain(q);
          expect(sorted.filter((x) => x <= q).length / sorted.length).toBeGreaterThanOrEqual(p / 100);
          expect(sorted.filter((x) => x < q).length / sorted.length).toBeLessThan(p / 100);
        },
      ),
    );
  });
});

function stats(over: Partial<Stats> = {}): Stats {
  return {
    since: null,
    unresolved: [
      { state: 'outcome_unknown', age_bucket: '<10m', count: 3 },
      { state: 'needs_review', age_bucket: '>3d', count: 1 },
    ],
    unresolved_total: 4,
    by_state: { confirmed: 10, outcome_unknown: 3, needs_review: 1 },
    duplicate_actions: 1,
    ledger_duplicate_groups: 2,
    time_to_reconciliation_seconds: { count: 10, p50: 1.5, p90: 30, p99: 3600.25 },
    attempts_per_operation: { operations: 14, mean: 15 / 14, max: 2, histogram: { '1': 13, '2': 1 } },
    escalations: 2,
    ...over,
  };
}

describe('statsPrometheus', () => {
  it('is valid exposition text: HELP and TYPE before each family, samples that parse', () => {
    const families = parsePrometheus(statsPrometheus(stats()));
    expect([...families.keys()]).toEqual([
      'recon_unresolved_operations_by_age',
      'recon_operations',
      'recon_duplicate_actions',
      'recon_time_to_reconciliation_seconds',
      'recon_attempts_per_operation_mean',
      'recon_escalations',
    ]);
    expect(families.get('recon_unresolved_operations_by_age')!.samples).toEqual([
      { name: 'recon_unresolved_operations_by_age', labels: { state: 'outcome_unknown', age: '<10m' }, value: 3 },
      { name: 'recon_unresolved_operations_by_age', labels: { state: 'needs_review', age: '>3d' }, value: 1 },
    ]);
    const ttr = families.get('recon_time_to_reconciliation_seconds')!;
    expect(ttr.type).toBe('summary');
    expect(ttr.samples).toEqual([
      { name: 'recon_time_to_reconciliation_seconds', labels: { quantile: '0.5' }, value: 1.5 },
      { name: 'recon_time_to_reconciliation_seconds', labels: { quantile: '0.9' }, value: 30 },
      { name: 'recon_time_to_reconciliation_seconds', labels: { quantile: '0.99' }, value: 3600.25 },
      { name: 'recon_time_to_reconciliation_seconds_count', labels: {}, value: 10 },
    ]);
    expect(families.get('recon_attempts_per_operation_mean')!.samples[0].value).toBeCloseTo(15 / 14, 12);
    expect(families.get('recon_escalations')!.samples[0].value).toBe(2);
  });

  it('stays valid for an empty store (no quantiles, no backlog)', () => {
    const empty = stats({
      unresolved: [],
      unresolved_total: 0,
      by_state: {},
      duplicate_actions: 0,
      time_to_reconciliation_seconds: { count: 0, p50: null, p90: null, p99: null },
      attempts_per_operation: { operations: 0, mean: null, max: null, histogram: {} },
      escalations: 0,
    });
    const families = parsePrometheus(statsPrometheus(empty));
    expect(families.get('recon_unresolved_operations_by_age')!.samples).toEqual([]);
    expect(families.get('recon_time_to_reconciliation_seconds')!.samples).toEqual([
      { name: 'recon_time_to_reconciliation_seconds_count', labels: {}, value: 0 },
    ]);
  });

  it('every age bucket label is a valid label value', () => {
    const all = stats({ unresolved: AGE_BUCKETS.map(([b]) => ({ state: 'pending', age_bucket: b, count: 1 })) });
    const samples = parsePrometheus(statsPrometheus(all)).get('recon_unresolved_operations_by_age')!.samples;
    expect(samples.map((s) => s.labels.age)).toEqual(AGE_BUCKETS.map(([b]) => b));
  });
});

describe('the Prometheus reader used by these tests', () => {
  it('rejects what a scraper would reject', () => {
    expect(() => parsePrometheus('x 1\n')).toThrow(/no TYPE/);
    expect(() => parsePrometheus('# HELP x h\n# TYPE x gauge\nx one\n')).toThrow(/bad value/);
    expect(() => parsePrometheus('# HELP x h\n# TYPE x gauge\nx{a="1} 1\n')).toThrow(/label/);
    expect(() => parsePrometheus('# HELP x h\n# TYPE x gauge\nx 1')).toThrow(/newline/);
    expect(() => parsePrometheus('# HELP x h\n# TYPE x gauge\nx 1\nx 2\n')).toThrow(/duplicate/);
    expect(() => parsePrometheus('# HELP x h\n# TYPE x summary\nx 1\n')).toThrow(/quantile/);
  });
});
