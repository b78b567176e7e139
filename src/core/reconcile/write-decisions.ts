import type { Decision } from '../../types.js';
import { chainHeads, type ChainHead } from '../journal/chain.js';
import type { CoreContext } from '../journal/context.js';
import { decisionJson, lookupDetail, type Applied } from '../journal/decision-json.js';
import { linkTransactions } from '../journal/links.js';
import type { PlannedDecision } from './plan.js';
import { assertMove, lockForMoves, transitionMany, type Move } from '../journal/transition.js';

/**
 * Writing reconciliation decisions (SPEC §4), many per transaction.
 *
 * One transaction per decision cost about ten store round trips per operation, and against a fast
 * provider those round trips were most of a pass (npm run bench, `claims`: 4 × `recon run` decided
 * ~310 operations/s, recon's and PostgreSQL's CPU split evenly between them). A group of decisions
 * is written by one statement (transitionMany): observations, linked transactions, state changes,
 * lease releases and audit events. Every operation is still checked on its own (our lease, the
 * state the rule saw, the state machine); one that fails its check is reported and the rest of the
 * group is written.
 */

/**
 * Writes planned decisions under `owner`'s leases. Never throws: each item gets its own result.
 * Should the group's statement fail as a whole, the group goes again step by step in a
 * transaction, then item by item, so one bad item costs only itself.
 */
export async function applyDecisions(ctx: CoreContext, items: PlannedDecision[], owner: string): Promise<Applied[]> {
  if (items.length === 0) return [];
  // One statement cannot insert the same provider transaction twice (ON CONFLICT would refuse to
  // touch a row twice): a later item that links one an earlier item links goes in a later group.
  const seen = new Set<string>();
  const group: number[] = [];
  const later: number[] = [];
  items.forEach((item, i) => {
    const keys = [item.op.id, ...(item.ruling.link ?? []).map((t) => `${item.provider}\u0000${t.provider_id}`)];
    if (keys.some((k) => seen.has(k))) later.push(i);
    else {
      for (const k of keys) seen.add(k);
      group.push(i);
    }
  });
  const results = new Array<Applied>(items.length);
  const members = group.map((i) => items[i]);
  // One statement for the group; should it fail as a whole (a chain head moved since it was read, a
  // transaction linked elsewhere meanwhile, a store error), the group goes again step by step,
  // reading everything under its row locks, and then item by item.
  const written = await writeGroup(ctx, members, owner)
    .catch(() => writeGroupLocked(ctx, members, owner))
    .catch(async (err: unknown) => {
      if (group.length === 1)
        return [{ ok: false as const, error: err instanceof Error ? err : new Error(String(err)) }];
      const alone: Applied[] = [];
      for (const i of group) alone.push(...(await applyDecisions(ctx, [items[i]], owner)));
      return alone;
    });
  group.forEach((i, k) => (results[i] = written[k]!));
  if (later.length) {
    const rest = await applyDecisions(
      ctx,
      later.map((i) => items[i]),
      owner,
    );
    later.forEach((i, k) => (results[i] = rest[k]!));
  }
  return results;
}

/** A decision as a move: a retry keeps its state and its lease (the attempt follows: claimAttempt). */
function moveOf(
  item: PlannedDecision,
  d: Decision,
  owner: string,
  detail: Record<string, unknown>,
  head: ChainHead | undefined,
  withLinks: boolean,
): Move {
  const moved = d.decision !== 'retry' && d.state !== item.op.state;
  return {
    id: item.op.id,
    from: item.op.state,
    to: moved ? d.state : undefined,
    // Only a retry's authorisation is audited here; `submitting` is entered by the attempt itself (claimAttempt).
    kind: d.decision === 'retry' ? 'retry.authorised' : moved ? 'reconcile.decision' : `reconcile.${d.decision}`,
    rule: d.rule,
    detail: { explanation: d.explanation, lookup: detail },
    review_reason: d.review_reason ?? null,
    leaseOwner: owner,
    lease: d.decision === 'retry' ? 'keep' : 'release',
    nextCheckAt: item.nextCheckAt,
    observation: { result: item.lookup.result, detail, at: item.at },
    links: withLinks ? (d.link ?? []).map((txn) => ({ provider: item.provider, txn, via: 'lookup' as const })) : [],
    head,
  };
}

/**
 * The group in one statement, each event chained to the head read with the operation's history
 * (read here, one query, for items planned without one). Throws when the statement fails as a
 * whole; the caller then writes the group under its row locks (writeGroupLocked).
 */
async function writeGroup(ctx: CoreContext, items: PlannedDecision[], owner: string): Promise<Applied[]> {
  const missing = items.filter((item) => !item.head).map((item) => item.op.id);
  const heads = missing.length ? await chainHeads(ctx.db, missing) : new Map<string, ChainHead>();
  const moved = await transitionMany(
    ctx.db,
    items.map((item) =>
      moveOf(item, item.ruling, owner, lookupDetail(item.lookup), item.head ?? heads.get(item.op.id), true),
    ),
    { actor: ctx.actor, auditKey: ctx.auditKey, now: ctx.now() },
  );
  return moved.map((m, i) => (m.ok ? { ok: true, json: decisionJson(items[i].op.id, items[i].ruling) } : m));
}

/**
 * The group step by step in one transaction, under its row locks: a transaction already linked to
 * another operation is not re-pointed (it stays where it is, and the decision's explanation says
 * so), and the chain heads are read under the locks.
 */
async function writeGroupLocked(ctx: CoreContext, items: PlannedDecision[], owner: string): Promise<Applied[]> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const current = await lockForMoves(
      tx,
      items.map((item) => item.op.id),
    );
    const results = new Array<Applied>(items.length);
    const ok: { i: number; item: PlannedDecision; d: Decision; detail: Record<string, unknown> }[] = [];
    items.forEach((item, i) => {
      const detail = lookupDetail(item.lookup);
      try {
        assertMove(current.get(item.op.id), moveOf(item, item.ruling, owner, detail, undefined, false), now);
        ok.push({ i, item, d: item.ruling, detail });
      } catch (err) {
        results[i] = { ok: false, error: err as Error };
      }
    });
    if (ok.length === 0) return results;
    const links = ok.flatMap((w) =>
      (w.d.link ?? []).map((t) => ({ w, provider: w.item.provider, operationId: w.item.op.id, txn: t })),
    );
    const linked = await linkTransactions(tx, links, { via: 'lookup', by: ctx.actor, at: now });
    links.forEach(({ w, txn: t }, k) => {
      if (!linked[k].linked)
        w.d = {
          ...w.d,
          explanation: `${w.d.explanation}; ${t.provider_id} is already linked to ${linked[k].existingOperation}`,
        };
    });
    const moved = await transitionMany(
      tx,
      ok.map((w) => moveOf(w.item, w.d, owner, w.detail, undefined, false)),
      { actor: ctx.actor, auditKey: ctx.auditKey, now },
    );
    ok.forEach((w, k) => {
      const m = moved[k];
      results[w.i] = m.ok ? { ok: true, json: decisionJson(w.item.op.id, w.d) } : m;
    });
    return results;
  });
}
