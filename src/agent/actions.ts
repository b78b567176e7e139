/**
 * What each agent-facing verb does, for the MCP tools and `openRecon()` alike: propose, execute,
 * check, status, list. Each returns an Answer (the result document and whether it is a refusal);
 * the tools wrap it as a tool result, the library returns it. Every call is audited as an
 * `mcp.call`-style event in the transaction of the change it describes, or on its own when it
 * changed nothing.
 */
import { approvalByPolicy } from '../core/intake/approve.js';
import { payloadHash } from '../lib/canonical.js';
import type { CoreContext } from '../core/journal/context.js';
import {
  attemptsOf,
  countOperations,
  listOperations,
  lockOperation,
  txnIdsByOperation,
} from '../core/journal/operations.js';
import { reconcileById } from '../core/reconcile/reconcile.js';
import { recordOperationsIn, type WrittenOperation } from '../core/intake/record.js';
import { heldText, holderOf } from '../core/intake/replan.js';
import { isInFlight, isReconcilable } from '../core/journal/states.js';
import { noteOnHead } from '../core/journal/note.js';
import type { ChainHead } from '../core/journal/chain.js';
import { readForClaim, type ClaimView } from '../core/attempt/claims.js';
import { submitOperation } from '../core/attempt/submit.js';
import { validateOperation, type OperationInput } from '../core/intake/validate.js';
import { NotFoundError, RefusedError, UsageError } from '../errors.js';
import { validatePayloads } from '../providers/validate.js';
import type { Db } from '../store/db.js';
import { STATES, UNRESOLVED_STATES, type Operation, type Provider, type State } from '../types.js';
import { auditCall, auditCallIn, MCP_CALL } from './audit.js';
import { alreadyHappened, frozenText, heldMessage, retryAfter, waitText } from './answers.js';
import { currentOperation, type ToolCall } from './context.js';
import { keepJustRecorded, takeJustRecorded } from './just-recorded.js';
import { describeState, forAgent, notRecorded, refusal, type ActionResult } from './result.js';

export interface Answer<T extends Record<string, unknown> = ActionResult & Record<string, unknown>> {
  result: T;
  isError: boolean;
}

const ok = <T extends Record<string, unknown>>(result: T): Answer<T> => ({ result, isError: false });
const refused = <T extends Record<string, unknown>>(result: T): Answer<T> => ({ result, isError: true });

/** What propose takes, as the tool's input schema and `act()` give it. */
export interface ProposeInput {
  provider: string;
  action: string;
  operation_id: string;
  payload: Record<string, unknown>;
  client_reference?: string;
  subject?: Record<string, unknown>;
  reason?: string;
  /** A person's approval reference (the library's `act({approval})`); never from an agent. */
  approval?: string;
}

/**
 * The call's context with a store whose first transaction also writes the call's audit event
 * (before it commits): a crash after the change cannot lose the record of who asked for it.
 * `audited()` says whether it was written; if not, the caller writes it on its own. Its detail says
 * `in_change: true`: the events just before it in the chain (attempt.started, a decision) are that change.
 *
 * `take()` hands the event to the statement that makes the change (Move.note: chained after the
 * move's event and inserted with it, no chain head to read again): inside a transaction it counts
 * as written once that transaction commits (a rolled-back claim leaves it to the caller); outside
 * one (a reconciliation decision, one statement) at once, as a failed decision fails the call.
 */
function auditedInChange(c: ToolCall, id: string, detail: { tool: string } & Record<string, unknown>) {
  const inner = c.ctx.db;
  let audited = false;
  let inTransaction = false;
  let taken = false;
  const db: Db = {
    kind: inner.kind,
    displayUrl: inner.displayUrl,
    query: (sql, params) => inner.query(sql, params),
    async transaction(fn) {
      if (audited) return inner.transaction(fn);
      inTransaction = true;
      taken = false;
      try {
        const r = await inner.transaction(async (tx) => {
          const v = await fn(tx);
          // Every change the tools make through the core (a claim, a decision, an expired lease) locks
          // the operation's row first, and the lock is held until this transaction ends.
          if (!taken) await auditCallIn(tx, c.ctx, [id], detail, { locked: true });
          return v;
        });
        audited = true;
        return r;
      } finally {
        inTransaction = false;
        taken = false;
      }
    },
    ...(inner.sharesSessions ? { sharesSessions: () => inner.sharesSessions!() } : {}),
    close: () => inner.close(),
  };
  const ctx: CoreContext = { ...c.ctx, db };
  let takenAlone = false;
  const take = (): { kind: string; detail: Record<string, unknown> } | undefined => {
    if (audited || taken) return undefined;
    if (inTransaction) taken = true;
    else audited = takenAlone = true;
    return { kind: MCP_CALL, detail };
  };
  /**
   * The statement `take()` gave the event to outside a transaction wrote nothing and the call goes on
   * (a claim on the operation as read, which the long way then decides: claimAttempt's
   * `noteUnwritten`): the event is to be written again, with the long way's change or on its own.
   */
  const untake = () => {
    if (takenAlone) audited = takenAlone = false;
  };
  return { ctx, audited: () => audited, take, untake };
}

function providerNames(c: ToolCall): string[] {
  return [...Object.keys(c.agent.config.providers), ...Object.keys(c.agent.config.unavailable ?? {})];
}

export async function propose(c: ToolCall, args: ProposeInput): Promise<Answer> {
  const id = args.operation_id;
  let op;
  try {
    op = validateOperation(
      {
        id,
        provider: args.provider,
        action: args.action,
        payload: args.payload,
        client_reference: args.client_reference,
        subject: args.subject,
        ...(args.approval !== undefined ? { approval: args.approval } : {}),
      },
      providerNames(c),
    );
    // What the provider could never send is refused now, as `recon ops record` does.
    await validatePayloads(c.agent.config, [op]);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    return invalidInput(c, 'propose_action', id, fieldOf(err.message), err.message, args.reason);
  }
  const provider = c.agent.config.providers[op.provider];
  const policy = op.approval ? null : approvalByPolicy(provider?.autoApprove, op);
  const detail = { tool: 'propose_action', reason: args.reason ?? null };
  try {
    const { created, holder, recorded, written } = await c.ctx.db.transaction(async (tx) => {
      // The re-plan guard: decided under a lock on the target, so two proposals at once see each other.
      const holder = policy ? await holderOf(tx, op, provider?.type, { lock: true }) : null;
      const input = { ...op, approval: op.approval ?? (holder ? null : policy) };
      const held = holder ? { held_by: holder } : {};
      // A new operation's mcp.call event goes in with its `recorded` event (one statement, no chain to read).
      const wrote = new Map<string, WrittenOperation>();
      const [r] = await recordOperationsIn(tx, c.ctx, [input], {
        noteCreated: { kind: MCP_CALL, detail: { ...detail, created: true, ...held } },
        written: wrote,
      });
      if (holder && r.created)
        await tx.query('UPDATE recon.operations SET review_reason = $2 WHERE id = $1', [op.id, heldText(holder)]);
      if (!r.created) await auditCallIn(tx, c.ctx, [op.id], { ...detail, created: false, ...held });
      const recorded = r.created ? justRecorded(input, holder ? heldText(holder) : null, c.ctx.now()) : null;
      return { created: r.created, holder: r.created ? holder : null, recorded, written: wrote.get(op.id) };
    });
    // Committed: the next execute_action claims on this write (just-recorded.ts).
    if (recorded?.state === 'approved' && written)
      keepJustRecorded(c.agent, {
        op: recorded,
        recorded: recorded.payload_hash,
        head: written.head,
        transactions: [],
        version: written.version,
      });
    // What this transaction wrote is known; an operation that was there already is read as it is now.
    const now = recorded ? { op: recorded, txnIds: [] } : (await currentOperation(c.ctx.db, op.id))!;
    const extra = { created, approval: now.op.approval, amount: now.op.amount, currency: now.op.currency };
    const heldBy = holder ?? heldFrom(now.op);
    if (heldBy && now.op.state === 'proposed') {
      const h = await currentOperation(c.ctx.db, heldBy.id);
      return ok({
        ...describeState(now.op, now.txnIds),
        message: heldMessage(now.op, heldBy, h?.op ?? null, h?.txnIds ?? []),
        held_by: { operation_id: heldBy.id, state: h?.op.state ?? heldBy.state },
        ...extra,
      });
    }
    return ok({ ...describeState(now.op, now.txnIds), ...extra });
  } catch (err) {
    if (!(err instanceof RefusedError) || err.rule !== 'payload_frozen') throw err;
    const existing = await currentOperation(c.ctx.db, op.id);
    await auditCall(c.ctx, [op.id], {
      ...detail,
      refused: 'payload_frozen',
      proposed: { provider: op.provider, action: op.action, amount: op.amount, currency: op.currency },
    });
    const e = existing?.op ?? null;
    const changed = !e
      ? 'payload'
      : e.provider !== op.provider || e.action !== op.action
        ? 'provider or action'
        : e.payload_hash !== payloadHash(op.payload)
          ? 'amount or payload'
          : e.client_reference !== op.client_reference
            ? 'client_reference'
            : 'subject';
    const reason = e ? frozenText(e, existing!.txnIds, changed) : `Refused: ${err.message}`;
    const done = e ? alreadyHappened(e, existing!.txnIds) !== null : false;
    return refused({
      ...refusal(op.id, e, existing?.txnIds ?? [], 'payload_frozen', reason, done ? 'none' : 'get_action'),
      amount: e?.amount ?? null,
      currency: e?.currency ?? null,
    });
  }
}

/** The operation as recordOperationsIn has just inserted it (its row, without reading it back). */
function justRecorded(input: OperationInput, reviewReason: string | null, at: Date): Operation {
  return {
    ...input,
    payload_hash: payloadHash(input.payload),
    state: input.approval ? 'approved' : 'proposed',
    attempt_count: 0,
    created_at: at,
    updated_at: at,
    first_attempt_at: null,
    resolved_at: null,
    lease_owner: null,
    lease_expires_at: null,
    review_reason: reviewReason,
    assignee: null,
  };
}

/** A proposal held by the guard keeps saying so when proposed again (review_reason "held: same target as X (state)"). */
function heldFrom(op: Operation): { id: string; state: State } | null {
  const m = /^held: same target as (\S+) \((\w+)\)$/.exec(op.review_reason ?? '');
  return m && (STATES as readonly string[]).includes(m[2]) ? { id: m[1], state: m[2] as State } : null;
}

/** The field a validation message names first ("payload.amount: …" → "payload.amount"). */
function fieldOf(message: string): string {
  const m = /^([A-Za-z_][\w.[\]-]*):/.exec(message);
  return m ? m[1] : 'input';
}

/** Input refused before anything is recorded: `refused: {rule: "invalid_input", field}`. */
export async function invalidInput(
  c: ToolCall,
  tool: string,
  id: string | undefined,
  field: string,
  message: string,
  reason?: unknown,
): Promise<Answer> {
  const existing = id ? await currentOperation(c.ctx.db, id) : null;
  if (existing && id)
    await auditCall(c.ctx, [id], {
      tool,
      refused: 'invalid_input',
      field,
      reason: typeof reason === 'string' ? reason : null,
    });
  const text = `Refused: ${message}. Nothing was recorded or sent; fix the input and call ${tool} again.`;
  const r = refusal(id ?? '', existing?.op ?? null, existing?.txnIds ?? [], 'invalid_input', text, 'none');
  return refused({ ...r, refused: { rule: 'invalid_input', reason: text, field } });
}

/**
 * The operation's provider, or the refusal an agent gets when this server cannot use it (a missing
 * key, an unknown provider): audited, `next: none`, never an invitation to try again.
 */
async function providerOrRefusal(
  c: ToolCall,
  id: string,
  op: Operation,
  txnIds: string[],
  o: { audit: { tool: string } & Record<string, unknown>; words: string },
): Promise<Provider | Answer> {
  try {
    return await c.agent.provider(op.provider);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    await auditCall(c.ctx, [id], { ...o.audit, refused: 'provider_not_configured' });
    return refused(
      refusal(
        id,
        op,
        txnIds,
        'provider_not_configured',
        `Refused: provider ${op.provider} is not usable by this recon server (${err.message})${o.words}`,
        'none',
      ),
    );
  }
}

/** execute_action's answer for an operation that is not recorded: nothing was sent. */
const nothingToExecute = (id: string) =>
  refused(
    notRecorded(
      id,
      `Refused: no operation ${id} is recorded, so nothing was sent. Record it first with propose_action.`,
    ),
  );

/**
 * The view propose_action kept of `id` (just-recorded.ts), when its provider is usable here: it is
 * approved and never attempted, so the call goes straight to its claim, which the row's version
 * guards. Any other answer (a refusal that names the state) is made on a read.
 */
async function justRecordedUsable(c: ToolCall, id: string): Promise<ClaimView | undefined> {
  const view = takeJustRecorded(c.agent, id);
  if (!view) return undefined;
  return c.agent.provider(view.op.provider).then(
    () => view,
    () => undefined,
  );
}

export async function execute(c: ToolCall, id: string): Promise<Answer> {
  // The operation as a claim checks it (its chain's head, its links): the claim is made on this read,
  // or on propose_action's write of it when this server has just recorded it approved (just-recorded.ts).
  const seen = (await justRecordedUsable(c, id)) ?? (await readForClaim(c.ctx.db, id));
  const found = seen && { op: seen.op, txnIds: seen.transactions.map((t) => t.provider_id), head: seen.head };
  if (!found) return nothingToExecute(id);
  const { op, txnIds } = found;
  if (op.state === 'proposed') {
    await auditCall(c.ctx, [id], { tool: 'execute_action', sent: false, refused: 'approval_required' });
    const held = op.review_reason?.startsWith('held:') ? ` It is ${op.review_reason}.` : '';
    return refused(
      refusal(
        id,
        op,
        txnIds,
        'approval_required',
        `Refused: ${id} waits for a person to approve it (recon ops approve ${id} --ref REF); nothing was sent.${held} ` +
          'Tell the user it needs approval, and ask again with get_action later.',
        'get_action',
      ),
    );
  }
  if (op.state !== 'approved' || op.attempt_count > 0) return secondClick(c, id, found);
  const provider = await providerOrRefusal(c, id, op, txnIds, {
    audit: { tool: 'execute_action', sent: false },
    words: '; nothing was sent. Tell the user; an operator must fix the configuration.',
  });
  if (!('submit' in provider)) return provider;
  // The claim (approved → submitting, the attempt row) is the change this call makes: its event goes with it.
  const call = auditedInChange(c, id, { tool: 'execute_action', in_change: true });
  let submitted;
  try {
    submitted = await submitOperation(call.ctx, provider, id, { note: call.take, noteUnwritten: call.untake, seen });
  } catch (err) {
    if (err instanceof UsageError) {
      // The adapter refused the payload before sending anything; the claim was rolled back.
      if (!call.audited())
        await auditCall(c.ctx, [id], { tool: 'execute_action', sent: false, refused: 'invalid_payload' });
      const now = (await currentOperation(c.ctx.db, id))!;
      return refused(
        refusal(
          id,
          now.op,
          now.txnIds,
          'invalid_payload',
          `Refused: ${err.message}. Nothing was sent. This action cannot be sent as recorded; tell the user.`,
          'none',
        ),
      );
    }
    // Gone since the view propose_action kept of it (a store restored, a row deleted): as if never recorded.
    if (err instanceof NotFoundError) return nothingToExecute(id);
    // Another call claimed it first (two clients, one click each): theirs is the attempt.
    // (Or the payload no longer matches its hash: then it is needs_review, and the state says so.)
    if (!(err instanceof RefusedError)) throw err;
    return secondClick(c, id, (await currentOperation(c.ctx.db, id))!, call.audited());
  }
  if (!call.audited()) await auditCall(c.ctx, [id], { tool: 'execute_action', sent: true, attempt: submitted.attempt });
  // The row and the links as the attempt's result wrote them; a late response is read again.
  const after = submitted.txnIds
    ? { op: submitted.operation, txnIds: submitted.txnIds }
    : (await currentOperation(c.ctx.db, id))!;
  return ok({
    ...describeState(after.op, after.txnIds),
    sent: true,
    attempt: submitted.attempt,
    attempt_count: after.op.attempt_count,
  });
}

/**
 * The `mcp.call` event of a call that changed nothing, and the operation as it stands under that
 * event's row lock: `found` (read at the start of the call) when the row has not moved since, with
 * the fresh row; else read again. One statement when `found` has its chain's head and nothing was
 * appended since (noteOnHead: the lock and the event), else one transaction (lock, chain head, event).
 */
async function auditUnchanged(
  c: ToolCall,
  found: { op: Operation; txnIds: string[]; head?: ChainHead },
  detail: { tool: string } & Record<string, unknown>,
): Promise<{ op: Operation; txnIds: string[] }> {
  const id = found.op.id;
  const noted =
    found.head &&
    (await noteOnHead(c.ctx.db, id, found.head, {
      actor: c.ctx.actor,
      auditKey: c.ctx.auditKey,
      now: c.ctx.now(),
      kind: MCP_CALL,
      detail,
    }));
  const locked =
    noted?.op ??
    (await c.ctx.db.transaction(async (tx) => {
      const op = await lockOperation(tx, id);
      await auditCallIn(tx, c.ctx, [id], detail, { locked: true });
      return op;
    }));
  const moved =
    locked.state !== found.op.state ||
    locked.updated_at.getTime() !== found.op.updated_at.getTime() ||
    locked.attempt_count !== found.op.attempt_count;
  return moved ? ((await currentOperation(c.ctx.db, id)) ?? found) : { op: locked, txnIds: found.txnIds };
}

/** The second click: nothing is sent; the answer is the state. */
async function secondClick(
  c: ToolCall,
  id: string,
  found: { op: Operation; txnIds: string[]; head?: ChainHead },
  audited = false,
): Promise<Answer> {
  const now = audited
    ? ((await currentOperation(c.ctx.db, id)) ?? found)
    : await auditUnchanged(c, found, {
        tool: 'execute_action',
        sent: false,
        already_attempted: found.op.attempt_count > 0,
      });
  return ok({ ...describeState(now.op, now.txnIds), sent: false, attempt_count: now.op.attempt_count });
}

export async function check(c: ToolCall, id: string): Promise<Answer> {
  const found = await currentOperation(c.ctx.db, id);
  if (!found) return refused(notRecorded(id, `No operation ${id} is recorded; nothing to check.`));
  const now0 = c.ctx.now();
  const inFlight = isInFlight(found.op, now0);
  let decision = null;
  const call = auditedInChange(c, id, { tool: 'check_action', checked: true, in_change: true });
  if (isReconcilable(found.op.state) && !inFlight) {
    const provider = await providerOrRefusal(c, id, found.op, found.txnIds, {
      audit: { tool: 'check_action', checked: false },
      words: '. Do not try the action again; tell the user an operator must fix the configuration.',
    });
    if (!('submit' in provider)) return provider;
    // null: another worker (recon run, another agent) holds it right now; its answer is the one to wait for.
    // The decision is one statement, not a transaction of the wrapped store: the call's event goes in it.
    decision = await reconcileById(call.ctx, provider, id, { note: call.take });
  }
  // A decision was written with the call's event (or an expired lease's move before it was); else nothing changed.
  const now = call.audited()
    ? (await currentOperation(c.ctx.db, id))!
    : await auditUnchanged(c, found, { tool: 'check_action', checked: false, rule: null });
  const explanation = forAgent(decision?.explanation, now.op.state);
  const base = describeState(now.op, now.txnIds);
  // A result that must wait says until when: the rule's window, or the lease of whoever holds it now.
  const until = decision?.retry_at
    ? new Date(decision.retry_at)
    : !decision && isInFlight(now.op, c.ctx.now()) && now.op.lease_expires_at
      ? now.op.lease_expires_at
      : null;
  const after = until && now.op.state !== 'confirmed' ? retryAfter(until, c.ctx.now()) : null;
  return ok({
    ...base,
    ...(after && now.op.state === 'outcome_unknown' ? { message: waitText(id, after) } : {}),
    ...(after ? { retry_after: after } : {}),
    checked: decision !== null,
    decision: decision && {
      decision: decision.decision,
      rule: decision.rule,
      ...(explanation ? { explanation } : {}),
    },
  });
}

export async function status(c: ToolCall, id: string): Promise<Answer> {
  const found = await currentOperation(c.ctx.db, id);
  if (!found)
    return refused(
      notRecorded(id, `No operation ${id} is recorded. If you meant to do it, record it with propose_action.`),
    );
  const { op, txnIds } = await auditUnchanged(c, found, { tool: 'get_action' });
  const attempts = await attemptsOf(c.ctx.db, id);
  return ok({
    ...describeState(op, txnIds),
    provider: op.provider,
    action: op.action,
    amount: op.amount,
    currency: op.currency,
    client_reference: op.client_reference,
    approval: op.approval,
    attempts: attempts.map((a) => ({
      number: a.number,
      started_at: a.started_at.toISOString(),
      ended_at: a.ended_at?.toISOString() ?? null,
      outcome: a.outcome,
    })),
    created_at: op.created_at.toISOString(),
    updated_at: op.updated_at.toISOString(),
  });
}

/** States list_open_actions shows by default: unresolved, and those waiting for a person or a send. */
const OPEN_STATES: State[] = ['proposed', 'approved', ...UNRESOLVED_STATES];

export interface ListInput {
  client_reference?: string;
  include_resolved?: boolean;
  limit?: number;
}

export async function listOpen(c: ToolCall, args: ListInput) {
  const ref = args.client_reference;
  const all = Boolean(args.include_resolved);
  const filter = { states: all && ref ? [] : OPEN_STATES, clientReference: ref };
  const ops = await listOperations(c.ctx.db, { ...filter, limit: args.limit ?? 20 });
  const total = await countOperations(c.ctx.db, filter);
  // The call is recorded on each operation it showed: the agent was told about these.
  await auditCall(
    c.ctx,
    ops.map((o) => o.id),
    { tool: 'list_open_actions', client_reference: ref ?? null, include_resolved: all },
  );
  const txns = await txnIdsByOperation(
    c.ctx.db,
    ops.map((o) => o.id),
  );
  const actions = ops.map((o) => ({
    ...describeState(o, txns.get(o.id) ?? []),
    amount: o.amount,
    currency: o.currency,
    client_reference: o.client_reference,
    waits_for_person: o.state === 'proposed' || o.state === 'needs_review',
  }));
  const waiting = actions.filter((a) => a.waits_for_person).length;
  const done = actions.filter((a) => HAPPENED.includes(a.state!)).length;
  const scope = all && ref ? `for ${ref}` : 'unfinished';
  const message =
    ops.length === 0
      ? all && ref
        ? `No operation is recorded for ${ref}.`
        : 'No unfinished actions.'
      : `${total} action(s) ${scope}${total > ops.length ? `, showing ${ops.length}` : ''}` +
        (waiting ? `; ${waiting} wait(s) for a person (waits_for_person)` : '') +
        (done ? `; ${done} already happened or may have` : '') +
        '. Do not repeat any of them under any operation_id; ask about each with get_action or check_action.';
  const anyCheckable = actions.some((a) => a.next === 'check_action');
  return ok({ actions, total, message, next: anyCheckable ? ('check_action' as const) : ('none' as const) });
}

const HAPPENED: readonly State[] = ['submitting', 'pending', 'outcome_unknown', 'confirmed'];
