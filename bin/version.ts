/**
 * What `recon --version` prints: the package version, the store schema version this binary
 * expects (the highest numbered migration it ships), and the Node.js version running it. Read
 * from the package's files only (package.json, the migrations folder's listing), so that
 * bin/recon answers without loading the CLI, a store or any dependency.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root: the nearest folder above this module with a package.json (works from source and dist/). */
function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`cannot find recon's package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

export interface VersionInfo {
  version: string;
  /** Highest `NNNN_name.sql` in src/store/migrations (what `recon db status` calls latest). */
  schema: number;
  node: string;
}

export function versionInfo(): VersionInfo {
  const root = packageRoot();
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  let schema = 0;
  for (const file of fs.readdirSync(path.join(root, 'src', 'store', 'migrations'))) {
    const m = /^(\d+)_[A-Za-z0-9_.-]+\.sql$/.exec(file);
    if (m) schema = Math.max(schema, Number(m[1]));
  }
  return { version: pkg.version, schema, node: process.version };
}

/** `recon 0.1.0`, `store schema 3`, `node v20.12.2`: one fact a line, the version first for scripts. */
export function versionText(info: VersionInfo = versionInfo()): string {
  return `recon ${info.version}\nstore schema ${info.schema}\nnode ${info.node}`;
}
