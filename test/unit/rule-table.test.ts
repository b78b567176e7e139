/**
 * The README's "Where each rule lives" table (issue 25): every row names one home, a file and a
 * function (or constant) declared in it. A rule moved without its row, or a row naming two files,
 * fails here instead of sending a reader to a place the rule left.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** The table's rows: the rule's words and its home cell. */
function rows(): { rule: string; home: string }[] {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('Where each rule lives');
  expect(start).toBeGreaterThan(-1);
  const lines = readme.slice(start).split('\n').slice(1);
  const table = lines.slice(lines.findIndex((l) => l.startsWith('|')));
  const body = table
    .slice(
      0,
      table.findIndex((l) => !l.startsWith('|')),
    )
    .slice(2);
  // A cell may hold an escaped pipe (`\|`): split on the last unescaped one.
  return body.map((l) => {
    const cells = l.split(/(?<!\\)\|/);
    return { rule: cells[1].trim(), home: cells[cells.length - 2].trim() };
  });
}

describe("the README's rule table", () => {
  const table = rows();

  it('has its rows', () => {
    expect(table.length).toBeGreaterThan(40);
  });

  it.each(table)('$rule: one file, and a name declared in it', ({ home }) => {
    const m = /^`([^`]+)`: `([A-Za-z_][\w]*)`/.exec(home);
    expect(m, `home cell "${home}" is not \`file\`: \`name\``).not.toBeNull();
    const [, file, name] = m!;
    // One home: no second file in the cell.
    expect(home.match(/`[\w./-]+\.(ts|mjs|js)`/g)).toHaveLength(1);
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    const declared = new RegExp(
      `(function\\*?|const|let|class|interface|type)\\s+${name}\\b|^\\s*(async\\s+)?${name}\\s*\\(`,
      'm',
    );
    expect(text, `${file} declares no ${name}`).toMatch(declared);
  });
});
