/**
 * The anchor of `audit verify --anchor FILE` (SPEC §5): the head (seq, hash) of every chain, kept
 * by the user outside the database, with one digest over all heads. The role that owns recon's
 * tables can disable the append-only triggers and delete a chain's tail, and then the chain is
 * still internally consistent; compared with heads it was shown earlier, it ends too soon.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { UsageError } from '../../errors.js';
import { canonicalJson, sha256Hex } from '../../lib/canonical.js';

/**
 * operation id → [seq, hash] of its chain's last event. A Map, not an object: an operation may be
 * named `__proto__` or `constructor`, and an object keyed by it would drop or invent a head.
 */
export type AnchorHeads = Map<string, [number, string]>;

export interface Anchor {
  heads: AnchorHeads;
  digest: string;
}

export function anchorDigest(heads: AnchorHeads): string {
  return sha256Hex(canonicalJson(headsObject(heads)));
}

/** The heads as a JSON object, in id order; own properties, so `__proto__` is a key like any other. */
function headsObject(heads: AnchorHeads): Record<string, [number, string]> {
  return Object.fromEntries([...heads].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * Reads an anchor file; null when it does not exist (the first run, which writes it). Anything
 * else that is not a whole, intact anchor is a usage error that leaves the file alone: a damaged
 * anchor must never be silently replaced by the heads of a trail it was meant to check.
 */
export async function readAnchor(file: string): Promise<Anchor | null> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new UsageError(`--anchor ${file}: cannot read it (${(err as Error).message})`, { cause: err });
  }
  const garbled = (why: string) =>
    new UsageError(
      `--anchor ${file}: not a recon anchor file (${why}); restore it from your copy, or move it away to start a new anchor (which forgets the heads it held)`,
    );
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw garbled('malformed JSON');
  }
  const a = raw as { heads?: unknown; digest?: unknown } | null;
  if (!a || typeof a !== 'object' || !a.heads || typeof a.heads !== 'object' || Array.isArray(a.heads))
    throw garbled('no "heads" object');
  const heads: AnchorHeads = new Map(Object.entries(a.heads as Record<string, [number, string]>));
  for (const [id, head] of heads) {
    const ok =
      Array.isArray(head) &&
      head.length === 2 &&
      Number.isSafeInteger(head[0]) &&
      head[0] > 0 &&
      typeof head[1] === 'string' &&
      /^[0-9a-f]{64}$/.test(head[1]);
    if (!ok) throw garbled(`heads.${id} is not [seq, hash]`);
  }
  if (typeof a.digest !== 'string' || a.digest !== anchorDigest(heads)) {
    throw new UsageError(
      `--anchor ${file}: its digest does not match its heads: the file was edited or damaged; restore it from your copy, or move it away to start a new anchor`,
    );
  }
  return { heads, digest: a.digest };
}

/** Writes the anchor atomically (a temp file in the same folder, renamed over the old one). */
export async function writeAnchor(file: string, heads: AnchorHeads, now: Date): Promise<void> {
  const body = {
    recon_anchor: 1,
    written_at: now.toISOString(),
    operations: heads.size,
    digest: anchorDigest(heads),
    heads: headsObject(heads),
  };
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await fs.writeFile(tmp, JSON.stringify(body, null, 1) + '\n', { mode: 0o600 });
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw new UsageError(`--anchor ${file}: cannot write it (${(err as Error).message})`, { cause: err });
  }
}
