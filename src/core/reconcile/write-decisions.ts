import type { Queryable } from '../../store/db.js';
import type { CoreContext } from '../journal/context.js';
import { decisionJson, lookupDetail, type Applied } from '../journal/decision-json.js';
import type { PlannedDecision } from './plan.js';
import { transitionMany } from '../journal/transition.js';

/**
 * Writing reconciliation decisions (SPEC §4), many per transaction: `recon run` hands each to its
 * decisionWriter (group commit), which writes them in groups with applyDecisions.
 *
 * One transaction per decision cost about ten store round trips per operation, and against a fast
 * provider those round trips were most of a pass (npm run bench, `claims`: 4 × `recon run` decided
 * ~310 operations/s, recon's and PostgreSQL's CPU split evenly between them). A group of decisions
 * is written by one statement (transitionMany): observations, linked transactions, state changes,
 * lease releases and audit events. Every operation is still checked on its own (our lease, the
 * state the rule saw, the state machine); one that fails its check is reported and the rest of the
 * group is written.
 */

export interface DecisionWriterOptions {
  /** Decisions per group (one statement, one commit). Default 500. */
  maxGroup?: number;
  /** How long the oldest waiting decision waits for its group to fill. Default 50 ms. */
  fillMs?: number;
  /** Groups being written at once. Default 2. */
  inFlight?: number;
}

/**
 * Group commit for `recon run`: decisions handed in while groups are being written wait and go
 * together in the next one. A group is written when it is full or `fillMs` after its oldest
 * decision arrived: against a slow provider decisions trickle in, and writing each alone made one
 * statement and one commit (its WAL flush) per decision. At 100 lookups/s, 5 ms of waiting still
 * wrote one decision per group, and those statements were a third of recon's own CPU per operation
 * (npm run bench, reconcile); 50 ms fills groups of five there, and costs a pass nothing (the
 * decisions wait under their leases; lookups go on meanwhile: runPass starts the next batch's when
 * this batch's lookups, not its writes, are nearly done).
 *
 * Up to `inFlight` groups are written at once (each on its own pooled connection; their
 * operations are distinct, so they never wait on each other's row locks): with one, every decision
 * made during a commit's WAL flush waited for it, and a pass against a fast provider spent most of
 * its time waiting for the store (npm run bench, claims).
 */
export function decisionWriter(
  ctx: CoreContext,
  owner: string,
  o: DecisionWriterOptions = {},
): (item: PlannedDecision) => Promise<Applied> {
  const maxGroup = o.maxGroup ?? 500;
  const fillMs = o.fillMs ?? 50;
  const maxInFlight = o.inFlight ?? 2;
  const queue: { item: PlannedDecision; at: number; resolve: (a: Applied) => void }[] = [];
  let writing = 0;
  let filling = false;
  let full: (() => void) | null = null;

  const pump = async (): Promise<void> => {
    if (filling || writing >= maxInFlight || queue.length === 0) return;
    const wait = fillMs - (performance.now() - queue[0].at);
    if (queue.length < maxGroup && wait > 0) {
      // Let the group fill: until it is full, or its oldest decision has waited fillMs.
      filling = true;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          full = null;
          resolve();
        }, wait);
        full = () => {
          clearTimeout(timer);
          full = null;
          resolve();
        };
      });
      filling = false;
    }
    const group = queue.splice(0, maxGroup);
    writing++;
    void applyDecisions(
      ctx,
      group.map((g) => g.item),
      owner,
    )
      // applyDecisions answers each item and never throws; should it all the same, each caller hears of it.
      .catch((err: unknown) => group.map(() => ({ ok: false as const, error: err as Error })))
      .then((results) => group.forEach((g, k) => g.resolve(results[k])))
      .finally(() => {
        writing--;
        void pump();
      });
    if (queue.length) void pump();
  };

  return (item) =>
    new Promise<Applied>((resolve) => {
      queue.push({ item, at: performance.now(), resolve });
      if (full && queue.length >= maxGroup) full();
      else void pump();
    });
}

/**
 * Writes planned decisions under `owner`'s leases. Never throws: each item gets its own result.
 * One write (writeGroup); should it fail as a whole (a chain head moved since it was read, a
 * transaction linked elsewhere meanwhile, a store error), the same write again under the group's
 * row locks, and then item by item, so one bad item costs only itself.
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
  const written = await writeGroup(ctx, members, owner, { underLocks: false })
    .catch(() => writeGroup(ctx, members, owner, { underLocks: true }))
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

/**
 * The one write of a group of decisions: each decision as a move of transitionMany (a retry keeps
 * its state and its lease: the attempt follows, claimAttempt), all in one statement. Throws when
 * the statement fails as a whole.
 *
 * By default each event is chained to the head read with the operation's history, and the
 * statement fails should a transaction it links have been linked to another operation meanwhile.
 * `underLocks` (the write again, after such a failure; also for items planned without a head): in
 * one transaction, the heads read under the row locks, and a transaction already linked to
 * another operation is not re-pointed: it stays where it is, and the decision's explanation says so.
 */
async function writeGroup(
  ctx: CoreContext,
  items: PlannedDecision[],
  owner: string,
  o: { underLocks: boolean },
): Promise<Applied[]> {
  const underLocks = o.underLocks || items.some((item) => !item.head);
  const now = ctx.now();
  const write = async (q: Queryable): Promise<Applied[]> => {
    const elsewhere = new Map<string, string>();
    const links = items.flatMap((item) => (item.ruling.link ?? []).map((t) => [item.provider, t.provider_id]));
    if (underLocks && links.length) {
      const r = await q.query<{ provider: string; provider_id: string; operation_id: string }>(
        `SELECT p.provider, p.provider_id, p.operation_id FROM recon.provider_transactions p
           JOIN unnest($1::text[], $2::text[]) AS u(provider, provider_id) USING (provider, provider_id)`,
        [links.map(([provider]) => provider), links.map(([, id]) => id)],
      );
      for (const t of r.rows) elsewhere.set(`${t.provider}\u0000${t.provider_id}`, t.operation_id);
    }
    // Per item: its transactions already linked to another operation, and to which.
    const taken = items.map((item) => {
      const mine = new Map<string, string>();
      for (const t of item.ruling.link ?? []) {
        const other = elsewhere.get(`${item.provider}\u0000${t.provider_id}`);
        if (other !== undefined && other !== item.op.id) mine.set(t.provider_id, other);
      }
      return mine;
    });
    const rulings = items.map((item, i) =>
      [...taken[i]].reduce(
        (d, [id, other]) => ({ ...d, explanation: `${d.explanation}; ${id} is already linked to ${other}` }),
        item.ruling,
      ),
    );
    const moved = await transitionMany(
      q,
      items.map((item, i) => {
        const d = rulings[i];
        const detail = lookupDetail(item.lookup);
        const stays = d.decision === 'retry' || d.state === item.op.state;
        return {
          id: item.op.id,
          from: item.op.state,
          to: stays ? undefined : d.state,
          // Only a retry's authorisation is audited here; `submitting` is entered by the attempt itself (claimAttempt).
          kind: d.decision === 'retry' ? 'retry.authorised' : stays ? `reconcile.${d.decision}` : 'reconcile.decision',
          rule: d.rule,
          detail: { explanation: d.explanation, lookup: detail },
          review_reason: d.review_reason ?? null,
          leaseOwner: owner,
          lease: d.decision === 'retry' ? 'keep' : 'release',
          nextCheckAt: item.nextCheckAt,
          observation: { result: item.lookup.result, detail, at: item.at },
          links: (d.link ?? [])
            .filter((txn) => !taken[i].has(txn.provider_id))
            .map((txn) => ({ provider: item.provider, txn, via: 'lookup' as const })),
          head: underLocks ? undefined : item.head,
          note: item.note,
        };
      }),
      { actor: ctx.actor, auditKey: ctx.auditKey, now },
    );
    return moved.map((m, i) => (m.ok ? { ok: true, json: decisionJson(items[i].op.id, rulings[i]) } : m));
  };
  return underLocks ? ctx.db.transaction(write) : write(ctx.db);
}
