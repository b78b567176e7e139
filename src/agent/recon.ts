/**
 * recon for an application in one call (SPEC §9 "The same answers for applications"):
 *
 *   const recon = await openRecon();
 *   const r = await recon.act({ id: `refund:${order.id}`, provider: 'stripe', action: 'refund',
 *     payload: { payment_intent, amount: 2599, currency: 'usd' }, approval: ticket, client_reference: order.id });
 *   // r.state, r.message, r.next
 *   await recon.close();
 *
 * `act` records and sends once; a second `act` with the same id sends nothing and answers the state.
 * The answers and refusals are the MCP tools' own (src/agent/actions.ts), word for word.
 */
import { loadConfig } from '../config/load.js';
import { resolveAuditKey } from '../config/audit-key.js';
import type { LoadedConfig } from '../config/types.js';
import { createProvider } from '../providers/index.js';
import { chooseStore } from '../store/discover.js';
import { openStore } from '../store/open.js';
import type { Provider, State } from '../types.js';
import { check, execute, propose, status, type Answer } from './actions.js';
import type { Agent, ToolCall } from './context.js';
import type { StripeRefundPayload } from './payloads.js';
import type { NextTool } from './result.js';

/** The built-in actions' payloads by provider and action; any other pair takes a free object. */
type PayloadFor<P extends string, A extends string> = P extends 'stripe'
  ? A extends 'refund'
    ? StripeRefundPayload
    : Record<string, unknown>
  : Record<string, unknown>;

export interface ActInput<P extends string = string, A extends string = string> {
  /** One id per business action, kept for every call about it, e.g. `refund:ord_1042`. */
  id: string;
  provider: P;
  action: A;
  payload: PayloadFor<P, A>;
  /** A person's approval reference (a ticket). Without it, only the provider's `autoApprove` policy approves. */
  approval?: string;
  client_reference?: string;
  subject?: Record<string, unknown>;
  /** Why, for the audit trail. */
  reason?: string;
}

/** What recon answers: the operation's state, one fixed sentence about it, and what to call next. */
export interface ReconAnswer {
  operation_id: string;
  /** null when no such operation is recorded. */
  state: State | null;
  provider_txn_ids: string[];
  message: string;
  /** `execute_action` is `act` again, `check_action` is `check`, `get_action` is `status`. */
  next: NextTool;
  /** Present when recon refused the call: nothing was recorded or sent by it. */
  refused?: { rule: string; reason: string; field?: string };
  [field: string]: unknown;
}

export interface Recon {
  act<P extends string, A extends string>(input: ActInput<P, A>): Promise<ReconAnswer>;
  /** What recon knows now, without asking the provider. */
  status(id: string): Promise<ReconAnswer>;
  /** One reconciliation step: asks the provider, applies the rule (SPEC §4). */
  check(id: string): Promise<ReconAnswer>;
  close(): Promise<void>;
}

export interface OpenReconOptions {
  /** The store URL; default as the CLI finds it (RECON_DB, DATABASE_URL, config `db`, `.recon/`). */
  db?: string;
  /** The config file; default as the CLI finds it (RECON_CONFIG, nearest recon.config.json). */
  config?: string;
  /** Who acts, for the audit trail. Default `app:<RECON_ACTOR or "application">`. */
  actor?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  now?: () => Date;
  /** Where operator-only lines go (internal errors). Default: nowhere. */
  log?: (line: string) => void;
}

export async function openRecon(o: OpenReconOptions = {}): Promise<Recon> {
  const env = o.env ?? process.env;
  const cwd = o.cwd ?? process.cwd();
  const config: LoadedConfig = await loadConfig({ flag: o.config, env, cwd });
  const choice = chooseStore({ flag: o.db, env, configDb: config.db, configPath: config.path, cwd, create: true });
  // Resolved before the store opens: a bad key source is a usage error with nothing opened.
  const auditKey = await resolveAuditKey(env, config.auditKey);
  const db = await openStore(choice.url);
  const providers = new Map<string, Promise<Provider>>();
  const provider = (name: string) => {
    let p = providers.get(name);
    if (!p) providers.set(name, (p = createProvider(name, config)));
    return p;
  };
  const now = o.now ?? (() => new Date());
  const agent: Agent = { db, config, now, provider, auditKey, log: o.log ?? (() => undefined) };
  const call: ToolCall = {
    agent,
    ctx: { db, actor: o.actor ?? `app:${env.RECON_ACTOR || 'application'}`, now, auditKey },
  };
  const answer = (a: Answer): ReconAnswer => a.result;
  return {
    async act(input) {
      const proposed = await propose(call, {
        provider: input.provider,
        action: input.action,
        operation_id: input.id,
        payload: input.payload,
        client_reference: input.client_reference,
        subject: input.subject,
        reason: input.reason,
        approval: input.approval,
      });
      // Sent only from approved, only once: a second act() is execute's second click, a status answer.
      if (proposed.isError || proposed.result.state === 'proposed') return answer(proposed);
      return answer(await execute(call, input.id));
    },
    status: async (id) => answer(await status(call, id)),
    check: async (id) => answer(await check(call, id)),
    async close() {
      for (const p of providers.values()) await (await p.catch(() => null))?.close?.();
      await db.close();
    },
  };
}
