// eddy's output events as this package sees them, and the order of severities.

export const SEVERITIES = ['info', 'warn', 'alert', 'stop'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** A loop_warning or loop_detected event, as eddy publishes it (docs/signals in the repo). */
export interface Signal {
  kind: 'loop_warning' | 'loop_detected';
  event_id: string;
  project_id: string;
  run_id: string;
  agent_name?: string;
  step_index: number;
  ts: string;
  detector: string;
  severity: Severity;
  pattern: string;
  fingerprint: string;
  hits: number;
  step_indices: number[];
  first_step_index: number;
  evidence: unknown;
  /** eddy's corrective message for the agent (what repeats, the evidence, what to try). */
  advice?: string;
  [field: string]: unknown;
}

/** eddy's run_terminated event. */
export interface RunTerminated {
  kind: 'run_terminated';
  event_id: string;
  project_id: string;
  run_id: string;
  status: string;
  termination_reason: string;
  [field: string]: unknown;
}

export type OutputEvent = Signal | RunTerminated;

export function severityRank(severity: string): number {
  const i = (SEVERITIES as readonly string[]).indexOf(severity);
  if (i < 0) {
    throw new RangeError(`unknown severity ${JSON.stringify(severity)}: expected one of ${SEVERITIES.join(', ')}`);
  }
  return i;
}
