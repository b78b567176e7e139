#!/usr/bin/env node
// Lists imports between areas that run upward (bin → commands → agent/demo → providers → core
// phases → store → config → sandbox → lib; src/index.ts, the library entry, sits on top), and import
// cycles between files.   usage: node scripts/import-arrows.mjs .
import fs from 'node:fs';
import path from 'node:path';
const root = process.argv[2];
const order = [
  'bin',
  'commands',
  'src/demo',
  'src/agent',
  'src/providers',
  'src/core',
  'src/store',
  'src/config',
  'src/sandbox',
  'src/lib',
  'src',
];
const coreOrder = ['report', 'audit', 'review', 'reconcile', 'attempt', 'found', 'intake', 'journal'];
const area = (f) => (f === 'src/index.ts' ? 'bin' : order.find((a) => f.startsWith(a + '/')));
const files = [];
const walk = (d) => {
  for (const e of fs.readdirSync(path.join(root, d), { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (/\.ts$/.test(e.name) && !p.includes('migrations')) files.push(p);
  }
};
for (const d of ['bin', 'commands', 'src']) walk(d);
const graph = new Map();
let up = 0;
for (const f of files) {
  const s = fs.readFileSync(path.join(root, f), 'utf8');
  const deps = [];
  for (const m of s.matchAll(/(?:from|import\()\s*'(\.[^']+)\.js'/g)) {
    const t = path.normalize(path.join(path.dirname(f), m[1] + '.ts'));
    deps.push(t);
    const a = area(f),
      b = area(t);
    if (order.indexOf(b) < order.indexOf(a)) {
      console.log(`UP  ${f} -> ${t}`);
      up++;
    }
    if (a === 'src/core' && b === 'src/core') {
      const pa = f.split('/')[2],
        pb = t.split('/')[2];
      if (coreOrder.indexOf(pb) < coreOrder.indexOf(pa)) {
        console.log(`UP(core) ${f} -> ${t}`);
        up++;
      }
    }
  }
  graph.set(f, deps);
}
// cycles (Tarjan)
let idx = 0;
const st = [],
  on = new Set(),
  ix = new Map(),
  low = new Map();
const cycles = [];
const sc = (v) => {
  ix.set(v, idx);
  low.set(v, idx);
  idx++;
  st.push(v);
  on.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!ix.has(w)) {
      sc(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (on.has(w)) low.set(v, Math.min(low.get(v), ix.get(w)));
  }
  if (low.get(v) === ix.get(v)) {
    const c = [];
    let w;
    do {
      w = st.pop();
      on.delete(w);
      c.push(w);
    } while (w !== v);
    if (c.length > 1) cycles.push(c);
  }
};
for (const v of graph.keys()) if (!ix.has(v)) sc(v);
for (const c of cycles) console.log('CYCLE', c.join(' '));
console.log(`upward imports: ${up}, cycles: ${cycles.length}`);
