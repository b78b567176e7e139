/**
 * The Prometheus text exposition format (version 0.0.4), written in one place: HELP text and label
 * values escaped as the format requires, so any value (a provider name, a state) reaches a scraper
 * as it is. https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
 */

interface PrometheusSample {
  /** Appended to the family name: `_count`, `_sum`, `_bucket` for summaries and histograms. */
  suffix?: string;
  labels?: Record<string, string>;
  value: number;
}

export interface PrometheusFamily {
  name: string;
  help: string;
  type: 'gauge' | 'counter' | 'summary';
  samples: PrometheusSample[];
}

/** HELP text: backslash and newline escaped. */
function escapeHelp(text: string): string {
  return text.replace(/[\\\n]/g, (c) => (c === '\n' ? '\\n' : '\\\\'));
}

/** A label value: backslash, double quote and newline escaped. */
function escapeLabelValue(text: string): string {
  return text.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : '\\' + c));
}

/** A value as the format spells it: `+Inf`, `-Inf`, `NaN`, else the number. */
function formatValue(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  return String(n);
}

/** The families as exposition text: HELP and TYPE before each family's samples, ending in a newline. */
export function prometheusText(families: PrometheusFamily[]): string {
  const lines: string[] = [];
  for (const f of families) {
    lines.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const labels = Object.entries(s.labels ?? {}).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
      lines.push(`${f.name}${s.suffix ?? ''}${labels.length ? `{${labels.join(',')}}` : ''} ${formatValue(s.value)}`);
    }
  }
  return lines.join('\n') + '\n';
}
