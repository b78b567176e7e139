import type { Command } from 'commander';
import { ResultExit } from '../src/errors.js';
import { getOperation } from '../src/core/journal/operations.js';
import { submitOperation } from '../src/core/attempt/submit.js';
import { validateId } from '../src/core/intake/validate.js';
import { operationsJson, type OperationJson } from '../src/core/journal/views.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, println } from './support/io.js';
import { styleFor } from './support/style.js';

export function register(ops: Command): void {
  ops
    .command('submit')
    .description('claim an approved operation and make its first attempt now, with its own idempotency key')
    .argument('<id>', 'operation id')
    .addHelpText(
      'after',
      `
A timeout, dropped connection, 409, 429 or 5xx ends in outcome_unknown (never failed), exit 7:
recon run then asks the provider what happened. Exit 0 whatever the classified outcome,
also when the answer came after the attempt's lease ran out and was recorded as a late
response ("late_response": true); exit 4 when the operation is not approved or is claimed
by another worker, or when the lease ran out and the answer named nothing to record.

Example:
  $ recon ops submit refund:ord_1042 --json`,
    )
    .action(
      action(async ([id], _o, deps) => {
        const r = await runSubmit({ id }, deps);
        if (deps.globals.json) printJson(deps.io, r.json);
        else await render(r, deps);
        // `recon ops submit ID && notify_customer` must not tell the customer it is done (SPEC §7).
        if (r.json.state === 'outcome_unknown') throw new ResultExit(7, 'the outcome is unknown');
      }),
    );
}

export interface SubmitOptions {
  /** The operation id, as typed. */
  id: string;
}

/** The first attempt's result: the operation as `--json` shows it, with the attempt and its result. */
export interface SubmitResult {
  id: string;
  json: OperationJson & {
    attempt: number;
    late_response: boolean;
    result: {
      outcome: string;
      error_class: string | null;
      http_status: number | null;
      provider_request_id: string | null;
      replayed: boolean;
    };
  };
}

/** Claims the approved operation and makes its first attempt at the provider. */
export async function runSubmit(o: SubmitOptions, deps: Deps): Promise<SubmitResult> {
  const id = validateId(o.id);
  const core = await deps.core();
  const op = await getOperation(core.db, id);
  const provider = await deps.provider(op.provider);
  const r = await submitOperation(core, provider, id);
  const [json] = await operationsJson(core.db, [r.operation]);
  return {
    id,
    json: {
      ...json,
      attempt: r.attempt,
      late_response: r.late_response ?? false,
      result: {
        outcome: r.result.outcome,
        error_class: r.result.error_class ?? null,
        http_status: r.result.http_status ?? null,
        provider_request_id: r.result.provider_request_id ?? null,
        replayed: r.result.replayed ?? false,
      },
    },
  };
}

async function render({ id, json }: SubmitResult, deps: Deps): Promise<void> {
  const s = await styleFor(deps.io);
  const why = json.result.error_class
    ? ` (${json.result.error_class}${json.result.http_status ? ` ${json.result.http_status}` : ''})`
    : '';
  // The result is the command's data: stdout, like every other command's.
  println(
    deps.io,
    `${id}: attempt ${json.attempt} → ${s.state(json.state)}${why}${json.provider_txn_ids.length ? `  ${json.provider_txn_ids.join(' ')}` : ''}`,
  );
  if (json.late_response)
    info(
      deps.io,
      `the answer came back after this attempt's lease ran out; it was recorded as a late response (see: recon ops show ${id})`,
    );
  if (json.state === 'outcome_unknown')
    info(
      deps.io,
      `the provider may or may not have done it; do not submit again: find out with recon lookup ${id} (or let recon run decide)`,
    );
}
