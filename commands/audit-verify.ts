import type { Command } from 'commander';
import { readAnchor, writeAnchor, type AnchorHeads } from '../src/core/audit/anchor.js';
import { verifyChains, type KeyingReport } from '../src/core/audit/verify.js';
import { ResultExit } from '../src/errors.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { info, printJson, println } from './support/io.js';
import { renderTable } from './support/style.js';

/** What this run could check, in words: a person must not read "intact" as "authenticated" without the key. */
function keyingLine(k: KeyingReport, ok: boolean): string {
  if (k.hmac === 'checked')
    return `keyed: ${k.keyed_events} keyed event(s) ${ok ? 'authenticated' : 'checked'} with the audit key (key id ${k.key_id ?? '-'})${k.unkeyed_events ? `; ${k.unkeyed_events} unkeyed event(s) from before keying checked as a sha256 chain only` : ''}`;
  if (k.hmac === 'not_checked')
    return `NOT authenticated: no audit key given, so the unkeyed chain only was checked; the ${k.keyed_events} keyed event(s) (key id ${k.key_id ?? '-'}) could be forged without this showing. Set RECON_AUDIT_KEY or auditKey to check them`;
  return 'unkeyed chain only: this trail has no keyed events (no audit key configured), and a role that may insert audit rows can compute its sha256 chain';
}

export function register(audit: Command): void {
  audit
    .command('verify')
    .description('re-compute every hash chain of the audit trail; report the first broken link per operation')
    .option('--operation <id>', 'only this operation')
    .option(
      '--anchor <file>',
      'compare with the chain heads kept in FILE (outside the database), then rewrite it; written on first use',
    )
    .addHelpText(
      'after',
      `
Also checks that every operation has a chain and that the chain ends in the operation's state.
With --anchor, a chain that ends before (or differs at) a head recorded in FILE is broken: that is
how a deletion by the role that owns recon's tables is found. FILE is rewritten only when the
trail is intact, so the heads that prove a deletion are kept.

With the audit key (RECON_AUDIT_KEY, or auditKey in the config) each keyed event's HMAC is checked:
a forged or altered one is bad_hmac. Without it, only the chain is checked, and the output says so
(JSON: keying.hmac "not_checked").

Exit code 4 when a chain is broken; 2 when FILE is not an intact anchor or the key is not the store's.

Examples:
  $ recon audit verify --json
  $ recon audit verify --anchor /secure/recon-heads.json`,
    )
    .action(
      action<VerifyOptions>(async (_a, opts, deps) => {
        const { report, anchor: anchorJson } = await runVerify(opts, deps);
        if (anchorJson?.status === 'created')
          info(
            deps.io,
            `no anchor at ${anchorJson.file}: wrote one with ${anchorJson.heads} chain heads; nothing to compare with this time. Keep it outside the database`,
          );
        if (anchorJson?.status === 'kept')
          info(deps.io, `anchor ${anchorJson.file} kept as it was (the trail is broken)`);
        if (deps.globals.json) printJson(deps.io, { ...report, ...(anchorJson ? { anchor: anchorJson } : {}) });
        else if (report.ok) {
          const what = report.keying.hmac === 'not_checked' ? 'audit chain consistent' : 'audit trail intact';
          info(
            deps.io,
            `${what}: ${report.operations_checked} operation(s), ${report.events_checked} event(s) verified${anchorJson ? `, anchor ${anchorJson.status}` : ''}`,
          );
          info(deps.io, keyingLine(report.keying, true));
        } else {
          println(
            deps.io,
            await renderTable(
              deps.io,
              ['operation', 'seq', 'problem', 'expected', 'found'],
              report.broken.map((b) => [
                b.operation_id,
                b.seq,
                b.problem,
                b.expected.slice(0, 16),
                b.found.slice(0, 16),
              ]),
            ),
          );
          info(deps.io, `${report.broken.length} broken chain(s) among ${report.operations_checked} operation(s)`);
          info(deps.io, keyingLine(report.keying, false));
        }
        if (!report.ok) throw new ResultExit(4, 'a chain is broken');
      }),
    );
}

export interface VerifyOptions {
  /** Only this operation's chain. */
  operation?: string;
  /** The anchor file of chain heads (outside the database): compared with, then rewritten if intact. */
  anchor?: string;
}

/** The anchor after a run: written for the first time, moved forward, or kept (a broken trail). */
export interface AnchorResult {
  file: string;
  status: 'created' | 'updated' | 'kept';
  heads: number;
}

/** Re-computes the chains (with the audit key when there is one); moves the anchor only if intact. */
export async function runVerify(
  opts: VerifyOptions,
  deps: Deps,
): Promise<{ report: Awaited<ReturnType<typeof verifyChains>>; anchor?: AnchorResult }> {
  const core = await deps.core();
  const anchor = opts.anchor ? await readAnchor(opts.anchor) : null;
  const heads: AnchorHeads | undefined = opts.anchor ? new Map() : undefined;
  const report = await verifyChains(core.db, {
    operationId: opts.operation,
    anchor: anchor?.heads,
    heads,
    key: core.auditKey,
  });
  if (!opts.anchor || !heads) return { report };
  // Only an intact trail moves the anchor forward; with --operation, the other heads are kept.
  const next: AnchorHeads = opts.operation ? new Map([...(anchor?.heads ?? []), ...heads]) : heads;
  if (report.ok) await writeAnchor(opts.anchor, next, deps.now());
  const status = !report.ok ? 'kept' : anchor ? 'updated' : 'created';
  return {
    report,
    anchor: { file: opts.anchor, status, heads: (report.ok ? next : (anchor?.heads ?? new Map())).size },
  };
}
