/**
 * Who may make a move (SPEC §3, issue 10): only a person leaves needs_review; the only way out of
 * a terminal state is → needs_review (confirmed: a duplicate; failed: a live transaction that
 * contradicts it); an approved operation whose payload no longer matches its hash, or for which a
 * live transaction was made outside recon, goes to review instead of being sent.
 */
import { describe, expect, it } from 'vitest';
import { assertTransition, canTransition } from '../../src/core/journal/states.js';
import { RefusedError } from '../../src/errors.js';

describe('the movers of SPEC §3', () => {
  it('a webhook, a lookup or a late response never takes an operation out of needs_review; a person does', () => {
    for (const to of ['confirmed', 'failed', 'cancelled'] as const) {
      expect(canTransition('needs_review', to)).toBe(false);
      expect(canTransition('needs_review', to, { by: 'system' })).toBe(false);
      expect(canTransition('needs_review', to, { by: 'person' })).toBe(true);
      expect(() => assertTransition('op_1', 'needs_review', to)).toThrow(RefusedError);
      expect(() => assertTransition('op_1', 'needs_review', to)).toThrow(/only a person/);
    }
  });

  it('a second transaction for a confirmed operation moves it to needs_review (duplicate), and nothing else leaves confirmed', () => {
    expect(canTransition('confirmed', 'needs_review', { review_reason: 'duplicate' })).toBe(true);
    expect(canTransition('confirmed', 'needs_review', { review_reason: 'mismatch' })).toBe(false);
    expect(canTransition('confirmed', 'needs_review')).toBe(false);
    expect(canTransition('confirmed', 'failed', { by: 'person' })).toBe(false);
  });

  it('a live transaction found for a failed operation is a contradiction a person must see: needs_review, duplicate or mismatch only', () => {
    expect(canTransition('failed', 'needs_review', { review_reason: 'duplicate' })).toBe(true);
    expect(canTransition('failed', 'needs_review', { review_reason: 'mismatch' })).toBe(true);
    expect(canTransition('failed', 'needs_review', { review_reason: 'stale' })).toBe(false);
    expect(canTransition('failed', 'needs_review')).toBe(false);
    expect(canTransition('failed', 'confirmed', { by: 'person' })).toBe(false);
  });

  it('an approved operation goes to review only when its payload was changed or a side effect was made outside recon', () => {
    expect(canTransition('approved', 'needs_review', { review_reason: 'payload_tampered' })).toBe(true);
    expect(canTransition('approved', 'needs_review', { review_reason: 'duplicate' })).toBe(true);
    expect(canTransition('approved', 'needs_review', { review_reason: 'mismatch' })).toBe(true);
    expect(canTransition('approved', 'needs_review', { review_reason: 'stale' })).toBe(false);
    expect(canTransition('approved', 'needs_review')).toBe(false);
  });
});
