/**
 * `--port` is read by one parser (commands/support/action.ts parsePort) wherever a command listens:
 * 0 to 65535, refused with the same usage error (exit 2) before anything is read or started.
 */
import { describe, expect, it } from 'vitest';
import { recon } from '../support/cli.js';

describe('--port', () => {
  it.each([
    ['webhook', 'serve'],
    ['mcp', '--http'],
    ['sandbox', 'stripe'],
  ])('recon %s %s refuses a port over 65535 as a usage error naming the flag', async (...command) => {
    const r = await recon([...command, '--port', '70000']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--port: "70000" is not a port; use 1-65535, or 0 for a free one');
  });
});
