/**
 * Small helpers shared by the incident tests (SPEC §8): operations to record, `ops show` through
 * the CLI, and how far past the configured uncertainty window to move the clock.
 */
import { expect } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { submitOperation } from '../../src/core/attempt/submit.js';
import { createProvider } from '../../src/providers/index.js';
import type { CliResult } from '../support/cli.js';
import { type World } from '../support/world.js';

/** The world's uncertainty window is 1s; a little more so "after the window" is never a race (`world.advance`). */
export const PAST_WINDOW_MS = 1_150;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** An approved Stripe refund operation for a seeded payment intent. */
export function refundOp(id: string, paymentIntent: string, amount: number, extra: Record<string, unknown> = {}) {
  return {
    id,
    provider: 'stripe',
    action: 'refund',
    payload: { payment_intent: paymentIntent, amount, currency: 'usd' },
    client_reference: id.replace(/^refund:/, ''),
    approval: 'TICKET-1',
    ...extra,
  };
}

/** An approved warehouse shipment operation. */
export function shipmentOp(id: string, clientReference: string) {
  return {
    id,
    provider: 'warehouse',
    action: 'shipment.create',
    payload: { client_reference: clientReference, sku: 'SKU-1', quantity: 1, address: { city: 'Lyon', zip: '69001' } },
    client_reference: clientReference,
    approval: 'TICKET-2',
  };
}

/** Fails with the CLI's stderr when the exit code is not the expected one. */
export function expectExit(r: CliResult, code: number): CliResult {
  if (r.code !== code)
    throw new Error(
      `expected exit ${code}, got ${r.code} (${r.signal ?? 'no signal'})\nstdout: ${r.stdout}\nstderr: ${r.stderr}`,
    );
  return r;
}

export interface ShowJson {
  operation: {
    id: string;
    state: string;
    attempt_count: number;
    provider_txn_ids: string[];
    review_reason: string | null;
    idempotency_key: string;
  };
  attempts: { number: number; idempotency_key: string; outcome: string | null }[];
  provider_transactions: { provider_id: string; linked_via: string; status: string }[];
  observations: { result: string }[];
  events: { seq: number; kind: string; rule: string | null; from_state: string | null; to_state: string | null }[];
}

export async function show(world: World, id: string): Promise<ShowJson> {
  const r = expectExit(await world.recon(['ops', 'show', id, '--json']), 0);
  expect(r.json, r.stdout).toBeTruthy();
  return r.json as ShowJson;
}

export async function recordOk(world: World, ops: unknown[]): Promise<CliResult> {
  return expectExit(await world.record(ops), 0);
}

export async function submit(
  world: World,
  id: string,
): Promise<{ state: string; result: { outcome: string; error_class: string | null } }> {
  const r = await world.recon(['ops', 'submit', id, '--json']);
  // Exit 7 exactly when the attempt ended outcome_unknown (SPEC §7), else 0.
  return expectExit(r, (r.json as { state?: string } | undefined)?.state === 'outcome_unknown' ? 7 : 0).json;
}

/** `recon run --json`; the exit code is checked by the caller (8 when a review exists). */
export async function run(world: World, args: string[] = []): Promise<{ code: number | null; summary: RunJson }> {
  const r = await world.recon(['run', '--json', ...args]);
  if (!r.json) throw new Error(`recon run printed no JSON (exit ${r.code})\nstderr: ${r.stderr}`);
  return { code: r.code, summary: r.json as RunJson };
}

export interface RunJson {
  claimed: number;
  confirmed: number;
  retried: number;
  waiting: number;
  escalated: number;
  decisions: { id: string; decision: string; rule: string; state: string; review_reason?: string }[];
  errors: { id: string; error: string }[];
}

/**
 * Every operation's first attempt made in process (a CLI process per submit would take minutes),
 * each meeting a fault on its own key: the even ones committed then dropped, the odd ones never
 * arrived. All end outcome_unknown; returns the ids whose refund exists at the provider.
 */
export async function arrangeUnknownOutcomes(world: World, ops: { id: string }[]): Promise<Set<string>> {
  for (const [i, op] of ops.entries()) {
    world.stripe.faults.inject(
      { kind: i % 2 === 0 ? 'commit_then_drop' : 'drop_before_commit' },
      { idempotencyKey: op.id },
    );
  }
  const env = {
    STRIPE_API_KEY: world.stripe.apiKey,
    STRIPE_WEBHOOK_SECRET: world.stripe.webhookSecret,
    WAREHOUSE_TOKEN: 'wh_token_test',
  };
  const configured = await createProvider('stripe', await loadConfig({ flag: world.configPath, env, cwd: world.dir }));
  // A long lease for the arrangement only: hundreds of submits at once wait on the client's rate
  // limit and stripe-node's reconnect back-off, and each attempt gives its lease back when it finishes.
  const provider = { ...configured, capabilities: { ...configured.capabilities, leaseMs: 120_000 } };
  const ctx = { db: await world.db(), actor: 'test-arrange', now: () => world.now() };
  const states = await Promise.all(
    ops.map(async (op) => (await submitOperation(ctx, provider, op.id)).operation.state),
  );
  expect(new Set(states)).toEqual(new Set(['outcome_unknown']));
  world.stripe.faults.clear();
  const committed = new Set(ops.filter((_, i) => i % 2 === 0).map((o) => o.id));
  expect(world.stripe.refunds()).toHaveLength(committed.size);
  return committed;
}
