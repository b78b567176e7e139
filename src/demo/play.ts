/**
 * `recon demo`: plays incidents 1, 2, 3, 5, 6 and 9 of SPEC §8 and the agent's afternoon of SPEC §9
 * (numbered 11) against the sandboxes, through the same core functions the commands use (record,
 * submit, run, webhook ingest, audit duplicates, ops list/show) and the tools `recon mcp` serves.
 * The incidents are interleaved so the ones that must wait out the uncertainty window wait once,
 * together: setup for all, `recon run` inside the window, the clock moved past it,
 * `recon run` again, then the final checks.
 *
 * The setups are played at once, on the one store: each incident has its own operations, payments
 * and orders, and checks the ledger by its own payment or order (incident 11 counts the requests of
 * its own key), so none sees another's work. What they wait on (the Stripe SDK's half-second pause
 * before it retries a dropped connection, in incidents 1 and 11; the sandboxes' answers) overlaps
 * with the others' work instead of adding up. Their narration is told one incident after the other,
 * in the order they are cast, as if played one by one (narration.ts).
 */
import { listOperations } from '../core/journal/operations.js';
import { runPass } from '../core/reconcile/run.js';
import { operationsJson, showOperation } from '../core/journal/views.js';
import type { Db } from '../store/db.js';
import { agentsAfternoon } from './agent.js';
import { Narration } from './narration.js';
import { commitThenDrop, oldDuplicate, secondClick, webhookTwice } from './refunds.js';
import { delayedIndexing, keyRetentionPassed } from './shipments.js';
import { Stage, type DemoListener, type DemoReport, type Scene } from './stage.js';
import { DEMO_STORE_URL, DEMO_WINDOW_MS, startDemoWorld, type DemoWorld } from './world.js';

export type { Check, DemoListener, DemoReport, DemoStep, DemoTable } from './stage.js';

/** Past the window by this much, as a second `recon run` from cron would be. */
const WINDOW_MARGIN_MS = 100;

/** `store`: a `memory:` store being opened for the demo (src/store/thread.ts); else one is opened here. */
export async function playDemo(listener: DemoListener, store?: Promise<Db>): Promise<DemoReport> {
  const started = Date.now();
  const world = await startDemoWorld(store);
  try {
    const narration = new Narration(listener);
    const scenes = cast(world, () => narration.lane());
    await setUp(narration, scenes);
    await showList(world, listener, 'recon ops list (before recon run)');

    await listener.onStep({
      text: `recon run, pass 1 (inside the ${DEMO_WINDOW_MS} ms uncertainty window)`,
      heading: true,
    });
    const first = await reconcile(world, listener, 'recon run (pass 1)');
    for (const s of scenes) await s.afterRun?.(1, first);

    // The waiting operations' not_found streak began during pass 1: it is a window old once the clock
    // has moved on by a window. Recon and the sandboxes read the demo's clock (world.ts), so moving it
    // is, for all of them, the wait it stands for.
    const skip = DEMO_WINDOW_MS + WINDOW_MARGIN_MS;
    world.clock.advance(skip);
    await listener.onStep({
      text: `${skip} ms later: the demo moves its clock on past the uncertainty window instead of sleeping (recon and the providers read that clock)`,
    });

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

/** In the order they are told: the ones settled before any run first, the audit's old duplicate before recon acts. */
function cast(world: DemoWorld, lane: () => DemoListener): Scene[] {
  const stage = (n: number, title: string) => new Stage(world, lane(), n, title);
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

/**
 * Every scene's setup, at once. The ones with a wait they cannot shorten (Scene.waiting) start first;
 * the others start once all those waits have begun, and are played during them.
 */
function setUp(narration: Narration, scenes: Scene[]): Promise<void> {
  const leads = new Map<Scene, Promise<void>>();
  for (const s of scenes) if (s.waiting) leads.set(s, s.setup());
  // A lead that fails before its wait begins does not keep the others from starting.
  const begun = Promise.all([...leads].map(([s, setup]) => Promise.race([s.waiting, setup.catch(() => undefined)])));
  return narration.together(scenes.map((s) => leads.get(s) ?? begun.then(() => s.setup())));
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
