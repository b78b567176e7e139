/** The tar reader that unpacks the migrated store template (src/lib/tar.ts), on archives GNU tar writes. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readTar } from '../../src/lib/tar.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-tar-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** `tar` over `files` (path → content; a trailing `/` is a folder), in ustar format, as bytes. */
function archive(name: string, files: Record<string, string>, extra: string[] = []): Uint8Array {
  const dir = path.join(root, name);
  for (const [p, content] of Object.entries(files)) {
    if (p.endsWith('/')) fs.mkdirSync(path.join(dir, p), { recursive: true });
    else {
      fs.mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
      fs.writeFileSync(path.join(dir, p), content);
    }
  }
  return new Uint8Array(execFileSync('tar', ['--format=ustar', '-C', dir, '-cf', '-', ...extra, '.']));
}

describe('readTar', () => {
  it('reads the folders and the files, each file its exact bytes, as a view into the archive', () => {
    const long = `${'d'.repeat(60)}/${'e'.repeat(60)}/f`; // over 100 characters: split into ustar's prefix and name
    const big = 'x'.repeat(1500);
    const bytes = archive('plain', {
      PG_VERSION: '18\n',
      'base/5/': '',
      'base/1/1259': big,
      [long]: 'deep',
      empty: '',
    });
    const entries = readTar(bytes);
    const files = Object.fromEntries(
      entries.filter((e) => e.type === 'file').map((e) => [e.name, Buffer.from(e.data).toString()]),
    );
    expect(files).toEqual({ PG_VERSION: '18\n', 'base/1/1259': big, [long]: 'deep', empty: '' });
    expect(
      entries
        .filter((e) => e.type === 'dir')
        .map((e) => e.name)
        .sort(),
    ).toEqual(
      [
        'base',
        'base/1',
        'base/5',
        'dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd',
        `${'d'.repeat(60)}/${'e'.repeat(60)}`,
      ].sort(),
    );
    const one = entries.find((e) => e.name === 'base/1/1259')!;
    expect(one.data.buffer).toBe(bytes.buffer);
  });

  it('refuses a link, a name that climbs out, and a damaged header, rather than skipping them', () => {
    fs.mkdirSync(path.join(root, 'link'), { recursive: true });
    fs.symlinkSync('/etc/passwd', path.join(root, 'link', 'passwd'));
    expect(() => readTar(archive('link', { a: 'a' }))).toThrow(/passwd is neither a file nor a folder/);

    const climbing = archive('climb', { 'x/a': 'a' }, ['--transform=s,^\\./x/a,../../a,']);
    expect(() => readTar(climbing)).toThrow(/climbs out of the archive/);

    const damaged = archive('damaged', { a: 'a' });
    damaged[10] ^= 1;
    expect(() => readTar(damaged)).toThrow(/damaged header at byte 0/);
  });
});
