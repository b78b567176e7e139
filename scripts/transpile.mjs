#!/usr/bin/env node
// `npm test`'s build: what `npm run build` (tsc) emits into dist/ — the same files, byte for byte,
// source maps included — without loading the type declarations or checking types: ~1–3 s instead
// of ~9 s. Types are checked by `npm run typecheck` (CI runs it before the tests).
//
// How: the files tsconfig.json names, emitted as one program with `noCheck`, `noResolve` and
// `noLib`: no import is followed and no declaration file read, so each file is emitted on its own,
// as `ts.transpileModule` would (batched: one program instead of one per file). tsconfig.json's
// `isolatedModules` makes tsc reject what such a file-by-file emit could get wrong (a re-exported
// type without `type`, a const enum from another file).
//
//   node scripts/transpile.mjs    # reads tsconfig.json next to this folder; writes its outDir
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const configPath = path.join(root, 'tsconfig.json');
const read = ts.readConfigFile(configPath, ts.sys.readFile);
if (read.error) fail([read.error]);
const config = ts.parseJsonConfigFileContent(read.config, ts.sys, root, undefined, configPath);
if (config.errors.length > 0) fail(config.errors);
if (!config.options.isolatedModules) fail('tsconfig.json must set isolatedModules: files are emitted one by one');

const program = ts.createProgram({
  rootNames: config.fileNames,
  options: { ...config.options, noCheck: true, noResolve: true, noLib: true, types: [], noEmitOnError: false },
});
// Syntax errors only: without the lib and the imports every file would "miss" its globals.
const syntax = program.getSyntacticDiagnostics();
if (syntax.length > 0) fail(syntax);
const { emitSkipped, diagnostics } = program.emit();
if (emitSkipped || diagnostics.length > 0) fail(diagnostics.length > 0 ? diagnostics : 'nothing emitted');

function fail(problem) {
  const text =
    typeof problem === 'string'
      ? problem
      : ts.formatDiagnostics(problem, {
          getCanonicalFileName: (f) => f,
          getCurrentDirectory: () => root,
          getNewLine: () => '\n',
        });
  process.stderr.write(`scripts/transpile.mjs: ${text}\n`);
  process.exit(1);
}
