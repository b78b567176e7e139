#!/usr/bin/env node
// Builds the migrated store template (src/store/template.ts): dist/store-template/<key>.tar.gz, a
// PGlite data folder after initdb and every migration, that new embedded stores (`memory:`, a new
// `pglite:` folder, `recon init`) are loaded from instead of running initdb and the migrations.
// Run by `npm run build` and `npm test` after the TypeScript is emitted; does nothing when the
// template for the current migrations and PGlite version is there already.
//
//   node scripts/store-template.mjs
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { writeTemplate } = await import(pathToFileURL(path.join(root, 'dist', 'src', 'store', 'template.js')).href);
const { file, written } = await writeTemplate();
if (written) process.stderr.write(`scripts/store-template.mjs: wrote ${path.relative(root, file)}\n`);
