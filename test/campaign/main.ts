/**
 * `npm run campaign -- --seed N --ops N --db postgres|pglite [--json]`: a seeded randomized fault
 * campaign against the built CLI and the sandboxes (see campaign.ts). Prints a summary (or one JSON
 * document with --json) and exits 1 when an invariant is violated, 2 on a usage error.
 *
 * PostgreSQL: RECON_TEST_PG_URL when set, else a server started for the run (test/support/postgres.ts).
 */
import { startPostgres, type PostgresServer } from '../support/postgres.js';
import { runCampaign, type CampaignSummary } from './campaign.js';

interface Args {
  seed: number;
  ops: number;
  db: 'postgres' | 'pglite';
  json: boolean;
}

const USAGE = 'usage: npm run campaign -- --seed N --ops N --db postgres|pglite [--json]';

function parseArgs(argv: string[]): Args {
  const args: Args = { seed: 1, ops: 40, db: 'postgres', json: false };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    if (flag === '--json') args.json = true;
    else if (flag === '--seed' || flag === '--ops') {
      const v = value();
      if (!/^\d+$/.test(v) || (flag === '--ops' && Number(v) < 1))
        throw new Error(`${flag}: a whole number, got "${v}"`);
      args[flag === '--seed' ? 'seed' : 'ops'] = Number(v);
    } else if (flag === '--db') {
      const v = value();
      if (v !== 'postgres' && v !== 'pglite') throw new Error(`--db: postgres or pglite, got "${v}"`);
      args.db = v;
    } else throw new Error(`unknown argument ${argv[i]}`);
  }
  return args;
}

function report(s: CampaignSummary): string {
  const kv = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ') || '-';
  const lines = [
    `campaign seed ${s.seed} on ${s.db}: ${s.ops.total} operations (${s.ops.stripe} refunds, ${s.ops.warehouse} shipments) in ${(s.duration_ms / 1000).toFixed(1)} s`,
    `  faults      ${kv(s.faults)}`,
    `  kills       workers=${s.kills.workers} submits=${s.kills.submits}  (${s.workers.runs} worker runs in ${s.workers.rounds} rounds, up to ${s.workers.max_concurrent} at once; exits ${kv(s.workers.exits)}; ${s.lease_lost} results refused for a lost lease)`,
    `  webhooks    events=${s.webhooks.events} deliveries=${s.webhooks.deliveries} duplicates=${s.webhooks.duplicate_deliveries} out_of_order=${s.webhooks.out_of_order} retried=${s.webhooks.retries} bad_signature=${s.webhooks.bad_signature} (${kv(s.webhooks.bad_signature_by_kind)})`,
    `  planted     ${kv(s.planted)}; status changes: refunds=${s.status_changes.refunds} shipments=${s.status_changes.shipments}`,
    `  ledger      refunds=${s.ledger.refunds} shipments=${s.ledger.shipments} planted=${s.ledger.planted}; audit duplicates groups=${s.duplicates_reported}`,
    `  final       ${kv(s.final_states)}; review reasons: ${kv(s.review_reasons)}; settle passes=${s.settle_passes}; person lookups=${s.person_lookups}`,
    `  violations  ${s.violations.length}${s.violations.length ? ` (${kv(s.violations_by_invariant)})` : ''}`,
  ];
  for (const v of s.violations) {
    lines.push(`    ${v.invariant} ${v.operation_id ?? '-'}: ${JSON.stringify(v.evidence)}`);
  }
  return lines.join('\n');
}

async function main(): Promise<number> {
  let args: Args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  let server: PostgresServer | undefined;
  let pgBaseUrl = process.env.RECON_TEST_PG_URL;
  if (args.db === 'postgres' && !pgBaseUrl) {
    server = await startPostgres();
    pgBaseUrl = server.url;
  }
  try {
    const summary = await runCampaign({
      seed: args.seed,
      ops: args.ops,
      db: args.db,
      pgBaseUrl,
      log: (line) => process.stderr.write(`campaign: ${line}\n`),
    });
    process.stdout.write(args.json ? `${JSON.stringify(summary, null, 2)}\n` : `${report(summary)}\n`);
    return summary.violations.length ? 1 : 0;
  } finally {
    await server?.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`campaign: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
