/**
 * The migrated store template: a PGlite data folder that has been through initdb and every
 * migration, as a gzipped tarball (PGlite's `dumpDataDir`). Creating an embedded store from
 * nothing runs PostgreSQL's initdb in WebAssembly and then the migrations, seconds of CPU; unpacking
 * the tarball (pglite.ts: into the new folder, or into PGlite's in-memory file system) takes a
 * fraction of that. A new `memory:` store,
 * and a new `pglite:` folder opened with auto-migration (every command's first use, `recon init`),
 * start from it.
 *
 * Built by `npm run build` (and `npm test`): `scripts/store-template.mjs` writes
 * `dist/store-template/<key>.tar.gz`, one store without PostgreSQL's template databases
 * (dumpMigratedStore in pglite.ts), for `memory:` stores and new folders alike. The key names the
 * PGlite version and a hash of the migration files, so a template is only ever used with the PostgreSQL build and the migrations it was made
 * from; when none matches (a migration added since the build, another PGlite), a store is created
 * and migrated as before. A store made from it holds what the migrations write, their bookkeeping
 * in `recon.schema_migrations` included (applied_at is set to the store's creation), so later
 * migrations apply to it as to any other.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import zlib from 'node:zlib';
import { loadMigrations, migrationsDir } from './migrate.js';

/** Where the template for the current migrations and PGlite would be: `<package>/dist/store-template/<key>.tar.gz`. */
export function templatePath(): string {
  const dir = migrationsDir();
  const root = path.resolve(dir, '..', '..', '..');
  return path.join(root, 'dist', 'store-template', `${templateKey(dir)}.tar.gz`);
}

/**
 * How the template is made, beyond the migrations (pglite.ts, dumpMigratedStore): part of the key, so
 * a template built another way before is rebuilt rather than used.
 */
const FORMAT = 'initdb --wal-segsize=1, recycled WAL dropped, without template databases';

/** `pglite-<version>-schema-<latest>-<hash of the format and the migration files>`. */
function templateKey(dir: string): string {
  const migrations = loadMigrations(dir);
  const hash = createHash('sha256');
  hash.update(`${FORMAT}\0`);
  for (const m of migrations) hash.update(`${m.file}\0${m.sql}\0`);
  const latest = migrations.length ? migrations[migrations.length - 1].version : 0;
  return `pglite-${pgliteVersion()}-schema-${latest}-${hash.digest('hex').slice(0, 16)}`;
}

function pgliteVersion(): string {
  // The package's exports leave out package.json: walk up from its entry point.
  let dir = path.dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
  return (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * The template's data folder tarball, uncompressed, when one matching this build is there;
 * undefined otherwise. A Blob whose `arrayBuffer()` is the tar (`type` '': not gzipped): node's zlib
 * inflates the 3 MB into its ~24 MB in one call, into one buffer sized from the gzip trailer, handed
 * over without a copy (a web DecompressionStream, in 64 KiB chunks then copied into one buffer, was
 * ~40% of loading the template: node --cpu-prof of `recon demo`). It inflates on a thread of libuv's
 * pool, from the moment the template is read: meanwhile the main thread imports PGlite (and, for a
 * `memory:` store, instantiates PostgreSQL, which comes before PGlite asks its file system for files).
 * Read by `prefetchTemplate` earlier still, it is that read's bytes.
 */
export function readTemplate(): Blob | undefined {
  const ready = prefetched;
  prefetched = undefined;
  return ready ?? inflateTemplate();
}

let prefetched: Blob | undefined;

/**
 * Starts reading and inflating the template for the next store `readTemplate()` is asked for, so
 * that work overlaps with whatever the caller loads before it opens the store (`recon demo`, its modules).
 */
export function prefetchTemplate(): void {
  prefetched ??= inflateTemplate();
}

function inflateTemplate(): Blob | undefined {
  let gz: Buffer;
  try {
    gz = fs.readFileSync(templatePath());
  } catch {
    return undefined;
  }
  // ISIZE, the last 4 bytes: the uncompressed size (mod 2^32; the template is ~24 MB). One byte more
  // than that lets zlib end in the first output chunk, so there is nothing to concatenate; the byte
  // past the tar's end (itself two zero records) is never read as a file.
  const size = gz.length >= 4 ? gz.readUInt32LE(gz.length - 4) : 0;
  const bytes = new Promise<ArrayBuffer>((resolve, reject) => {
    zlib.gunzip(gz, { chunkSize: Math.max(64 * 1024, size + 1) }, (err, tar) => {
      if (err) return reject(err);
      // The whole output buffer, the spare byte included (see above): no copy.
      resolve(tar.byteOffset === 0 ? tar.buffer : tar.buffer.slice(tar.byteOffset, tar.byteOffset + tar.byteLength));
    });
  });
  // A damaged template fails the store's creation when PGlite asks for the bytes, not before.
  bytes.catch(() => undefined);
  // type '': not a gzip type, so PGlite untars the bytes as they are.
  return { type: '', size, arrayBuffer: () => bytes } as unknown as Blob;
}

/**
 * Writes the template for the current migrations (a fresh in-memory store, migrated, dumped), unless
 * it is there already; removes templates of other keys. Returns its path.
 */
export async function writeTemplate(): Promise<{ file: string; written: boolean }> {
  const file = templatePath();
  const dir = path.dirname(file);
  if (fs.existsSync(file)) return { file, written: false };
  const { dumpMigratedStore } = await import('./pglite.js');
  const dump = await dumpMigratedStore();
  fs.mkdirSync(dir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, dump);
  fs.renameSync(tmp, file);
  for (const other of fs.readdirSync(dir)) {
    if (other !== path.basename(file)) fs.rmSync(path.join(dir, other), { force: true });
  }
  return { file, written: true };
}
