/**
 * The lookup's label and the `unavailable` lookup have one home each (issue 25):
 * src/core/found/lookup-result.ts `lookupResultOf` and `unavailableLookup`, used by the Stripe
 * adapter (its own lookups and the ledger scan), the http adapter and safeLookup.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { lookupResultOf, unavailableLookup } from '../../src/core/found/lookup-result.js';
import type { ProviderTxn } from '../../src/types.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const t = (state: ProviderTxn['state']): ProviderTxn => ({
  provider_id: `re_${state}`,
  status: state,
  state,
  amount: 100,
  currency: 'usd',
  operation_id: 'op_1',
  client_reference: null,
  created: null,
});

function sources(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

describe('the lookup result: one label, one unavailable', () => {
  it.each([
    { matches: [], candidates: [], label: 'not_found' },
    { matches: [], candidates: [t('confirmed')], label: 'ambiguous' },
    { matches: [t('pending')], candidates: [], label: 'pending' },
    { matches: [t('pending'), t('confirmed')], candidates: [t('confirmed')], label: 'found' },
    { matches: [t('failed')], candidates: [], label: 'found' },
  ])('$label', ({ matches, candidates, label }) => {
    expect(lookupResultOf(matches, candidates)).toBe(label);
  });

  it('an unavailable lookup carries no transactions, its error, and a Retry-After only when there is one', () => {
    expect(unavailableLookup('timeout')).toEqual({
      result: 'unavailable',
      matches: [],
      candidates: [],
      error: 'timeout',
    });
    expect(unavailableLookup('429', { retry_after_ms: 0, note: 'listed' })).toEqual({
      result: 'unavailable',
      matches: [],
      candidates: [],
      error: '429',
      note: 'listed',
    });
    expect(unavailableLookup('429', { retry_after_ms: 2000 }).retry_after_ms).toBe(2000);
  });

  it('no adapter or core module builds either on its own', () => {
    const spelled = (pattern: RegExp) =>
      [...sources('src'), ...sources('commands')]
        .filter((f) => pattern.test(fs.readFileSync(path.join(ROOT, f), 'utf8')))
        .sort();
    const home = [path.join('src', 'core', 'found', 'lookup-result.ts')];
    expect(spelled(/result:\s*'unavailable'/)).toEqual(home);
    expect(spelled(/every\(\(\w+\)\s*=>\s*\w+\.state\s*===\s*'pending'\)/)).toEqual(home);
  });
});
