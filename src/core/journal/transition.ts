import { LeaseLostError, NotFoundError, RefusedError } from '../../errors.js';
import { jsonbArraySql, keepPlan, textArrayParam, type Queryable } from '../../store/db.js';
import { DIVISION_BY_ZERO, pgCode, UNIQUE_VIOLATION } from '../../store/pgcodes.js';
import type { AuditEvent, LinkedVia, ObservationResult, Operation, ProviderTxn, State } from '../../types.js';
import type { AuditKey } from '../../lib/keyed-hash.js';
import { chainEvent, chainHeads, insertEventsSql, type ChainHead } from './chain.js';
import { insertLinksSql } from './links.js';
import { insertObservationsSql } from './observations.js';
import { operationColumns, rowToOperation, type OperationRow } from './operations.js';
import { assertTransition, isTerminal } from './states.js';

/**
 * The one writer of operation state (states.ts): every move is checked against the state machine
 * (`assertTransition`, with who moves and why), written with the lease it leaves, and recorded as
 * a chained audit event, together. `transition()` moves one operation in the caller's
 * transaction; `transitionMany()` moves many in one statement (`recon run`'s groups of decisions).
 */

export interface TransitionOptions {
  actor: string;
  /** The audit key (CoreContext.auditKey): the event is keyed with it. */
  auditKey?: AuditKey | null;
  now: Date;
  /** Audit event kind, e.g. `submit.classified`, `run.decision`, `review.resolved`. */
  kind: string;
  /** The rule that allowed the move (SPEC §1.6), e.g. `found.confirmed`, `human`. */
  rule: string;
  detail?: Record<string, unknown>;
  review_reason?: string | null;
  assignee?: string | null;
  /** `person` for `review resolve` and `attach`: only a person leaves needs_review (SPEC §3). */
  by?: 'person' | 'system';
  /**
   * The worker's lease token. When given, the move is refused unless that worker still holds an
   * unexpired lease: a worker whose lease was lost must not write over a newer claim.
   */
  leaseOwner?: string;
  /** Keep the lease (e.g. → submitting for a retry); by default a transition releases it. */
  keepLease?: { owner: string; expiresAt: Date };
  /**
   * The state and the chain head the caller read under the row lock it holds (Move.from, Move.head):
   * the move then takes no lock and reads no head of its own. Both or neither.
   */
  from?: State;
  head?: ChainHead;
}

/** One operation's part of `transitionMany`. */
export interface Move {
  id: string;
  /**
   * The state the caller saw: the move is written only if the row is still in it. Omitted: the
   * state found under the row lock (then `q` must be a transaction).
   */
  from?: State;
  /**
   * The new state. Omitted, the operation stays where it is (a decision to wait, stay pending or
   * retry): its event, observation, lease and next check are written, its state is not.
   */
  to?: State;
  kind: string;
  rule: string | null;
  detail?: Record<string, unknown>;
  review_reason?: string | null;
  assignee?: string | null;
  by?: 'person' | 'system';
  /** Refused unless this worker holds an unexpired lease (see TransitionOptions.leaseOwner). */
  leaseOwner?: string;
  /** The lease afterwards: released (default), kept as it is, or a new one. */
  lease?: 'release' | 'keep' | { owner: string; expiresAt: Date };
  /** A stay only: when to look again (a provider backed off after `unavailable`). */
  nextCheckAt?: Date | null;
  /**
   * The lookup behind the move, recorded as an observation, with the row's last_checked_at (a pass of
   * `recon run` does not claim what was looked up after it began: claimForRun).
   */
  observation?: {
    result: ObservationResult;
    detail: Record<string, unknown>;
    /** When the provider answered (the clock the rule read); default: when written. */
    at?: Date;
  };
  /**
   * Transactions linked with the move. Each must be linked here or already to this operation: one
   * linked elsewhere meanwhile fails the statement as a whole (the event says it was linked).
   */
  links?: { provider: string; txn: ProviderTxn; via: LinkedVia }[];
  /**
   * The operation's chain head, read earlier (with its history, under our lease). Should another
   * writer have appended since, the event's seq is taken: the statement fails as a whole on the
   * primary key (operation_id, seq), never a forked chain. Omitted: read under the row lock (then
   * `q` must be a transaction).
   */
  head?: ChainHead;
  /**
   * An event that changes no state, chained right after the move's and written in the same
   * statement, only with the move (an agent's `mcp.call` for the call that made the move: a crash
   * cannot keep one without the other). Its state is the one the move leaves.
   */
  note?: { kind: string; detail: Record<string, unknown> };
  /**
   * The attempt the move begins (an attempt's claim, → submitting): its row in recon.attempts (owned by
   * the move's new lease, started now) and the operation's attempt_count, in the move's statement.
   */
  attempt?: {
    number: number;
    idempotencyKey: string;
    requestHash: string;
    /**
     * The version of the row (its xmin) the claim's read saw (readForClaim): the move is written only on
     * that very row, so what is sent is what that read checked (a payload changed since, even behind
     * recon's back, fails the move), and only after the head the read saw (the event before the move's
     * has the hash the move's event is chained to: a row version is only unique within one database
     * history, which a failover to a replica behind it can rewind). Omitted under the row lock (the
     * long way checks what it locked).
     */
    rowVersion?: string;
  };
  /** The attempt the move ends (its answer written): its row's end, in the move's statement. */
  attemptEnd?: {
    number: number;
    outcome: 'confirmed' | 'failed' | 'unknown';
    errorClass: string | null;
    providerRequestId: string | null;
  };
}

/** A move written (its event, the note chained after it if it had one, the row when asked) or refused. */
export type Moved = { ok: true; event: AuditEvent; noted?: AuditEvent; op?: Operation } | { ok: false; error: Error };

/** What a move's checks read under the row lock. */
type Locked = Pick<Operation, 'id' | 'state' | 'lease_owner' | 'lease_expires_at'>;

/**
 * Whether a move failed because the operation moved on since what its caller read: another writer's
 * event took the seq the move's event needed (the chain's key), a transaction it links was linked
 * to another operation meanwhile (the links part), or its checks under the row lock refused it
 * (state, lease, gone). A caller that wrote on what it had read (a claim on readForClaim's view, an
 * attempt's end on what its claim left) then decides the long way, under the row lock; any other
 * error (the store's) is its caller's, as it was on the long way.
 */
export function movedOn(err: unknown): boolean {
  const code = pgCode(err);
  return (
    code === UNIQUE_VIOLATION ||
    code === DIVISION_BY_ZERO ||
    err instanceof RefusedError ||
    err instanceof LeaseLostError ||
    err instanceof NotFoundError
  );
}

/** Throws LeaseLostError unless `owner` holds an unexpired lease on `op`. */
export function assertLease(
  op: Pick<Operation, 'id' | 'lease_owner' | 'lease_expires_at'>,
  owner: string,
  now: Date,
): void {
  if (op.lease_owner !== owner || !op.lease_expires_at || op.lease_expires_at.getTime() <= now.getTime()) {
    throw new LeaseLostError(
      `lease on ${op.id} was lost (held by ${op.lease_owner ?? 'nobody'}, expires ${op.lease_expires_at?.toISOString() ?? '-'}); result not written`,
    );
  }
}

/**
 * The checks a move passes under its row lock: the operation exists, the lease (when one is
 * required) holds, its state is the one the caller saw, and the state machine allows the move.
 */
function assertMove(cur: Locked | undefined, m: Move, now: Date): void {
  if (!cur) throw new NotFoundError(`operation ${m.id} not found; list operations with: recon ops list`);
  if (m.leaseOwner) assertLease(cur, m.leaseOwner, now);
  if (m.from !== undefined && cur.state !== m.from) {
    throw new RefusedError(
      `operation ${cur.id} moved from ${m.from} to ${cur.state} while it was looked up; decision not written`,
      'state_machine',
    );
  }
  if (m.to !== undefined) assertTransition(cur.id, cur.state, m.to, { by: m.by, review_reason: m.review_reason });
}

/** Locks operation rows in id order (so two writers never wait on each other in a cycle): what a move's checks read. */
async function lockForMoves(tx: Queryable, ids: string[]): Promise<Map<string, Locked>> {
  const r = await tx.query<Locked>(
    'SELECT id, state, lease_owner, lease_expires_at FROM recon.operations WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE',
    [ids],
  );
  return new Map(r.rows.map((row) => [row.id, row]));
}

/**
 * The one way to change an operation's state: checks the move against the state machine,
 * updates the row and appends the audit event in the caller's transaction.
 */
export async function transition(
  tx: Queryable,
  id: string,
  to: State,
  o: TransitionOptions,
): Promise<{ op: Operation; event: AuditEvent }> {
  const [moved] = await transitionMany(
    tx,
    [
      {
        id,
        to,
        kind: o.kind,
        rule: o.rule,
        detail: o.detail,
        review_reason: o.review_reason,
        assignee: o.assignee,
        by: o.by,
        leaseOwner: o.leaseOwner,
        lease: o.keepLease ?? 'release',
        from: o.from,
        head: o.head,
      },
    ],
    { actor: o.actor, auditKey: o.auditKey, now: o.now, returnRows: true },
  );
  if (!moved.ok) throw moved.error;
  return { op: moved.op!, event: moved.event };
}

/**
 * Moves many operations, one statement for all (after one lock and one chain-head read for the moves
 * given without `from` or `head`). Each move is checked on its own; one that fails its check is
 * returned with its error and the others are written. Throws when the statement fails as a whole
 * (a chain head moved, a link taken meanwhile, a store error). Each id at most once.
 */
export async function transitionMany(
  q: Queryable,
  moves: Move[],
  o: { actor: string; auditKey?: AuditKey | null; now: Date; returnRows?: boolean },
): Promise<Moved[]> {
  const results = new Array<Moved>(moves.length);
  const unread = moves.filter((m) => m.from === undefined || m.head === undefined).map((m) => m.id);
  let current = new Map<string, Locked>();
  let heads = new Map<string, ChainHead>();
  if (unread.length) {
    current = await lockForMoves(q, unread);
    // After the lock was granted, in a statement of its own (see chainHeads).
    heads = await chainHeads(q, [...current.keys()]);
  }
  const rows: { i: number; m: Move; from: State; event: AuditEvent; noted: AuditEvent | null }[] = [];
  moves.forEach((m, i) => {
    try {
      const cur = current.get(m.id);
      // What can be checked before the statement is checked here; the statement re-checks lease and state.
      // Under the row lock, assertMove checks everything (the state machine included); else only the move.
      if (m.from === undefined || m.head === undefined) assertMove(cur, m, o.now);
      else if (m.to !== undefined) assertTransition(m.id, m.from, m.to, { by: m.by, review_reason: m.review_reason });
      const from = m.from ?? cur!.state;
      const detail = { ...(m.detail ?? {}) };
      if (m.to === 'needs_review' && m.review_reason) detail.review_reason = m.review_reason;
      const event = chainEvent(
        m.head ?? heads.get(m.id)!,
        {
          operation_id: m.id,
          at: o.now,
          actor: o.actor,
          kind: m.kind,
          from_state: from,
          to_state: m.to ?? from,
          rule: m.rule,
          detail,
        },
        o.auditKey,
      );
      const noted = m.note
        ? chainEvent(
            event,
            {
              operation_id: m.id,
              at: o.now,
              actor: o.actor,
              kind: m.note.kind,
              from_state: event.to_state,
              to_state: event.to_state,
              rule: null,
              detail: m.note.detail,
            },
            o.auditKey,
          )
        : null;
      rows.push({ i, m, from, event, noted });
    } catch (err) {
      results[i] = { ok: false, error: err as Error };
    }
  });
  if (rows.length === 0) return results;
  const written = await writeMoves(q, rows, o);
  for (const { i, m, event, noted } of rows) {
    const w = written.get(m.id);
    if (w?.row) {
      results[i] = {
        ok: true,
        event,
        ...(noted ? { noted } : {}),
        ...(o.returnRows ? { op: rowToOperation(w.row) } : {}),
      };
      continue;
    }
    try {
      assertMove(w?.locked, m, o.now);
      // Its row or its audit chain is not the one read (another version, another head).
      if (m.attempt?.rowVersion !== undefined)
        throw new RefusedError(
          `operation ${m.id} was changed in the store since it was read; not claimed`,
          'state_machine',
        );
      throw new Error(`operation ${m.id}: decision not written`);
    } catch (err) {
      results[i] = { ok: false, error: err as Error };
    }
  }
  return results;
}

/** Which parts of the move statement a call needs: each part left out is a CTE PostgreSQL does not plan. */
interface MovesShape {
  returnRows: boolean;
  observations: boolean;
  links: boolean;
  notes: boolean;
  attempts: boolean;
  attemptEnds: boolean;
}

/**
 * The moves in one statement: one round trip and one commit whatever their number, one UPDATE per
 * operation (state, last_checked_at and the lease together; three updates of the row before, none
 * of them HOT: npm run bench, write-path and claims). It re-checks each operation under its row
 * lock (FOR UPDATE, in id order) and writes only those that pass: the lease unexpired when one is
 * required, and the state the caller saw. The others are returned with what the lock found.
 *
 * The observations', links', notes' and attempts' parts are in the statement only when some move has one:
 * an unnamed statement is planned at every execution (behind a transaction-mode pooler, or on
 * PGlite), and planning it with all of them took 0.7 ms where a move with none takes 0.23 ms
 * (EXPLAIN's planning time, median of 30). Each shape is kept (keepPlan): on sessions of recon's own,
 * parsed and planned once per session; so its plans must stay good for any values and any table
 * size, whence the operations locked by a lookup per id and updated by the join alone
 * (test/integration/kept-plans.test.ts). Parameters: $1–$23 the moves, then the links' nine, the notes' eight, the attempts' five, the
 * attempt ends' five: each group only in the shapes that have its part.
 */
const WRITE_MOVES = (s: MovesShape) => {
  const link = placeholders(s, 'links');
  const note = placeholders(s, 'notes');
  const attempt = placeholders(s, 'attempts');
  const attemptEnd = placeholders(s, 'attemptEnds');
  return `
WITH u AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[], $5::text[], $6::text[], $7::text[],
                       $8::boolean[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::text[], ${jsonbArraySql(13)},
                       $14::int[], $15::text[], $16::text[], ${jsonbArraySql(17)}, $18::text[], $19::text[],
                       $22::timestamptz[], $23::text[])
    AS u(id, from_state, to_state, terminal, review_reason, assignee, lease_check, keep_lease, lease_owner,
         lease_expires_at, next_check_at, result, observation, seq, kind, rule, detail, prev_hash, hash, observed_at,
         key_id)
),
locked AS (
  SELECT l.id, l.state, l.lease_owner, l.lease_expires_at${s.attempts ? ', l.version' : ''}
    FROM (SELECT DISTINCT id FROM unnest($1::text[]) AS i(id) ORDER BY id) AS i
   CROSS JOIN LATERAL (SELECT id, state, lease_owner, lease_expires_at${s.attempts ? ', xmin::text AS version' : ''}
                         FROM recon.operations WHERE id = i.id FOR UPDATE) AS l
),
ok AS (
  SELECT u.* FROM u JOIN locked l ON l.id = u.id
   WHERE l.state = u.from_state
     AND (u.lease_check IS NULL OR (l.lease_owner = u.lease_check AND l.lease_expires_at > $20::timestamptz))${
       s.attempts
         ? `
     AND NOT EXISTS (SELECT 1 FROM unnest(${attempt(0)}::text[], ${attempt(4)}::text[]) AS v(id, version)
                      WHERE v.id = u.id AND v.version IS NOT NULL
                        AND (v.version IS DISTINCT FROM l.version
                             -- A scalar subquery (one lookup by the key), not a join the planner may scan for.
                             OR (SELECT e.hash FROM recon.audit_events e
                                  WHERE e.operation_id = u.id AND e.seq = u.seq - 1) IS DISTINCT FROM u.prev_hash))`
         : ''
     }
),${
    s.observations
      ? `
observed AS (
  ${insertObservationsSql('SELECT id, coalesce(observed_at, $20::timestamptz), result, observation FROM ok WHERE result IS NOT NULL')}
),`
      : ''
  }${
    s.links
      ? `
links AS (
  SELECT x.* FROM unnest(${link(0)}::text[], ${link(1)}::text[], ${link(2)}::text[], ${link(3)}::text[], ${link(4)}::text[],
                         ${link(5)}::bigint[], ${link(6)}::text[], ${link(7)}::timestamptz[], ${link(8)}::text[])
           AS x(operation_id, provider, provider_id, status, state, amount, currency, created, linked_via)
   WHERE x.operation_id IN (SELECT id FROM ok)
),
linked AS (
  ${insertLinksSql(`
  SELECT provider, provider_id, operation_id, status, state, amount, currency, linked_via, $20::timestamptz, $21::text,
         created
    FROM links`)}
  RETURNING 1
),`
      : ''
  }${
    s.attempts
      ? `
attempt AS (
  SELECT a.* FROM unnest(${attempt(0)}::text[], ${attempt(1)}::int[], ${attempt(2)}::text[], ${attempt(3)}::text[])
           AS a(operation_id, number, idempotency_key, request_hash)
   WHERE a.operation_id IN (SELECT id FROM ok)
),
attempted AS (
  INSERT INTO recon.attempts (operation_id, number, idempotency_key, request_hash, started_at, lease_owner)
  SELECT a.operation_id, a.number, a.idempotency_key, a.request_hash, $20::timestamptz, ok.lease_owner
    FROM attempt a JOIN ok ON ok.id = a.operation_id
),`
      : ''
  }${
    s.attemptEnds
      ? `
attempt_ended AS (
  UPDATE recon.attempts t
     SET ended_at = $20::timestamptz, outcome = e.outcome, error_class = e.error_class,
         provider_request_id = e.provider_request_id
    FROM unnest(${attemptEnd(0)}::text[], ${attemptEnd(1)}::int[], ${attemptEnd(2)}::text[], ${attemptEnd(3)}::text[],
                ${attemptEnd(4)}::text[]) AS e(operation_id, number, outcome, error_class, provider_request_id)
   WHERE t.operation_id = e.operation_id AND t.number = e.number AND e.operation_id IN (SELECT id FROM ok)
),`
      : ''
  }
updated AS (
  UPDATE recon.operations o
     SET state = coalesce(ok.to_state, o.state),
         updated_at = CASE WHEN ok.to_state IS NULL THEN o.updated_at ELSE $20::timestamptz END,
         resolved_at = CASE WHEN ok.to_state IS NULL THEN o.resolved_at WHEN ok.terminal THEN $20::timestamptz END,
         review_reason = CASE WHEN ok.to_state = 'needs_review' THEN coalesce(ok.review_reason, o.review_reason)
                              ELSE o.review_reason END,
         assignee = coalesce(ok.assignee, o.assignee),
         lease_owner = CASE WHEN ok.keep_lease THEN o.lease_owner ELSE ok.lease_owner END,
         lease_expires_at = CASE WHEN ok.keep_lease THEN o.lease_expires_at ELSE ok.lease_expires_at END,
         next_check_at = CASE WHEN ok.to_state IS NULL THEN coalesce(ok.next_check_at, o.next_check_at) END,
         last_checked_at = CASE WHEN ok.result IS NULL THEN o.last_checked_at
                                ELSE greatest(o.last_checked_at, $20::timestamptz) END${
                                  s.attempts
                                    ? `,
         attempt_count = coalesce((SELECT a.number FROM attempt a WHERE a.operation_id = o.id), o.attempt_count),
         first_attempt_at = CASE WHEN o.id IN (SELECT operation_id FROM attempt)
                                 THEN coalesce(o.first_attempt_at, $20::timestamptz) ELSE o.first_attempt_at END`
                                    : ''
                                }
    FROM ok
   WHERE o.id = ok.id
  RETURNING ${s.returnRows ? operationColumns('o') : 'o.id'}
),
appended AS (
  ${insertEventsSql(`
  SELECT id, seq, $20::timestamptz, $21::text, kind, from_state, coalesce(to_state, from_state), rule, detail, prev_hash,
         hash, key_id
    FROM ok${
      s.notes
        ? `
  UNION ALL
  SELECT n.id, n.seq, $20::timestamptz, $21::text, n.kind, n.state, n.state, NULL, n.detail, n.prev_hash, n.hash, n.key_id
    FROM unnest(${note(0)}::text[], ${note(1)}::int[], ${note(2)}::text[], ${note(3)}::text[], ${note(4)}::jsonb[],
                ${note(5)}::text[], ${note(6)}::text[], ${note(7)}::text[])
         AS n(id, seq, kind, state, detail, prev_hash, hash, key_id)
   WHERE n.id IN (SELECT id FROM ok)`
        : ''
    }`)}
)
SELECT l.id AS locked_id, l.state AS locked_state, l.lease_owner AS locked_lease_owner,
       l.lease_expires_at AS locked_lease_expires_at, up.id IS NOT NULL AS written,${
         s.links
           ? `
       -- Aborts the statement (division by zero) unless every link was made.
       1 / (CASE WHEN (SELECT count(*) FROM linked) = (SELECT count(*) FROM links) THEN 1 ELSE 0 END) AS links_made,`
           : ''
       }
       up.*
  FROM locked l LEFT JOIN updated up ON up.id = l.id`;
};

/** The optional parts' parameters, in the order writeMoves pushes them after the moves' $1–$23. */
const PART_PARAMS = [
  ['links', 9],
  ['notes', 8],
  ['attempts', 5],
  ['attemptEnds', 5],
] as const;

/** `$n` of a part's k-th parameter in shape `s`: after the moves' and those of the earlier parts it has. */
function placeholders(s: MovesShape, part: (typeof PART_PARAMS)[number][0]): (k: number) => string {
  let first = 24;
  for (const [name, count] of PART_PARAMS) {
    if (name === part) break;
    if (s[name]) first += count;
  }
  return (k) => `$${first + k}`;
}

/** Each shape's statement, built once. */
const movesSql = new Map<string, string>();
function writeMovesSql(s: MovesShape): string {
  const key = `${+s.returnRows}${+s.observations}${+s.links}${+s.notes}${+s.attempts}${+s.attemptEnds}`;
  let sql = movesSql.get(key);
  if (sql === undefined) movesSql.set(key, (sql = keepPlan(WRITE_MOVES(s))));
  return sql;
}

type WrittenRow = OperationRow & {
  locked_id: string;
  locked_state: State;
  locked_lease_owner: string | null;
  locked_lease_expires_at: Date | string | null;
  written: boolean;
};

async function writeMoves(
  q: Queryable,
  rows: { m: Move; from: State; event: AuditEvent; noted: AuditEvent | null }[],
  o: { actor: string; now: Date; returnRows?: boolean },
): Promise<Map<string, { locked: Locked; row: OperationRow | null }>> {
  const links = rows.flatMap(({ m }) => (m.links ?? []).map((l) => ({ id: m.id, ...l })));
  const notes = rows.flatMap(({ noted }) => (noted ? [noted] : []));
  const lease = (m: Move) => (m.lease === 'keep' || m.lease === 'release' || !m.lease ? null : m.lease);
  const shape: MovesShape = {
    returnRows: Boolean(o.returnRows),
    observations: rows.some(({ m }) => m.observation),
    links: links.length > 0,
    notes: notes.length > 0,
    attempts: rows.some(({ m }) => m.attempt),
    attemptEnds: rows.some(({ m }) => m.attemptEnd),
  };
  const texts = (values: (string | null)[]) => textArrayParam(values);
  const jsonTexts = (values: (string | null)[]) => textArrayParam(values, { jsonTexts: true });
  const params: unknown[] = [
    texts(rows.map(({ m }) => m.id)),
    texts(rows.map(({ from }) => from)),
    texts(rows.map(({ m }) => m.to ?? null)),
    rows.map(({ m }) => (m.to === undefined ? false : isTerminal(m.to))),
    texts(rows.map(({ m }) => m.review_reason ?? null)),
    texts(rows.map(({ m }) => m.assignee ?? null)),
    texts(rows.map(({ m }) => m.leaseOwner ?? null)),
    rows.map(({ m }) => m.lease === 'keep'),
    texts(rows.map(({ m }) => lease(m)?.owner ?? null)),
    texts(rows.map(({ m }) => lease(m)?.expiresAt.toISOString() ?? null)),
    texts(rows.map(({ m }) => m.nextCheckAt?.toISOString() ?? null)),
    texts(rows.map(({ m }) => m.observation?.result ?? null)),
    JSON.stringify(rows.map(({ m }) => m.observation?.detail ?? null)),
    rows.map(({ event }) => event.seq),
    texts(rows.map(({ event }) => event.kind)),
    texts(rows.map(({ event }) => event.rule)),
    JSON.stringify(rows.map(({ event }) => event.detail)),
    texts(rows.map(({ event }) => event.prev_hash)),
    texts(rows.map(({ event }) => event.hash)),
    o.now.toISOString(),
    o.actor,
    texts(rows.map(({ m }) => m.observation?.at?.toISOString() ?? null)),
    texts(rows.map(({ event }) => event.key_id)),
  ];
  if (shape.links)
    params.push(
      texts(links.map((l) => l.id)),
      texts(links.map((l) => l.provider)),
      texts(links.map((l) => l.txn.provider_id)),
      texts(links.map((l) => l.txn.status)),
      texts(links.map((l) => l.txn.state)),
      links.map((l) => l.txn.amount),
      texts(links.map((l) => l.txn.currency)),
      texts(links.map((l) => (l.txn.created ? l.txn.created.toISOString() : null))),
      texts(links.map((l) => l.via)),
    );
  if (shape.notes)
    params.push(
      notes.map((e) => e.operation_id),
      notes.map((e) => e.seq),
      notes.map((e) => e.kind),
      notes.map((e) => e.to_state),
      jsonTexts(notes.map((e) => JSON.stringify(e.detail))),
      notes.map((e) => e.prev_hash),
      notes.map((e) => e.hash),
      notes.map((e) => e.key_id),
    );
  if (shape.attempts) {
    const begun = rows.flatMap(({ m }) => (m.attempt ? [{ id: m.id, ...m.attempt }] : []));
    params.push(
      begun.map((a) => a.id),
      begun.map((a) => a.number),
      begun.map((a) => a.idempotencyKey),
      begun.map((a) => a.requestHash),
      begun.map((a) => a.rowVersion ?? null),
    );
  }
  if (shape.attemptEnds) {
    const ended = rows.flatMap(({ m }) => (m.attemptEnd ? [{ id: m.id, ...m.attemptEnd }] : []));
    params.push(
      ended.map((a) => a.id),
      ended.map((a) => a.number),
      ended.map((a) => a.outcome),
      ended.map((a) => a.errorClass),
      ended.map((a) => a.providerRequestId),
    );
  }
  const r = await q.query<WrittenRow>(writeMovesSql(shape), params);
  const out = new Map<string, { locked: Locked; row: OperationRow | null }>();
  for (const row of r.rows) {
    out.set(row.locked_id, {
      locked: {
        id: row.locked_id,
        state: row.locked_state,
        lease_owner: row.locked_lease_owner,
        lease_expires_at: row.locked_lease_expires_at === null ? null : new Date(row.locked_lease_expires_at),
      },
      row: row.written ? row : null,
    });
  }
  return out;
}
