/**
 * The campaign's world: both sandboxes in this process, a lookup-fault proxy in front of each, a
 * store (a fresh PostgreSQL database or a PGlite folder), a config file with short windows, and
 * the CLI: the BUILT one (bin/recon → dist/) as child processes, as cron and on-call run it, for
 * what may be killed or runs beside other processes (`spawn`: submits, workers, webhook serve);
 * one-shot commands that run alone (`recon`: record, settle passes, lookups, audits) through the
 * CLI's main() in this process (test/support/in-process.ts: the same commander, exit codes and
 * JSON, with the same config, environment and folder), without a Node start and module load each.
 *
 * Nothing here imports vitest: `npm run campaign` runs it as plain node from dist/.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import { faultBody } from '../../src/sandbox/stripe/routes.js';
import { warehouseProviderConfig } from '../../src/sandbox/warehouse/provider-config.js';
import { startWarehouseSandbox, type WarehouseSandbox } from '../../src/sandbox/warehouse/server.js';
import { cleanEnv, type CliResult } from '../support/cli.js';
import { runInProcess } from '../support/in-process.js';
import { createDatabase } from '../support/postgres.js';
import { startFaultProxy, type FaultProxy } from './proxy.js';

/** The repository root, found from this file whether it runs as source or from dist/. */
const ROOT = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('campaign: cannot find the repository root (package.json)');
    dir = up;
  }
  return dir;
})();
const BIN = path.join(ROOT, 'bin', 'recon');

const WEBHOOK_SECRET = 'whsec_campaign';
const WAREHOUSE_TOKEN = 'wh_token_campaign';

/**
 * Short windows so that "after enough passes" is seconds: the uncertainty window passes between
 * two passes, a killed worker's lease expires within a round, and `timeout` is shorter than the
 * proxy's slow lookups and the long `delay` faults.
 */
const TIMING = { uncertaintyWindow: '1s', timeout: '1500ms', lease: '3s', escalateAfter: '10m' };

export interface CampaignWorld {
  dir: string;
  storeUrl: string;
  stripe: StripeSandbox;
  warehouse: WarehouseSandbox;
  stripeProxy: FaultProxy;
  warehouseProxy: FaultProxy;
  /** Runs a command to completion, in this process (one at a time: they share process state). */
  recon(args: string[], opts?: { input?: string }): Promise<CliResult>;
  /** Starts the CLI; the caller may kill it. */
  spawn(args: string[]): ChildProcess;
  close(): Promise<void>;
}

export interface WorldOptions {
  db: 'postgres' | 'pglite';
  /** Base URL of a PostgreSQL server (database `postgres`) when db is postgres. */
  pgBaseUrl?: string;
}

export async function startCampaignWorld(o: WorldOptions): Promise<CampaignWorld> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-campaign-'));
  // The sandbox POSTs its events here; the campaign reads them from stripe.events() and delivers
  // them to recon itself, duplicated, late or badly signed.
  const sink = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200).end());
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as { port: number }).port}/`;
  const stripe = await startStripeSandbox({ webhookSecret: WEBHOOK_SECRET, webhookUrl: sinkUrl });
  const warehouse = await startWarehouseSandbox({ token: WAREHOUSE_TOKEN });
  const stripeProxy = await startFaultProxy(stripe.url, faultBody);
  const warehouseProxy = await startFaultProxy(warehouse.url, (status) => ({
    error: { code: status === 429 ? 'rate_limited' : 'unavailable', message: `campaign fault: HTTP ${status}` },
  }));

  let storeUrl: string;
  if (o.db === 'postgres') {
    if (!o.pgBaseUrl) throw new Error('campaign: --db postgres needs a PostgreSQL server');
    storeUrl = await createDatabase(o.pgBaseUrl);
  } else {
    storeUrl = `pglite:${path.join(dir, 'store', 'db')}`;
  }
  const providers = {
    stripe: {
      type: 'stripe',
      apiKey: '${STRIPE_API_KEY}',
      apiBase: stripeProxy.url,
      webhookSecret: '${STRIPE_WEBHOOK_SECRET}',
      keyRetention: '24h',
      maxAttempts: 3,
      rateLimit: 200,
      concurrency: 4,
      ...TIMING,
    },
    warehouse: warehouseProviderConfig(warehouseProxy.url, '${WAREHOUSE_TOKEN}', { maxAttempts: 3, ...TIMING }),
  };
  fs.writeFileSync(path.join(dir, 'recon.config.json'), JSON.stringify({ db: storeUrl, providers }, null, 2));
  const secrets = { STRIPE_API_KEY: stripe.apiKey, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, WAREHOUSE_TOKEN };
  const env = cleanEnv(secrets);
  const spawnCli = (args: string[]) =>
    spawn(process.execPath, [BIN, ...args], { cwd: dir, env, stdio: ['pipe', 'pipe', 'pipe'] });
  return {
    dir,
    storeUrl,
    stripe,
    warehouse,
    stripeProxy,
    warehouseProxy,
    recon: (args, opts = {}) => runInProcess(args, { cwd: dir, env: secrets, input: opts.input }),
    spawn: spawnCli,
    async close() {
      await stripeProxy.close();
      await warehouseProxy.close();
      await stripe.close();
      await warehouse.close();
      await new Promise<void>((resolve) => {
        sink.close(() => resolve());
        sink.closeAllConnections();
      });
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
