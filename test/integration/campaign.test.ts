/**
 * A small seed of the fault campaign (npm run campaign) inside npm test: a few tens of operations
 * submitted under faults of every sandbox kind, concurrent workers killed at random, duplicated,
 * late and forged webhooks, refunds planted at the provider; zero invariant violations on the
 * provider's ledger. The webhook defect of issue 10 (a webhook taking an operation out of
 * needs_review) survived every one-fault-at-a-time test; this is the test that sees it.
 */
import { describe, expect, inject, it } from 'vitest';
import { runCampaign } from '../campaign/campaign.js';
import type { Violation } from '../campaign/invariants.js';

const pgBaseUrl = inject('pgUrl') || process.env.RECON_TEST_PG_URL || '';
// RECON_TEST_BACKEND=pglite starts no PostgreSQL: then the seed runs on PGlite, smaller (one process at a time).
const db = pgBaseUrl ? 'postgres' : 'pglite';

describe(`fault campaign, small seed, store on ${db}`, () => {
  it(
    'leaves no operation with two side effects, none open, none confirmed wrongly, none taken out of review by a job',
    async () => {
      const summary = await runCampaign({ seed: 7, ops: db === 'postgres' ? 20 : 6, db, pgBaseUrl, settleMs: 20_000 });
      const report = summary.violations.map(line);
      expect(report, `seed 7: ${JSON.stringify({ ...summary, violations: undefined })}`).toEqual([]);
      // The campaign did what it says: faults applied, workers killed, webhooks duplicated and forged.
      expect(Object.keys(summary.faults).length).toBeGreaterThan(3);
      expect(summary.webhooks.deliveries).toBeGreaterThan(0);
    },
    // About 20 s on an idle 2-core machine, 45 s with six other test runs on it; the limit only guards a hang.
    db === 'postgres' ? 120_000 : 300_000,
  );
});

function line(v: Violation): string {
  return `${v.invariant} ${v.operation_id}: ${JSON.stringify(v.evidence)}`;
}
