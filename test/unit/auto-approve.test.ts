/**
 * The `autoApprove` policy (SPEC §9): agents never approve; a provider's policy approves small
 * actions when an agent proposes them, and anything it cannot vouch for waits for a person.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { approvalByPolicy, POLICY_APPROVAL } from '../../src/core/intake/approve.js';
import { UsageError } from '../../src/errors.js';

function stripe(autoApprove: unknown) {
  return parseConfig(
    JSON.stringify({ providers: { stripe: { type: 'stripe', apiKey: 'sk_test_x1234', autoApprove } } }),
    { path: '/x/recon.config.json', env: {} },
  ).providers['stripe'];
}

describe('autoApprove in the config', () => {
  it('reads {maxAmount, currencies}, currencies lower-cased; absent means none', () => {
    expect(stripe({ maxAmount: 5000, currencies: ['USD', 'eur'] }).autoApprove).toEqual({
      maxAmount: 5000,
      currencies: ['usd', 'eur'],
    });
    expect(stripe(undefined).autoApprove).toBeNull();
  });

  it.each([
    [{ currencies: ['usd'] }, /autoApprove\.maxAmount: required, a non-negative integer in minor units/],
    [{ maxAmount: 12.5, currencies: ['usd'] }, /autoApprove\.maxAmount/],
    [{ maxAmount: 5000 }, /autoApprove\.currencies: required, a list of ISO 4217 codes/],
    [{ maxAmount: 5000, currencies: ['dollars'] }, /autoApprove\.currencies/],
    [{ maxAmount: 5000, currencies: ['usd'], max: 1 }, /autoApprove\.max: unknown key/],
  ])('%j is refused naming the key', (policy, message) => {
    expect(() => stripe(policy)).toThrow(UsageError);
    expect(() => stripe(policy)).toThrow(message);
  });
});

describe('approvalByPolicy', () => {
  const policy = { maxAmount: 5000, currencies: ['usd'] };
  it('approves at or under maxAmount in a listed currency, with the reference policy:autoApprove', () => {
    expect(approvalByPolicy(policy, { amount: 5000, currency: 'usd' })).toBe(POLICY_APPROVAL);
    expect(POLICY_APPROVAL).toBe('policy:autoApprove');
  });
  it.each([
    [{ amount: 5001, currency: 'usd' }],
    [{ amount: 100, currency: 'eur' }],
    [{ amount: null, currency: 'usd' }],
    [{ amount: 100, currency: null }],
  ])('leaves %j to a person', (op) => {
    expect(approvalByPolicy(policy, op)).toBeNull();
  });
  it('approves nothing without a policy', () => {
    expect(approvalByPolicy(null, { amount: 1, currency: 'usd' })).toBeNull();
  });
});
