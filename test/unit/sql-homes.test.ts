/**
 * One home for the SQL that writes what audit verify trusts (issue 25): an operation's state is
 * written only by the journal's transition (src/core/journal/transition.ts, row, observation,
 * links and event in one statement); audit events, provider transactions (links) and observations
 * are each inserted by one spelling in one module (chain.ts, links.ts, observations.ts), which the
 * move statement builds its parts from.
 * A new writer elsewhere would be a second path that can skip the chain or the lease check.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

function writers(pattern: RegExp): string[] {
  const files = [...sources('src'), ...sources('commands'), ...sources('bin')];
  return files.filter((f) => pattern.test(fs.readFileSync(path.join(ROOT, f), 'utf8'))).sort();
}

describe('the SQL that writes states and audit events has one home each', () => {
  it("an operation's state is set only by the journal's transition", () => {
    expect(writers(/UPDATE\s+recon\.operations\b[^;`]*?\bSET\b[^;`]*?[\s,]state\s*=/i)).toEqual([
      path.join('src', 'core', 'journal', 'transition.ts'),
    ]);
  });

  // Each INSERT is spelled once, in its home, and the move statement (transition.ts WRITE_MOVES)
  // builds its parts from the same builders (chain.ts insertEventsSql, links.ts insertLinksSql,
  // observations.ts insertObservationsSql): two spellings drift (issue 25).
  it('audit events are inserted only by the chain (chain.ts insertEventsSql)', () => {
    expect(writers(/INSERT\s+INTO\s+recon\.audit_events/i)).toEqual([path.join('src', 'core', 'journal', 'chain.ts')]);
  });

  it('provider transactions are linked only by links.ts (insertLinksSql)', () => {
    expect(writers(/INSERT\s+INTO\s+recon\.provider_transactions/i)).toEqual([
      path.join('src', 'core', 'journal', 'links.ts'),
    ]);
  });

  it('observations are inserted only by observations.ts (insertObservationsSql)', () => {
    expect(writers(/INSERT\s+INTO\s+recon\.observations/i)).toEqual([
      path.join('src', 'core', 'journal', 'observations.ts'),
    ]);
  });

  it('each of those INSERTs is spelled once in its home', () => {
    for (const [table, file] of [
      ['audit_events', 'chain.ts'],
      ['provider_transactions', 'links.ts'],
      ['observations', 'observations.ts'],
    ]) {
      const text = fs.readFileSync(path.join(ROOT, 'src', 'core', 'journal', file), 'utf8');
      expect(text.match(new RegExp(`INSERT\\s+INTO\\s+recon\\.${table}\\b`, 'gi')), table).toHaveLength(1);
    }
  });

  it('the check sees a writer where there is one (a state written from another file would be found)', () => {
    const probe = /UPDATE\s+recon\.operations\b[^;`]*?\bSET\b[^;`]*?[\s,]state\s*=/i;
    expect(probe.test("UPDATE recon.operations SET state = 'cancelled' WHERE id = $1")).toBe(true);
    expect(probe.test('UPDATE recon.operations SET review_reason = $2 WHERE id = $1')).toBe(false);
  });
});
