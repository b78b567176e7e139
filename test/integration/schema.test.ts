/**
 * The committed schema dump (src/store/schema.sql) is what the migrations make: a migration
 * without its regenerated dump, or a dump edited by hand, fails here. `npm run schema:dump`
 * rewrites the file.
 */
import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { backends, removeTempStores } from '../support/backends.js';
import { dumpSchema, schemaFile } from '../support/schema-dump.js';

afterAll(() => removeTempStores());

describe.each(backends)('the schema dump on $name', (backend) => {
  it('src/store/schema.sql is the dump of a freshly migrated store (run `npm run schema:dump` after a migration)', async () => {
    const db = await backend.open();
    try {
      expect(await dumpSchema(db)).toBe(fs.readFileSync(schemaFile(), 'utf8'));
    } finally {
      await db.close();
    }
  });
});
