/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for tests of what
 * recon writes for node_exporter's textfile collector: it throws on anything a scraper would reject
 * or misread, so a test that parses the output also validates it.
 * https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
 */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  help: string | null;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  samples: Sample[];
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*';
const VALUE = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)$/;
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})?\\s+(\\S+)(?:\\s+(-?\\d+))?$`);
const LABEL_PAIR = new RegExp(`^(${LABEL})="((?:[^"\\\\\\n]|\\\\[\\\\"n])*)"`);

function parseLabels(text: string, line: number): Record<string, string> {
  const labels: Record<string, string> = {};
  let rest = text;
  while (rest.length) {
    const m = LABEL_PAIR.exec(rest);
    if (!m) throw new Error(`line ${line}: bad label set {${text}}`);
    if (m[1] in labels) throw new Error(`line ${line}: label ${m[1]} repeated`);
    labels[m[1]] = m[2].replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
    rest = rest.slice(m[0].length);
    if (rest.startsWith(',')) rest = rest.slice(1);
    else if (rest.length) throw new Error(`line ${line}: expected "," in {${text}}`);
  }
  return labels;
}

function familyOf(sample: string, families: Map<string, Family>): Family | undefined {
  if (families.has(sample)) return families.get(sample);
  for (const suffix of ['_count', '_sum', '_bucket']) {
    if (!sample.endsWith(suffix)) continue;
    const f = families.get(sample.slice(0, -suffix.length));
    if (f && (f.type === 'summary' || f.type === 'histogram') && (suffix !== '_bucket' || f.type === 'histogram'))
      return f;
  }
  return undefined;
}

/** Parses and validates; every sample must belong to a family declared by a preceding TYPE line. */
export function parsePrometheus(text: string): Map<string, Family> {
  if (text.length && !text.endsWith('\n')) throw new Error('the last line must end with a newline');
  const families = new Map<string, Family>();
  const helps = new Map<string, string>();
  const seen = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    if (raw === '') return;
    const meta = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(raw);
    if (meta) {
      const [, kind, name, rest = ''] = meta;
      if (!new RegExp(`^${NAME}$`).test(name)) throw new Error(`line ${line}: bad metric name ${name}`);
      if (kind === 'HELP') {
        if (helps.has(name)) throw new Error(`line ${line}: second HELP for ${name}`);
        if (/\\[^\\n]|\\$/.test(rest.replace(/\\[\\n]/g, '')))
          throw new Error(`line ${line}: bad escape in HELP ${rest}`);
        helps.set(
          name,
          rest.replace(/\\([\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c)),
        );
        return;
      }
      if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest))
        throw new Error(`line ${line}: bad TYPE ${rest}`);
      if (families.has(name)) throw new Error(`line ${line}: second TYPE for ${name}`);
      if (seen.has(name)) throw new Error(`line ${line}: TYPE for ${name} after its samples`);
      families.set(name, { name: name, help: helps.get(name) ?? null, type: rest as Family['type'], samples: [] });
      return;
    }
    if (raw.startsWith('#')) return;
    const m = SAMPLE.exec(raw);
    if (!m) throw new Error(`line ${line}: not a sample: ${raw}`);
    const [, name, labelText, valueText] = m;
    if (!VALUE.test(valueText)) throw new Error(`line ${line}: bad value ${valueText}`);
    const family = familyOf(name, families);
    if (!family) throw new Error(`line ${line}: sample ${name} has no TYPE line before it`);
    seen.add(family.name);
    const labels = labelText ? parseLabels(labelText, line) : {};
    if (family.type === 'summary' && name === family.name && !('quantile' in labels))
      throw new Error(`line ${line}: summary sample without quantile`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (family.samples.some((s) => `${s.name}${JSON.stringify(Object.entries(s.labels).sort())}` === key)) {
      throw new Error(`line ${line}: duplicate sample ${key}`);
    }
    family.samples.push({
      name: name,
      labels,
      value: Number(valueText.replace(/^\+?Inf$/, 'Infinity').replace(/^-Inf$/, '-Infinity')),
    });
  });
  for (const f of families.values()) if (f.help === null) throw new Error(`${f.name}: no HELP line`);
  return families;
}
