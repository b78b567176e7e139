import { stripVTControlCharacters } from 'node:util';
import type { IO } from './io.js';

/**
 * Colours only when io.color says so; chalk is loaded only then, so piped and --json output
 * never carries escape codes and start-up stays light.
 */
export interface Style {
  bold(s: string): string;
  dim(s: string): string;
  red(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  cyan(s: string): string;
  state(s: string): string;
}

const plain: Style = {
  bold: (s) => s,
  dim: (s) => s,
  red: (s) => s,
  green: (s) => s,
  yellow: (s) => s,
  cyan: (s) => s,
  state: (s) => s,
};

export async function styleFor(io: IO): Promise<Style> {
  if (!io.color) return plain;
  const { Chalk } = await import('chalk');
  const c = new Chalk({ level: 1 });
  const byState: Record<string, (s: string) => string> = {
    confirmed: c.green,
    failed: c.red,
    cancelled: c.dim,
    needs_review: c.red.bold,
    outcome_unknown: c.yellow,
    submitting: c.cyan,
    pending: c.cyan,
  };
  return {
    bold: c.bold,
    dim: c.dim,
    red: c.red,
    green: c.green,
    yellow: c.yellow,
    cyan: c.cyan,
    state: (s) => (byState[s] ?? ((x: string) => x))(s),
  };
}

/** How a table is laid out: which columns are free text (the only ones that wrap). */
export interface TableOptions {
  /**
   * Headers of the columns that hold free text (an explanation, a note): their cells wrap at
   * spaces. Every other column holds atoms (ids, amounts, states, times), never split.
   */
  text?: string[];
}

type Cell = string | number | null | undefined;

/**
 * A table for people (SPEC §7). Off a terminal: tab-separated columns, a header line, every column
 * kept so `cut -f` finds the same field on every run, no colour (as gh prints for a pipe). On a
 * terminal: empty columns dropped; ids, amounts, states and times never split (only the `text`
 * columns wrap, and headers at their spaces); a box drawn by cli-table3 with a rule under the
 * header only; when the atoms do not fit the window, one record per block instead (psql's expanded
 * display), never a broken grid. Widths are display widths (string-width: a CJK character is two
 * columns), measured without escape codes.
 */
export async function renderTable(io: IO, head: string[], rows: Cell[][], o: TableOptions = {}): Promise<string> {
  const cells = rows.map((r) => head.map((_, i) => (r[i] === null || r[i] === undefined ? '' : String(r[i]))));
  if (!io.isStdoutTTY) {
    const field = (c: string) => stripVTControlCharacters(c).replace(/[\t\n]/g, ' ');
    return [head, ...cells].map((r) => r.map(field).join('\t')).join('\n');
  }
  const { default: stringWidth } = await import('string-width');
  const width = (s: string) => stringWidth(stripVTControlCharacters(s));
  const keep = head.map((_, i) => i).filter((i) => cells.some((r) => stripVTControlCharacters(r[i]).trim() !== ''));
  const columns = {
    head: keep.map((i) => head[i]),
    text: keep.map((i) => o.text?.includes(head[i]) ?? false),
    rows: cells.map((r) => keep.map((i) => r[i])),
  };
  const layout = fitColumns(
    columns.head.map((h, j) => ({
      natural: Math.max(width(h), ...columns.rows.map((r) => longest(r[j], width))),
      headWord: Math.max(...h.split(' ').map(width)),
      cells: Math.max(0, ...columns.rows.map((r) => longest(r[j], width))),
      text: columns.text[j],
    })),
    io.columns ?? 80,
  );
  const style = await styleFor(io);
  if (!layout) return renderRecords(columns.head, columns.rows, columns.text, io.columns ?? 80, width, style);
  const { default: Table } = await import('cli-table3');
  const table = new Table({
    head: columns.head.map((h, j) =>
      wrapText(h, layout[j], width)
        .map((l) => style.bold(l))
        .join('\n'),
    ),
    colWidths: layout.map((w) => w + 2),
    style: { head: [], border: [], compact: true, 'padding-left': 1, 'padding-right': 1 },
  });
  for (const r of columns.rows)
    table.push(r.map((c, j) => (columns.text[j] ? wrapText(c, layout[j], width).join('\n') : c)));
  return table.toString();
}

/** What a column needs: its natural width, its header's longest word, its widest cell, whether it may wrap. */
export interface ColumnNeed {
  natural: number;
  headWord: number;
  cells: number;
  text: boolean;
}

/** Free text wraps no narrower than this (or its natural width, when less). */
const TEXT_MIN = 12;

/**
 * Widths that fit `columns` (a box takes 3 per column and 1), or null when the atoms alone do not
 * fit. Space is given up where it costs a reader least: free text wraps first (widest first), then
 * headers wrap at their spaces; an atom keeps its whole width.
 */
export function fitColumns(need: ColumnNeed[], columns: number): number[] | null {
  const min = need.map((c) =>
    c.text ? Math.min(c.natural, Math.max(TEXT_MIN, c.headWord)) : Math.max(c.headWord, c.cells),
  );
  const budget = columns - (3 * need.length + 1);
  if (min.reduce((a, b) => a + b, 0) > budget) return null;
  const widths = need.map((c) => c.natural);
  let total = widths.reduce((a, b) => a + b, 0);
  for (const pass of [(i: number) => need[i].text, () => true]) {
    while (total > budget) {
      let widest = -1;
      for (let i = 0; i < widths.length; i++)
        if (pass(i) && widths[i] > min[i] && (widest < 0 || widths[i] > widths[widest])) widest = i;
      if (widest < 0) break;
      widths[widest]--;
      total--;
    }
  }
  return widths;
}

/**
 * One record per block, psql's expanded display: a field's name, then its value; free text wraps
 * beside the names, atoms stay whole (a line wider than the window is the terminal's to fold, never
 * recon's to cut). Empty fields are left out.
 */
function renderRecords(
  head: string[],
  rows: string[][],
  text: boolean[],
  columns: number,
  width: (s: string) => number,
  style: Style,
): string {
  const label = Math.max(...head.map(width));
  const room = Math.max(TEXT_MIN, columns - label - 2);
  const blocks = rows.map((r, n) => {
    const title = `─[ ${n + 1} of ${rows.length} ]`;
    const lines = [style.dim(title + '─'.repeat(Math.max(0, Math.min(columns, 60) - width(title))))];
    r.forEach((c, j) => {
      if (stripVTControlCharacters(c).trim() === '') return;
      const values = text[j] ? wrapText(c, room, width) : c.split('\n');
      values.forEach((v, k) =>
        lines.push(
          `${(k === 0 ? style.bold(head[j]) : '') + ' '.repeat(k === 0 ? label - width(head[j]) : label)}  ${v}`,
        ),
      );
    });
    return lines.join('\n');
  });
  return blocks.join('\n');
}

/**
 * Wraps free text to `max` display columns: at spaces where it can, inside a word only when one
 * word is wider than the whole column. Colour is dropped from a cell that must wrap: escape codes
 * cannot be split safely.
 */
export function wrapText(text: string, max: number, width: (s: string) => number): string[] {
  const out: string[] = [];
  for (const raw of text.split('\n')) {
    if (width(raw) <= max) {
      out.push(raw);
      continue;
    }
    let line = '';
    for (const word of stripVTControlCharacters(raw).split(' ')) {
      let w = word;
      if (line && width(line) + 1 + width(w) > max) {
        out.push(line);
        line = '';
      }
      while (width(w) > max) {
        if (line) {
          out.push(line);
          line = '';
        }
        let cut = '';
        for (const { segment } of new Intl.Segmenter().segment(w)) {
          if (width(cut + segment) > max && cut) break;
          cut += segment;
        }
        out.push(cut);
        w = w.slice(cut.length);
      }
      line = line ? `${line} ${w}` : w;
    }
    if (line) out.push(line);
  }
  return out.length ? out : [''];
}

function longest(cell: string, width: (s: string) => number): number {
  return Math.max(0, ...cell.split('\n').map(width));
}

/**
 * Atoms (an id, `25.99 USD`, a time) joined by two spaces into lines that fit the window: a line
 * that would run past the edge goes on below, indented, so the terminal never folds one in two.
 * Off a terminal, one line.
 */
export async function flow(io: IO, parts: string[], indent = 4): Promise<string> {
  const atoms = parts.filter((p) => p !== '');
  if (!io.isStdoutTTY) return atoms.join('  ');
  const { default: stringWidth } = await import('string-width');
  const width = (s: string) => stringWidth(stripVTControlCharacters(s));
  const max = io.columns ?? 80;
  const lines: string[] = [];
  let line = '';
  for (const a of atoms) {
    if (line.trim() && width(line.trimEnd()) + 2 + width(a) > max) {
      lines.push(line);
      line = ' '.repeat(indent) + a;
    } else line = line ? `${line}  ${a}` : a;
  }
  if (line) lines.push(line);
  return lines.map((l) => l.trimEnd()).join('\n');
}
