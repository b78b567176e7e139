/**
 * Agents on the embedded store: `recon mcp` (the built CLI, over stdio, as an agent's MCP client
 * starts it) on a new `pglite:` store, one client calling propose_action → execute_action →
 * check_action on operations of its own against the Stripe sandbox answering after 20 ms; beside
 * it, in the same run, the bare stripe-node calls those tools make (refunds.create, refunds.list by
 * payment intent), one at a time from this process. For information (the targets are those
 * of `recon mcp --http` on PostgreSQL, agents.ts): what an agent waits for on the store recon uses
 * when none is configured. The rows are each tool's p50 and p99 over the bare call's, after a
 * warm-up the rows do not count.
 */
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startStripeSandbox } from '../../src/sandbox/stripe/server.js';
import { cleanEnv } from '../support/cli.js';
import { AMOUNT, LATENCY_MS, TOOLS, bareStripe, call, percentile, toolArgs } from './agents.js';
import { ROOT, mkdir, round, writeStripeConfig, type BenchContext, type Benchmark, type BenchRow } from './lib.js';

export const agentsEmbeddedBench: Benchmark = {
  name: 'agents-embedded',
  async run(ctx: BenchContext): Promise<BenchRow[]> {
    const warm = 10;
    const rounds = ctx.quick ? 30 : 100;
    const dir = mkdir(ctx, 'agents-embedded');
    const sandbox = await startStripeSandbox({ latencyMs: LATENCY_MS });
    try {
      for (let i = 0; i < 2 * (warm + rounds); i++)
        sandbox.seedPaymentIntent({ amount: AMOUNT, currency: 'usd', id: `pi_ag_${i}` });
      const config = writeStripeConfig(dir, {
        db: `pglite:${path.join(dir, 'db')}`,
        apiBase: sandbox.url,
        apiKey: sandbox.apiKey,
        provider: { rateLimit: 1_000_000, autoApprove: { maxAmount: 5000, currencies: ['usd'] } },
      });
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [`${ROOT}/bin/recon`, 'mcp', '--config', config],
        cwd: dir,
        env: cleanEnv({}) as Record<string, string>,
        stderr: 'pipe',
      });
      const client = new Client({ name: 'bench-agent', version: '1.0.0' });
      const times: Record<string, number[]> = { propose_action: [], execute_action: [], check_action: [] };
      await client.connect(transport);
      try {
        for (let i = 0; i < warm + rounds; i++)
          for (const tool of TOOLS) {
            const t = performance.now();
            const out = await call(client, tool, toolArgs(tool, i));
            if (i >= warm) times[tool].push(performance.now() - t);
            if (tool === 'check_action' && out.state !== 'confirmed')
              throw new Error(`refund:ag_${i} is ${String(out.state)} after execute_action, not confirmed`);
          }
      } finally {
        await client.close();
      }
      // The floor: the same calls, bare, one at a time, on payment intents of their own.
      const stripe = bareStripe(sandbox);
      const bare: Record<string, number[]> = { create: [], list: [] };
      for (let k = 0; k < warm + rounds; k++) {
        const i = warm + rounds + k;
        let t = performance.now();
        await stripe.refunds.create(
          { payment_intent: `pi_ag_${i}`, amount: AMOUNT, metadata: { recon_operation_id: `bare_${i}` } },
          { idempotencyKey: `bare_${i}` },
        );
        if (k >= warm) bare.create.push(performance.now() - t);
        t = performance.now();
        await stripe.refunds.list({ payment_intent: `pi_ag_${i}`, limit: 100 });
        if (k >= warm) bare.list.push(performance.now() - t);
      }
      // propose_action and check_action ask the provider nothing here (check: execute_action confirmed each refund).
      const floorOf: Record<string, number[] | null> = {
        propose_action: null,
        execute_action: bare.create,
        check_action: null,
      };
      const rows: BenchRow[] = [];
      for (const tool of TOOLS) {
        for (const p of [50, 99]) {
          const took = percentile(times[tool], p);
          const floor = floorOf[tool] ? percentile(floorOf[tool], p) : 0;
          rows.push({
            bench: 'agents-embedded',
            name: `mcp (stdio) on the embedded store, 1 client: ${tool} p${p} over the bare call (call p${p} ${round(took, 1)} ms)`,
            value: round(took - floor, 1),
            unit: 'ms',
            target: '-',
            baseline: floorOf[tool] ? round(floor, 1) : null,
            baseline_of: floorOf[tool] ? `bare stripe-node refunds.create p${p}, 1 client` : undefined,
            ratio: null,
            pass: null,
            note:
              `${rounds} calls of each tool after ${warm} rounds not counted; recon mcp over stdio on a new pglite: store, the sandbox answering after ${LATENCY_MS} ms` +
              (floorOf[tool] ? '' : `; ${tool} asks the provider nothing here, so the whole call is recon's`),
          });
        }
      }
      ctx.log(`  bare refunds.list p50 ${round(percentile(bare.list, 50), 1)} ms (for reference)`);
      return rows;
    } finally {
      await sandbox.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
};
