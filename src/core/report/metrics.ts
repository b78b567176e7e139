import { prometheusText, type PrometheusFamily } from '../../lib/prometheus.js';
import type { RunSummary } from '../reconcile/run.js';

type Samples = [Record<string, string>, number][];

function exposition() {
  const families: PrometheusFamily[] = [];
  const metric = (name: string, help: string, type: 'gauge' | 'counter', samples: Samples) => {
    families.push({ name, help, type, samples: samples.map(([labels, value]) => ({ labels, value })) });
  };
  return { metric, text: () => prometheusText(families) };
}

/**
 * The metrics of a pass that ended early (the store went away, the config could not be read): the
 * file is still written, so a scrape sees this run's failure instead of the last good pass's figures.
 */
export function failedRunMetrics(f: { exitCode: number; storeUp: boolean }, now: Date): string {
  const { metric, text } = exposition();
  metric('recon_run_success', 'Whether the last pass finished (1) or ended early with an error (0).', 'gauge', [
    [{}, 0],
  ]);
  metric('recon_run_exit_code', 'Exit code of the last pass.', 'gauge', [[{}, f.exitCode]]);
  metric('recon_run_store_up', 'Whether the store was reachable for the whole last pass.', 'gauge', [
    [{}, f.storeUp ? 1 : 0],
  ]);
  metric('recon_run_last_timestamp_seconds', 'When the last pass finished (unix time).', 'gauge', [
    [{}, Math.floor(now.getTime() / 1000)],
  ]);
  return text();
}

/** Prometheus text exposition format (version 0.0.4) for one `recon run` pass. */
export function runMetrics(s: RunSummary, now: Date): string {
  const { metric, text } = exposition();
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
  metric('recon_run_success', 'Whether the last pass finished (1) or ended early with an error (0).', 'gauge', [
    [{}, 1],
  ]);
  metric('recon_run_store_up', 'Whether the store was reachable for the whole last pass.', 'gauge', [[{}, 1]]);
  return text();
}
