/**
 * The agent's afternoon (SPEC §9): an AI agent's refund tool goes through `recon mcp`. A scripted
 * agent — the SDK's own Client, connected in-process to the same server `recon mcp` runs — proposes
 * a refund (approved by the provider's autoApprove policy), executes it into a refund Stripe commits
 * before the connection drops, is told not to try again, asks again anyway (nothing is sent), and
 * checks: the refund is found and confirmed. Then it changes the amount under the same id (told it
 * is already refunded, and offered no new id) and re-plans under a new id for the same payment
 * (held for a person, execute refused). The provider holds one refund.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { createAgentServer } from '../agent/server.js';
import { getOperation } from '../core/journal/operations.js';
import { formatAmount } from '../lib/money.js';
import type { Scene, Stage } from './stage.js';

const DEMO_AGENT = 'support-agent';

export function agentsAfternoon(stage: Stage): Scene {
  const id = 'refund:ord_1011';
  const { stripe, ctx } = stage.world;
  return {
    stage,
    // execute_action's first request, dropped (the operation's key is its id): the SDK pauses before it sends it again.
    waiting: stage.world.stripeRequestArrives('POST /v1/refunds', id),
    async setup() {
      await stage.heading();
      const { payment_intent } = stripe.seedPaymentIntent({ amount: 5000, currency: 'usd', id: 'pi_demo_1011' });
      const server = createAgentServer(
        {
          db: ctx.db,
          config: stage.world.config,
          now: ctx.now,
          provider: (name) => stage.world.provider(name),
          log: (line) => void stage.say(`(server log) ${line}`),
        },
        'demo',
      );
      const client = new Client(
        { name: DEMO_AGENT, version: '1.0.0' },
        { jsonSchemaValidator: onFirstUse(new AjvJsonSchemaValidator()) },
      );
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
      try {
        // From here on the client checks every result against the tool's advertised output schema.
        const { tools } = await client.listTools();
        await stage.say(`an agent (${DEMO_AGENT}) connects to recon mcp: ${tools.map((t) => t.name).join(', ')}`);
        const call = async (name: string, args: Record<string, unknown>) => {
          const r = await client.callTool({ name, arguments: args });
          const s = r.structuredContent as {
            state: string;
            message: string;
            next: string;
            sent?: boolean;
            refused?: { rule: string };
            held_by?: { operation_id: string };
          };
          await stage.say(`${name} → ${s.state}${r.isError ? ' (refused)' : ''}: "${s.message}" next: ${s.next}`);
          return s;
        };

        const proposed = await call('propose_action', refundArgs(id, payment_intent, 1800));
        await stage.check(
          `${formatAmount(1800, 'usd')} is within autoApprove (${formatAmount(5000, 'usd')}): approved by policy`,
          'approved',
          proposed.state,
        );

        // The other incidents' refunds reach the same Stripe meanwhile: count this operation's requests, by its key.
        const { idempotency_key: key } = await getOperation(ctx.db, id);
        const refundRequests = () => stage.world.stripeRequests('POST /v1/refunds', key);
        stripe.faults.inject({ kind: 'commit_then_drop' }, { idempotencyKey: key, times: 2 });
        await stage.say('Stripe will commit the refund, then drop the connection (twice: the SDK retries once)');
        const sentBefore = refundRequests();
        const executed = await call('execute_action', { operation_id: id });
        await stage.check(
          'execute_action ends in outcome_unknown and says not to try again',
          { state: 'outcome_unknown', told: true },
          { state: executed.state, told: /Do not try again/.test(executed.message) },
        );

        await stage.say('the agent clicks again anyway (the second click)');
        const again = await call('execute_action', { operation_id: id });
        await stage.check(
          "the second execute_action sends nothing: Stripe saw only the first one's request and the SDK's retry",
          { sent: false, requests: 2 },
          { sent: again.sent, requests: refundRequests() - sentBefore },
        );

        const checked = await call('check_action', { operation_id: id });
        await stage.check('check_action finds the refund and confirms it', 'confirmed', checked.state);

        await stage.say('the user asks for 19.00 USD instead; the agent proposes the same id with the new amount');
        const changed = await call('propose_action', { ...refundArgs(id, payment_intent, 1900) });
        await stage.check(
          'the changed amount is refused: already refunded 18.00 USD, do not refund again, no new operation_id offered',
          { refused: 'payload_frozen', already: true, newId: false },
          {
            refused: changed.refused?.rule,
            already: /Already refunded 18\.00 USD .*Do not refund again/.test(changed.message),
            newId: /new operation_id/.test(changed.message),
          },
        );

        await stage.say('the agent run restarts and re-plans the same refund under a new id');
        const replanned = `${id}-b`;
        const held = await call('propose_action', { ...refundArgs(replanned, payment_intent, 1900) });
        await stage.check(
          `the re-planned ${replanned} is held for a person: same payment as ${id} (confirmed)`,
          { state: 'proposed', held_by: id },
          { state: held.state, held_by: held.held_by?.operation_id },
        );
        const refusedExec = await call('execute_action', { operation_id: replanned });
        await stage.check(
          'execute_action on the held proposal is refused; nothing is sent',
          'approval_required',
          refusedExec.refused?.rule,
        );
      } finally {
        await client.close();
        await server.close();
      }
      const op = await getOperation(ctx.db, id);
      await stage.check(
        'one attempt, confirmed, every call audited as mcp:support-agent',
        { state: 'confirmed', attempt_count: 1, actor: `mcp:${DEMO_AGENT}` },
        { state: op.state, attempt_count: op.attempt_count, actor: await lastActor(stage, id) },
      );
      // One refund on the sandbox's ledger, whatever the agent tried.
      await stage.ledger('refunds', 1, stripe.refunds({ payment_intent }).length);
    },
  };
}

/**
 * The SDK's validator, each tool's output schema compiled when the tool first answers rather than
 * when the tools are listed: the agent calls three of the five, and each compile (ajv generates code)
 * is a few tens of milliseconds of the demo's start. Every answer is still checked against its schema.
 */
function onFirstUse(validator: jsonSchemaValidator): jsonSchemaValidator {
  return {
    getValidator<T>(schema: Parameters<jsonSchemaValidator['getValidator']>[0]) {
      let compiled: ReturnType<typeof validator.getValidator<T>> | undefined;
      return (input: unknown) => (compiled ??= validator.getValidator<T>(schema))(input);
    },
  };
}

function refundArgs(id: string, payment_intent: string, amount: number) {
  return {
    provider: 'stripe',
    action: 'refund',
    operation_id: id,
    payload: { payment_intent, amount, currency: 'usd', reason: 'requested_by_customer' },
    client_reference: 'ord_1011',
    reason: 'the customer returned the order',
  };
}

async function lastActor(stage: Stage, id: string): Promise<string | null> {
  const r = await stage.world.ctx.db.query<{ actor: string }>(
    'SELECT DISTINCT actor FROM recon.audit_events WHERE operation_id = $1',
    [id],
  );
  return r.rows.length === 1 ? r.rows[0].actor : r.rows.map((x) => x.actor).join(', ');
}
