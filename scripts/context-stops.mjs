#!/usr/bin/env node
// Counts the "stops" a reader makes following a function's context: a depth-first walk from the
// entry function through every call to a function declared in the project (each function visited
// once, in call order). A stop is a function reached; a "return" is a stop in a file the reader
// had already left (a file visited before that is not the file of the previous stop).
// usage: node scripts/context-stops.mjs . src/core/reconcile/run.ts runPass [--leaf PATH]... [--descend-only PATH]...
//   (VERBOSE=1 lists the stops; a leaf is marked "(leaf)")
//
// Refinements of the rule, each given on the command line so that every count says what it counted:
//   --leaf PATH          a function declared under PATH (a folder or a file) is one stop, read at its
//                        signature and doc comment like a library's API, and not descended into.
//                        `--leaf src/lib/`: src/lib has no recon concepts (canonicalJson, formatAmount,
//                        limitConcurrency: their insides are not the pass's context).
//   --descend-only PATH  only functions under PATH are descended into; every other function reached is
//                        a leaf (one stop). With `--descend-only src/core/reconcile/ --leaf
//                        src/core/reconcile/rule.ts`: the pass's own code is read in full, and what it
//                        calls in other areas (the journal, the attempt, src/lib) and the rule (`decide`,
//                        SPEC §4, a pure function with its own tests) is read as their APIs.
// Without flags: the original rule, every project function reached is descended into.
import path from 'node:path';
import { createRequire } from 'node:module';

const root = path.resolve(process.argv[2]);
const require = createRequire(path.join(root, 'package.json'));
const ts = require('typescript');
const cfgPath = path.join(root, 'tsconfig.json');
const cfg = ts.parseJsonConfigFileContent(ts.readConfigFile(cfgPath, ts.sys.readFile).config, ts.sys, root);
const program = ts.createProgram(cfg.fileNames, cfg.options);
const checker = program.getTypeChecker();
const entryFile = program.getSourceFile(path.join(root, process.argv[3]));
const entryName = process.argv[4];
const leaves = [];
const descendOnly = [];
for (let i = 5; i < process.argv.length; i += 2) {
  const [flag, value] = [process.argv[i], process.argv[i + 1]];
  if (flag === '--leaf' && value) leaves.push(value);
  else if (flag === '--descend-only' && value) descendOnly.push(value);
  else throw new Error(`unknown argument ${flag}; use --leaf PATH or --descend-only PATH`);
}
const isLeaf = (file) =>
  leaves.some((p) => file.startsWith(p)) || (descendOnly.length > 0 && !descendOnly.some((p) => file.startsWith(p)));

function findDecl(sf, name) {
  let found;
  const visit = (n) => {
    if (found) return;
    if ((ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n)) && n.name?.getText() === name) found = n;
    else if (ts.isVariableDeclaration(n) && n.name.getText() === name) found = n;
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}
const inProject = (d) => {
  const f = d.getSourceFile().fileName;
  return f.startsWith(root) && !f.includes('node_modules') && /\/(src|commands|bin)\//.test(f);
};
const body = (d) => (ts.isVariableDeclaration(d) ? d.initializer : d);
const seen = new Set();
const stops = [];
function walk(decl) {
  if (seen.has(decl)) return;
  seen.add(decl);
  const file = path.relative(root, decl.getSourceFile().fileName);
  stops.push({ file, name: decl.name?.getText() ?? '?', leaf: isLeaf(file) });
  if (isLeaf(file)) return;
  const calls = [];
  const visit = (n) => {
    if (ts.isCallExpression(n) || ts.isNewExpression(n)) {
      let sym = checker.getSymbolAtLocation(ts.isCallExpression(n) ? n.expression : n.expression);
      if (!sym && ts.isPropertyAccessExpression(n.expression)) sym = checker.getSymbolAtLocation(n.expression.name);
      if (sym && sym.flags & ts.SymbolFlags.Alias) sym = checker.getAliasedSymbol(sym);
      const d = sym?.declarations?.find(
        (x) =>
          inProject(x) &&
          (ts.isFunctionDeclaration(x) ||
            ts.isMethodDeclaration(x) ||
            (ts.isVariableDeclaration(x) &&
              x.initializer &&
              (ts.isArrowFunction(x.initializer) || ts.isFunctionExpression(x.initializer)))),
      );
      if (d) calls.push(d);
    }
    ts.forEachChild(n, visit);
  };
  const b = body(decl);
  if (b) ts.forEachChild(b, visit);
  for (const c of calls) walk(c);
}
walk(findDecl(entryFile, entryName));
const visited = new Set();
let returns = 0;
let prev;
for (const s of stops) {
  if (s.file !== prev && visited.has(s.file)) returns++;
  visited.add(s.file);
  prev = s.file;
}
if (process.env.VERBOSE) for (const s of stops) console.log(`${s.file}: ${s.name}${s.leaf ? ' (leaf)' : ''}`);
console.log(`stops ${stops.length}, files ${visited.size}, returns to a file already left ${returns}`);
