/**
 * `recon ops record FILE` of a large NDJSON file on PostgreSQL (the CLI end to end: read, parse,
 * validate, hash, one transaction with the audit events): ≥ 5,000 operations per second.
 * Baseline: the store's raw speed, the same rows and their audit events inserted by plain SQL.
 */
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  expectExit,
  freshPgStore,
  mkdir,
  payloadSql,
  round,
  runRecon,
  writeStripeConfig,
  type BenchContext,
  type Benchmark,
} from './lib.js';

function ndjson(n: number): string {
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    lines.push(
      JSON.stringify({
        id: `rec-${i}`,
        provider: 'stripe',
        action: 'refund',
        payload: { payment_intent: `pi_rec_${i}`, amount: 1000 + (i % 5000), currency: 'usd' },
        client_reference: `ord-${i}`,
        approval: 'BENCH-1',
      }),
    );
  }
  return lines.join('\n') + '\n';
}

/** What the store alone costs for the same rows: operations and one audit event each, by SQL. */
async function rawInsert(ctx: BenchContext, n: number): Promise<number> {
  const { db } = await freshPgStore(ctx);
  try {
    const p = payloadSql(`'pi_rec_' || g`, '1000 + g % 5000');
    const t0 = performance.now();
    await db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, client_reference, approval,
                                       state, amount, currency, created_at, updated_at)
         SELECT 'rec-' || g, 'stripe', 'refund', ${p.payload}, ${p.hash}, 'rec-' || g, 'ord-' || g, 'BENCH-1', 'approved',
                1000 + g % 5000, 'usd', now(), now()
           FROM generate_series(0, $1::int - 1) AS g`,
        [n],
      );
      await tx.query(
        `INSERT INTO recon.audit_events (operation_id, seq, at, actor, kind, to_state, rule, detail, prev_hash, hash)
         SELECT 'rec-' || g, 1, now(), 'bench', 'recorded', 'approved', 'record.approved', '{}',
                repeat('0', 64), encode(sha256(convert_to('rec-' || g, 'UTF8')), 'hex')
           FROM generate_series(0, $1::int - 1) AS g`,
        [n],
      );
    });
    return performance.now() - t0;
  } finally {
    await db.close();
  }
}

export const recordThroughput: Benchmark = {
  name: 'record',
  async run(ctx: BenchContext) {
    const n = ctx.quick ? 20_000 : 100_000;
    const dir = mkdir(ctx, 'record');
    const store = await freshPgStore(ctx);
    await store.db.close();
    try {
      const file = path.join(dir, 'operations.ndjson');
      fs.writeFileSync(file, ndjson(n));
      const config = writeStripeConfig(dir, { db: store.url, apiBase: 'http://127.0.0.1:9', apiKey: 'sk_test_unused' });
      const r = await runRecon(ctx, ['ops', 'record', file, '--json', '--config', config], { cwd: dir });
      expectExit(r, 'recon ops record');
      const out = JSON.parse(r.stdout) as { operations: { created: boolean }[] };
      const created = out.operations.filter((o) => o.created).length;
      if (created !== n) throw new Error(`ops record created ${created} of ${n} operations`);
      const rate = n / (r.ms / 1000);
      const rawMs = await rawInsert(ctx, n);
      ctx.log(`  ${n} operations recorded in ${Math.round(r.ms)} ms (raw SQL: ${Math.round(rawMs)} ms)`);
      return [
        {
          bench: 'record',
          name: `recon ops record FILE, ${n.toLocaleString('en')} NDJSON operations, PostgreSQL (${round(r.ms / 1000, 1)} s)`,
          value: round(rate, 0),
          unit: 'ops/s',
          target: '≥ 5000 ops/s',
          baseline: round(n / (rawMs / 1000), 0),
          baseline_of: 'the same rows + audit events by plain SQL',
          pass: rate >= 5000,
        },
      ];
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
};
