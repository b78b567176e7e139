/**
 * Reads a tar archive (ustar, as PGlite's dumpDataDir writes one) held in memory: its folders and
 * regular files, each file's bytes a view into the archive (no copy). Nothing else is accepted: a
 * link, a device or a name that climbs out of the archive's root is an error, not skipped.
 */

export interface TarEntry {
  /** The path inside the archive, without a leading or trailing `/`; never `..` nor empty parts. */
  name: string;
  type: 'file' | 'dir';
  /** A file's bytes: a view into the archive. Empty for a folder. */
  data: Uint8Array;
}

const BLOCK = 512;

export function readTar(archive: Uint8Array): TarEntry[] {
  const entries: TarEntry[] = [];
  for (let at = 0; at + BLOCK <= archive.length;) {
    const header = archive.subarray(at, at + BLOCK);
    // The archive ends with two zero blocks; one is enough to stop. An entry's name is never empty.
    if (header[0] === 0 && header.every((b) => b === 0)) break;
    if (!checksumMatches(header)) throw new Error(`tar: damaged header at byte ${at}`);
    const size = octal(header, 124, 12);
    const type = header[156];
    const prefix = text(header, 345, 155);
    const name = normalise((prefix ? `${prefix}/` : '') + text(header, 0, 100), at);
    const start = at + BLOCK;
    if (start + size > archive.length) throw new Error(`tar: ${name} runs past the end of the archive`);
    if (type === 0x30 /* '0' */ || type === 0) {
      entries.push({ name, type: 'file', data: archive.subarray(start, start + size) });
    } else if (type === 0x35 /* '5' */) {
      if (name) entries.push({ name, type: 'dir', data: archive.subarray(start, start) });
    } else {
      throw new Error(`tar: ${name || '(root)'} is neither a file nor a folder (type ${String.fromCharCode(type)})`);
    }
    at = start + Math.ceil(size / BLOCK) * BLOCK;
  }
  return entries;
}

function normalise(raw: string, at: number): string {
  const parts = raw.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new Error(`tar: ${raw} at byte ${at} climbs out of the archive`);
  return parts.join('/');
}

function text(header: Uint8Array, offset: number, length: number): string {
  const field = header.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return Buffer.from(field.buffer, field.byteOffset, end === -1 ? length : end).toString('utf8');
}

function octal(header: Uint8Array, offset: number, length: number): number {
  const s = text(header, offset, length).trim();
  if (!/^[0-7]*$/.test(s)) throw new Error(`tar: a number that is not octal (${JSON.stringify(s)})`);
  return s ? parseInt(s, 8) : 0;
}

/** The header's sum with its checksum field counted as spaces. */
function checksumMatches(header: Uint8Array): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i];
  return sum === octal(header, 148, 8);
}
