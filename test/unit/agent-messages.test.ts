/**
 * What recon tells an agent (SPEC §9): one fixed, honest sentence per state, listed in the README,
 * and never "failed" for an operation that is not failed — the word that makes a model click again.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { actorFor } from '../../src/agent/context.js';
import { NEXT, STATE_MESSAGES } from '../../src/agent/result.js';
import { STATES } from '../../src/types.js';

const README = fs.readFileSync(path.resolve(import.meta.dirname, '../../README.md'), 'utf8');

describe('the per-state messages', () => {
  it.each(STATES)('%s: one message and one next tool, listed in the README', (state) => {
    const row = README.split('\n').find((l) => l.startsWith(`| \`${state}\` |`));
    expect(row, `README has a row for ${state}`).toBeDefined();
    expect(row).toContain(STATE_MESSAGES[state]);
    expect(row).toContain(`\`${NEXT[state]}\``);
  });

  it('only failed says "failed"; outcome_unknown says the provider may have done it and not to try again', () => {
    for (const s of STATES) if (s !== 'failed') expect(STATE_MESSAGES[s], s).not.toMatch(/fail/i);
    expect(STATE_MESSAGES.outcome_unknown).toMatch(/may have done it/);
    expect(STATE_MESSAGES.outcome_unknown).toMatch(/Do not try again; ask with check_action/);
    expect(NEXT.outcome_unknown).toBe('check_action');
  });
});

describe('actorFor', () => {
  it('is mcp:<client name>, made safe to print', () => {
    expect(actorFor('claude-code')).toBe('mcp:claude-code');
    expect(actorFor(undefined)).toBe('mcp:unknown');
    expect(actorFor('  ')).toBe('mcp:unknown');
    expect(actorFor('evil\u001b[31m\nname')).toBe('mcp:evil__31m_name');
    expect(actorFor('x'.repeat(500))).toHaveLength(4 + 100);
  });
});
