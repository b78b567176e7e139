import type { Command } from 'commander';
import * as attach from './attach.js';
import * as auditDuplicates from './audit-duplicates.js';
import * as auditVerify from './audit-verify.js';
import * as db from './db.js';
import * as completion from './completion.js';
import * as demo from './demo.js';
import * as doctor from './doctor.js';
import * as escalate from './escalate.js';
import * as init from './init.js';
import * as lookup from './lookup.js';
import * as opsApprove from './ops-approve.js';
import * as opsList from './ops-list.js';
import * as opsRecord from './ops-record.js';
import * as opsShow from './ops-show.js';
import * as opsSubmit from './ops-submit.js';
import * as retry from './retry.js';
import * as review from './review.js';
import * as run from './run.js';
import * as sandbox from './sandbox.js';
import * as stats from './stats.js';
import * as webhook from './webhook.js';

/** Registers every command; each file only parses and renders, the work is in src/. */
export function registerAll(program: Command): void {
  init.register(program);
  db.register(program);
  const ops = program
    .command('ops')
    .description('record, approve, submit, list and show operations')
    .addHelpText(
      'after',
      '\nExamples:\n  $ recon ops record ops.ndjson\n  $ recon ops list --unresolved\n  $ recon ops show refund:ord_1042',
    );
  opsRecord.register(ops);
  opsApprove.register(ops);
  opsSubmit.register(ops);
  opsList.register(ops);
  opsShow.register(ops);
  lookup.register(program);
  attach.register(program);
  retry.register(program);
  escalate.register(program);
  review.register(program);
  run.register(program);
  webhook.register(program);
  stats.register(program);
  sandbox.register(program);
  demo.register(program);
  doctor.register(program);
  completion.register(program);
  const audit = program
    .command('audit')
    .description('the audit trail and provider-side duplicate audits')
    .addHelpText(
      'after',
      '\nExamples:\n  $ recon audit verify\n  $ recon audit duplicates --provider stripe --since 30d --csv',
    );
  auditDuplicates.register(audit);
  auditVerify.register(audit);
}
