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

/** eddy's verdict on a watched run reached the guard's minSeverity: stop the run. */
export class LoopDetected extends Error {
  readonly signal: Signal;
  readonly runId: string;
  readonly detector: string;
  readonly severity: string;
  readonly pattern: string;
  readonly stepIndex: number;
  readonly stepIndices: number[];

  constructor(signal: Signal) {
    super(
      `eddy stopped run ${signal.run_id}: ${signal.detector} (${signal.severity}) ${signal.pattern} ` +
        `at steps ${JSON.stringify(signal.step_indices ?? [])}`,
    );
    this.name = 'LoopDetected';
    this.signal = signal;
    this.runId = signal.run_id;
    this.detector = signal.detector;
    this.severity = signal.severity;
    this.pattern = signal.pattern;
    this.stepIndex = signal.step_index;
    this.stepIndices = [...(signal.step_indices ?? [])];
  }
}
