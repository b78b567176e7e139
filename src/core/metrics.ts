import type { RunSummary } from './run.js';

/** Prometheus text exposition format (version 0.0.4) for one `recon run` pass. */
export function runMetrics(s: RunSummary, now: Date): string {
  const lines: string[] = [];
  const metric = (
    name: string,
    help: string,
    type: 'gauge' | 'counter',
    samples: [Record<string, string>, number][],
  ) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) {
      const l = Object.entries(labels).map(
        ([k, v]) => `${k}="${v.replace(/["\\\n]/g, (c) => (c === '\n' ? '\\n' : '\\' + c))}"`,
      );
      lines.push(`${name}${l.length ? `{${l.join(',')}}` : ''} ${value}`);
    }
  };
  metric(
    'recon_unresolved_operations',
    'Unresolved operations by state after the pass.',
    'gauge',
    Object.entries(s.unresolved_by_state).map(([state, n]) => [{ state }, n]),
  );
  const kinds: [string, number][] = [
    ['confirm', s.confirmed],
    ['fail', s.failed],
    ['pending', s.pending],
    ['retry', s.retried],
    ['review', s.escalated],
    ['wait', s.waiting],
    ['unavailable', s.unavailable],
  ];
  metric(
    'recon_run_decisions',
    'Decisions taken in the last pass, by kind.',
    'gauge',
    kinds.map(([decision, n]) => [{ decision }, n]),
  );
  metric('recon_run_claimed', 'Operations claimed in the last pass.', 'gauge', [[{}, s.claimed]]);
  metric('recon_run_errors', 'Operations that failed with an error in the last pass.', 'gauge', [
    [{}, s.errors.length],
  ]);
  metric('recon_run_provider_unavailable', 'Lookups that found the provider unavailable in the last pass.', 'gauge', [
    [{}, s.unavailable],
  ]);
  metric('recon_run_duration_seconds', 'Duration of the last pass.', 'gauge', [[{}, s.duration_ms / 1000]]);
  metric('recon_run_last_timestamp_seconds', 'When the last pass finished (unix time).', 'gauge', [
    [{}, Math.floor(now.getTime() / 1000)],
  ]);
  metric('recon_needs_review_operations', 'Operations waiting for a human.', 'gauge', [[{}, s.needs_review_total]]);
  return lines.join('\n') + '\n';
}
