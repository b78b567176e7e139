/**
 * vitest globalSetup: one PostgreSQL server per test run, shared by every integration file
 * (each file creates its own database on it). Tests read its URL with `inject('pgUrl')`;
 * child processes (the CLI under test) see it as RECON_TEST_PG_URL.
 *
 * With RECON_TEST_BACKEND=pglite no server is started and `pgUrl` is ''.
 */
import type { TestProject } from 'vitest/node';
import { startPostgres } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Base URL of the run's PostgreSQL server (database `postgres`); '' when not started. */
    pgUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  if (process.env.RECON_TEST_BACKEND === 'pglite') {
    project.provide('pgUrl', '');
    return undefined;
  }
  // Each vitest project (unit, integration) runs this setup; the first one starts the server
  // and the others reuse it through the environment of this same main process.
  const existing = process.env.RECON_TEST_PG_URL;
  if (existing) {
    project.provide('pgUrl', existing);
    return undefined;
  }
  const server = await startPostgres();
  process.env.RECON_TEST_PG_URL = server.url;
  project.provide('pgUrl', server.url);
  return async () => {
    delete process.env.RECON_TEST_PG_URL;
    await server.stop();
  };
}
