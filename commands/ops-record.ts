import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { recordOperations, type RecordedOperation } from '../src/core/intake/record.js';
import { parseOperationsText, validateOperation } from '../src/core/intake/validate.js';
import { UsageError } from '../src/errors.js';
import { validatePayloads } from '../src/providers/validate.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, println, readAll } from './support/io.js';
import { renderTable, styleFor } from './support/style.js';

export interface RecordOptions {
  file?: string;
}

export function register(ops: Command): void {
  ops
    .command('record')
    .description('record operations before calling the provider: a JSON object, an array, or NDJSON lines')
    .argument('[file]', 'file to read, or - for stdin (default: stdin)')
    .addHelpText(
      'after',
      `
Same id + same payload is the existing operation, unchanged ("created": false).
Same id + another payload is refused (exit 4) and nothing is written; a batch is all or nothing.
With "approval" the operation is approved, else proposed (see: recon ops approve).

Example:
  $ echo '{"id":"refund:ord_1042","provider":"stripe","action":"refund",
           "payload":{"payment_intent":"pi_123","amount":1999,"currency":"usd"},
           "client_reference":"ord_1042","approval":"TICKET-88"}' | recon ops record -`,
    )
    .action(action<RecordOptions>(async ([file], _opts, deps) => render(deps, await runRecord({ file }, deps))));
}

/** Reads, validates and records the operations (idempotently): each with its state and whether it is new. */
export async function runRecord(o: RecordOptions, deps: Deps): Promise<RecordedOperation[]> {
  const source = !o.file || o.file === '-' ? 'stdin' : o.file;
  const text = await readSource(o.file, deps);
  const config = await deps.config();
  // A provider whose secret is not set here can still be recorded for; it is needed only to submit.
  const providers = [...Object.keys(config.providers), ...Object.keys(config.unavailable ?? {})];
  const raw = parseOperationsText(text, source);
  const where = (i: number) => (raw.length > 1 ? `${source}[${i}]: ` : '');
  const inputs = raw.map((r, i) => validateOperation(r, providers, where(i)));
  await validatePayloads(config, inputs, where);
  return recordOperations(await deps.core(), inputs);
}

async function readSource(file: string | undefined, deps: Deps): Promise<string> {
  if (!file || file === '-') {
    if (!file && (deps.io.stdin as NodeJS.ReadStream).isTTY) {
      throw new UsageError('no input: give a FILE, or pipe operations on stdin with "-"');
    }
    return readAll(deps.io.stdin);
  }
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    // Exit 2, a usage error: 3 is for a missing operation or transaction.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      throw new UsageError(`${file}: no such file; give an existing FILE, or - for stdin`);
    throw err;
  }
}

async function render(deps: Deps, recorded: RecordedOperation[]): Promise<void> {
  if (deps.globals.json) return printJson(deps.io, { operations: recorded });
  const created = recorded.filter((r) => r.created).length;
  if (recorded.length <= 50) {
    const s = await styleFor(deps.io);
    println(
      deps.io,
      await renderTable(
        deps.io,
        ['id', 'state', 'created'],
        recorded.map((r) => [r.id, s.state(r.state), r.created ? 'yes' : 'no (existing)']),
      ),
    );
  }
  info(
    deps.io,
    `recorded ${recorded.length} operation(s): ${created} new, ${recorded.length - created} already recorded`,
  );
}
