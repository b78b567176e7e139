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

/** A table for people (cli-table3); plain aligned columns when not on a TTY. */
export async function renderTable(io: IO, head: string[], rows: (string | number | null)[][]): Promise<string> {
  const cells = rows.map((r) => r.map((c) => (c === null || c === undefined ? '' : String(c))));
  if (!io.isStdoutTTY) {
    const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => stripAnsi(r[i] ?? '').length)));
    const line = (r: string[]) =>
      r.map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(widths[i] - stripAnsi(c).length))).join('  ');
    return [line(head), ...cells.map(line)].join('\n');
  }
  const { default: Table } = await import('cli-table3');
  const style = await styleFor(io);
  const t = new Table({ head: head.map((h) => style.bold(h)), style: { head: [], border: io.color ? ['grey'] : [] } });
  for (const r of cells) t.push(r);
  return t.toString();
}

function stripAnsi(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\u001b\[[0-9;]*m/g, '');
}
