/**
 * `recon demo`: plays incidents 1, 2, 3, 5, 6 and 9 of SPEC §8 and the agent's afternoon of SPEC §9
 * (numbered 11) against the sandboxes, through the same core functions the commands use (record,
 * submit, run, webhook ingest, audit duplicates, ops list/show) and the tools `recon mcp` serves.
 * The incidents are interleaved so the ones that must wait out the uncertainty window wait once,
 * together: setup for all, `recon run` inside the window, one short sleep,
 * `recon run` just past it, then the final checks.
 */
import { listOperations } from '../core/journal/operations.js';
import { runPass } from '../core/reconcile/run.js';
import { operationsJson, showOperation } from '../core/journal/views.js';
import { agentsAfternoon } from './agent.js';
import { commitThenDrop, oldDuplicate, secondClick, webhookTwice } from './refunds.js';
import { delayedIndexing, keyRetentionPassed } from './shipments.js';
import { Stage, type DemoListener, type DemoReport, type Scene } from './stage.js';
import { DEMO_STORE_URL, DEMO_WINDOW_MS, startDemoWorld, type DemoWorld } from './world.js';

export type { Check, DemoListener, DemoReport, DemoStep, DemoTable } from './stage.js';

/** Past the window by this much, so the second pass is never a few milliseconds early. */
const WINDOW_MARGIN_MS = 100;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function playDemo(listener: DemoListener): Promise<DemoReport> {
  const started = Date.now();
  const world = await startDemoWorld();
  try {
    const scenes = cast(world, listener);
    for (const s of scenes) await s.setup();
    await showList(world, listener, 'recon ops list (before recon run)');

    await listener.onStep({
      text: `recon run, pass 1 (inside the ${DEMO_WINDOW_MS} ms uncertainty window)`,
      heading: true,
    });
    const first = await reconcile(world, listener, 'recon run (pass 1)');
    const firstDone = Date.now();
    for (const s of scenes) await s.afterRun?.(1, first);

    // The waiting operations' not_found streak began during pass 1: wait until it is a window old.
    const wait = firstDone + DEMO_WINDOW_MS + WINDOW_MARGIN_MS - Date.now();
    await listener.onStep({ text: `waiting ${Math.max(0, wait)} ms for the uncertainty window to pass` });
    if (wait > 0) await sleep(wait);

    await listener.onStep({ text: 'recon run, pass 2 (past the window)', heading: true });
    const second = await reconcile(world, listener, 'recon run (pass 2)');
    for (const s of scenes) await s.afterRun?.(2, second);
    await showList(world, listener, 'recon ops list (after recon run)');

    await listener.onStep({ text: 'recon ops show refund:ord_1001 (incident 1)', heading: true });
    await listener.onTable({
      kind: 'show',
      title: 'recon ops show refund:ord_1001',
      detail: await showOperation(world.ctx.db, 'refund:ord_1001'),
    });

    await listener.onStep({ text: "the end state, checked against the providers' ledgers", heading: true });
    const byNumber = [...scenes].sort((a, b) => a.stage.report.number - b.stage.report.number);
    for (const s of byNumber) await s.finish?.();
    const incidents = byNumber.map((s) => s.stage.report);
    return {
      ok: incidents.every((i) => i.checks.length > 0 && i.checks.every((c) => c.ok)),
      incidents,
      store: DEMO_STORE_URL,
      duration_ms: Date.now() - started,
    };
  } finally {
    await world.close();
  }
}

/** In the order they are played: the ones settled before any run first, the audit's seed before recon acts. */
function cast(world: DemoWorld, listener: DemoListener): Scene[] {
  const stage = (n: number, title: string) => new Stage(world, listener, n, title);
  return [
    oldDuplicate(stage(9, 'An old duplicate at the provider, from before recon')),
    secondClick(stage(2, 'The second click')),
    webhookTwice(stage(6, 'The same webhook delivered twice')),
    commitThenDrop(stage(1, 'Refund committed at the provider, connection dropped before the response')),
    delayedIndexing(stage(3, 'Delayed indexing at the warehouse')),
    keyRetentionPassed(stage(5, "Key retention passed and the provider's lookup is not authoritative")),
    agentsAfternoon(stage(11, "The agent's afternoon: an AI agent's refund through recon mcp")),
  ];
}

async function reconcile(world: DemoWorld, listener: DemoListener, title: string) {
  const summary = await runPass(world.ctx, (name) => world.provider(name));
  await listener.onTable({ kind: 'run', title, summary });
  return summary;
}

async function showList(world: DemoWorld, listener: DemoListener, title: string): Promise<void> {
  const ops = await listOperations(world.ctx.db, { limit: 50 });
  await listener.onTable({
    kind: 'operations',
    title,
    operations: await operationsJson(world.ctx.db, ops),
    now: world.ctx.now(),
  });
}
