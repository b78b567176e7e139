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

/**
 * A table for people: on a TTY a box with a rule under the header only, every column wrapped so
 * the whole table fits the terminal's width (a wrapped cell continues on the next line of its
 * row; the box never breaks); plain aligned columns when not on a TTY, never cut or wrapped.
 */
export async function renderTable(io: IO, head: string[], rows: (string | number | null)[][]): Promise<string> {
  const cells = rows.map((r) => r.map((c) => (c === null || c === undefined ? '' : String(c))));
  if (!io.isStdoutTTY) {
    const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => stripAnsi(r[i] ?? '').length)));
    const line = (r: string[]) =>
      r.map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(widths[i] - stripAnsi(c).length))).join('  ');
    return [line(head), ...cells.map(line)].join('\n');
  }
  const style = await styleFor(io);
  const columnText = (i: number) => [head[i], ...cells.map((r) => r[i] ?? '')];
  const widths = fitWidths(
    head.map((_, i) => Math.max(...columnText(i).map(longestLine))),
    head.map((_, i) => Math.max(...columnText(i).map(longestWord))),
    io.columns ?? 80,
    {
      valueWords: head.map((_, i) => Math.max(0, ...cells.map((r) => longestWord(r[i] ?? '')))),
      prose: head.map((_, i) => cells.some((r) => /\S \S/.test(stripAnsi(r[i] ?? '')))),
    },
  );
  const border = (l: string, m: string, r: string) => style.dim(l + widths.map((w) => '─'.repeat(w + 2)).join(m) + r);
  const bar = style.dim('│');
  const row = (r: string[], bold = false) => {
    const wrapped = r.map((c, i) => wrapCell(c, widths[i]));
    const height = Math.max(1, ...wrapped.map((w) => w.length));
    const lines: string[] = [];
    for (let k = 0; k < height; k++) {
      const parts = wrapped.map((w, i) => {
        const text = w[k] ?? '';
        const pad = ' '.repeat(Math.max(0, widths[i] - stripAnsi(text).length));
        return ` ${bold ? style.bold(text) : text}${pad} `;
      });
      lines.push(bar + parts.join(bar) + bar);
    }
    return lines.join('\n');
  };
  return [
    border('┌', '┬', '┐'),
    row(head, true),
    border('├', '┼', '┤'),
    ...cells.map((r) => row(r)),
    border('└', '┴', '┘'),
  ].join('\n');
}

/**
 * Column widths that fit `columns`, giving up space in the order that costs a reader least: the
 * widest columns first lose what they need only for spaces between words (cells wrap at spaces,
 * ids stay whole); then headers may wrap inside a word (`attempts` over a column of `1`); then
 * prose columns (cells with spaces) break words; only then are ids broken, still widest first.
 */
export function fitWidths(
  natural: number[],
  longestWords: number[],
  columns: number,
  o: { valueWords?: number[]; prose?: boolean[] } = {},
): number[] {
  const widths = [...natural];
  const budget = columns - (3 * widths.length + 1);
  let total = widths.reduce((a, b) => a + b, 0);
  const floors: ((i: number) => number)[] = [
    (i) => longestWords[i],
    (i) => Math.max(3, o.valueWords?.[i] ?? longestWords[i]),
    (i) => (o.prose?.[i] ? 4 : Infinity),
    () => 4,
  ];
  for (const floor of floors) {
    while (total > budget) {
      let widest = -1;
      for (let i = 0; i < widths.length; i++) {
        if (widths[i] > floor(i) && (widest < 0 || widths[i] > widths[widest])) widest = i;
      }
      if (widest < 0) break;
      widths[widest]--;
      total--;
    }
  }
  return widths;
}

/** Wraps a cell to `width`: at spaces where it can, inside a long word (an id) where it must. */
export function wrapCell(text: string, width: number): string[] {
  const out: string[] = [];
  for (const raw of text.split('\n')) {
    if (stripAnsi(raw).length <= width) {
      out.push(raw);
      continue;
    }
    // Colour is dropped from a cell that must wrap: escape codes cannot be split safely.
    let line = '';
    for (const word of stripAnsi(raw).split(' ')) {
      let w = word;
      if (line && line.length + 1 + w.length > width) {
        out.push(line);
        line = '';
      }
      while (w.length > width) {
        if (line) {
          out.push(line);
          line = '';
        }
        out.push(w.slice(0, width));
        w = w.slice(width);
      }
      line = line ? `${line} ${w}` : w;
    }
    if (line) out.push(line);
  }
  return out.length ? out : [''];
}

function longestWord(s: string): number {
  return Math.max(
    0,
    ...stripAnsi(s)
      .split(/[\s]+/)
      .map((w) => w.length),
  );
}

function longestLine(s: string): number {
  return Math.max(0, ...s.split('\n').map((l) => stripAnsi(l).length));
}

function stripAnsi(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\u001b\[[0-9;]*m/g, '');
}
