/**
 * What recon's MCP tools need: the store kept open for the server's lifetime, the configuration
 * (provider names, `autoApprove` policies), the providers, the clock, and a place for what the
 * server must tell its operator but not the agent (stderr).
 */
import type { LoadedConfig } from '../config/types.js';
import type { AuditKey } from '../lib/keyed-hash.js';
import type { CoreContext } from '../core/journal/context.js';
import { keepPlan, type Db } from '../store/db.js';
import type { Operation, Provider, State } from '../types.js';
import { headOf, headSql, type ChainHead } from '../core/journal/chain.js';
import { operationColumns, rowToOperation, type OperationRow } from '../core/journal/operations.js';

export interface Agent {
  db: Db;
  config: LoadedConfig;
  now: () => Date;
  /** The audit key the tools' events are keyed with (CoreContext.auditKey). */
  auditKey?: AuditKey | null;
  provider(name: string): Promise<Provider>;
  /** One line for the operator (stderr), never for the agent: internal errors, sessions. */
  log(line: string): void;
}

/** A tool call's view of the agent: the core context under the calling client's actor. */
export interface ToolCall {
  agent: Agent;
  ctx: CoreContext;
}

/**
 * `mcp:<client name>`, the name the client gave in its MCP initialize request. It is the client's
 * own claim, so it is only made safe to print (no control characters, bounded), never trusted.
 */
export function actorFor(clientName: string | undefined): string {
  const name = (clientName ?? '')
    .replace(/[^\w.@/+ -]/g, '_')
    .trim()
    .slice(0, 100);
  return `mcp:${name || 'unknown'}`;
}

export function toolCall(agent: Agent, clientName: string | undefined): ToolCall {
  return { agent, ctx: { db: agent.db, actor: actorFor(clientName), now: agent.now, auditKey: agent.auditKey } };
}

/**
 * The operation as it is now, its linked provider transaction ids and its chain's head (an `mcp.call`
 * for the call is chained after it: noteOnHead); null when not recorded. One query (a tool call reads
 * this up to twice): with 20 agents at once, every round trip to the store is CPU the server shares
 * with them (issue 28: ~17 queries per tool call on PostgreSQL).
 */
export async function currentOperation(
  db: Db,
  id: string,
): Promise<{ op: Operation; txnIds: string[]; head: ChainHead } | null> {
  const r = await db.query<
    OperationRow & {
      txn_ids: string[] | null;
      head_seq: number | null;
      head_hash: string | null;
      head_to_state: State | null;
    }
  >(
    keepPlan(`SELECT ${operationColumns('o')}, ARRAY(SELECT t.provider_id FROM recon.provider_transactions t
                        WHERE t.operation_id = o.id ORDER BY t.linked_at, t.provider_id) AS txn_ids,
            h.seq AS head_seq, h.hash AS head_hash, h.to_state AS head_to_state
       FROM recon.operations o
       LEFT JOIN LATERAL (${headSql('o.id')}) h ON true
      WHERE o.id = $1`),
    [id],
  );
  const row = r.rows[0];
  return row
    ? {
        op: rowToOperation(row),
        txnIds: row.txn_ids ?? [],
        head: headOf(row.head_seq, row.head_hash, row.head_to_state),
      }
    : null;
}
