/**
 * The exact next command an engineer types for an operation (issue 11): computed from what recon
 * knows (state, linked transactions, ambiguous candidates), so nobody needs a second tool.
 */
import { shellQuote } from './shell.js';

export interface NextInput {
  id: string;
  state: string;
  review_reason: string | null;
  /** Provider ids linked to the operation. */
  linked: string[];
  /** Look-alikes without recon metadata (from the latest lookup). */
  candidates: string[];
}

export function nextCommands(o: NextInput): string[] {
  const id = shellQuote(o.id);
  switch (o.state) {
    case 'needs_review': {
      if (o.linked.length > 1) {
        const [keep, ...others] = o.linked.map(shellQuote);
        return [
          `recon review resolve ${id} --outcome confirmed --txn ${keep} --note "kept ${keep}; ${others.join(', ')} reversed at the provider (ticket …)"`,
        ];
      }
      if (o.linked.length === 1) {
        const txn = shellQuote(o.linked[0]);
        // A mismatch (amount, currency, metadata) is refused without --force (exit 4): the command
        // printed is the one that works, with the reason the audit trail will carry.
        if (o.review_reason === 'mismatch')
          return [
            `recon ops show ${id}`,
            `recon review resolve ${id} --outcome confirmed --txn ${txn} --force --reason "the difference is expected: …" --note "…"`,
          ];
        return [`recon review resolve ${id} --outcome confirmed --txn ${txn} --note "…"`];
      }
      if (o.candidates.length)
        return [
          ...o.candidates.map((c) => `recon attach ${id} ${shellQuote(c)}`),
          `recon review resolve ${id} --outcome failed --note "no refund at the provider is this one: …"`,
        ];
      return [
        `recon lookup ${id}`,
        `recon review resolve ${id} --outcome failed --note "checked the provider: nothing done (…)"`,
      ];
    }
    case 'outcome_unknown':
    case 'pending':
    case 'submitting':
      return [`recon lookup ${id}`, `recon retry ${id} --dry-run`];
    case 'proposed':
      return [`recon ops approve ${id} --ref TICKET`];
    case 'approved':
      return [`recon ops submit ${id}`];
    default:
      return [];
  }
}
