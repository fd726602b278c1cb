// What a guard knows about the runs it watches: pure bookkeeping, no Kafka, no engine. The fleet
// Guard feeds it the output events its consumer reads, Local the ones its engine returns; the
// agent asks it (a Map lookup) before each step. Signals may arrive more than once (the fleet
// delivers at least once): a repeated event_id is counted and otherwise ignored.
import { LoopDetected, OutputEvent, RunTerminated, Severity, severityRank, Signal, SEVERITIES } from './signals';
import { Steer, Steering } from './steering';

export { LoopDetected, SEVERITIES, severityRank };
export type { OutputEvent, RunTerminated, Severity, Signal };

function rankOf(severity: unknown): number {
  return typeof severity === 'string' ? (SEVERITIES as readonly string[]).indexOf(severity) : -1;
}

class Run {
  seen = new Set<string>();
  signals: Signal[] = [];
  strongest: Signal | null = null;
  stop: LoopDetected | null = null;
  terminated: RunTerminated | null = null;
  /** A hook asked for this run's steers: a stop on a loop its agent was not told about yet is
   * steered first (Steering.holdStop). A run only ever checked stops on its first stop. */
  steerable = false;
  constructor(public projectId: string | null) {}
}

export class Verdicts {
  readonly minSeverity: Severity;
  private readonly minRank: number;
  private readonly runs = new Map<string, Run>();
  /** Only the stopped runs, so the agent's check is one lookup in a small map. */
  readonly stops = new Map<string, LoopDetected>();
  /** Which of the signals below stop become a corrective message for the agent. */
  readonly steering: Steering;
  received = 0;
  duplicates = 0;
  ignored = 0;

  constructor(minSeverity: Severity = 'stop', readonly maxWatched = 100_000, steerOn: Severity | null = 'alert') {
    this.minRank = severityRank(minSeverity);
    this.minSeverity = minSeverity;
    this.steering = new Steering(steerOn);
  }

  watch(runId: string, projectId: string | null = null): void {
    const run = this.runs.get(runId);
    if (run) {
      if (projectId !== null && run.projectId === null) run.projectId = projectId;
      return;
    }
    this.runs.set(runId, new Run(projectId));
    // Maps iterate in insertion order: the first key is the oldest watch.
    while (this.runs.size > this.maxWatched) {
      const old = this.runs.keys().next().value as string;
      this.runs.delete(old);
      this.stops.delete(old);
      this.steering.forget(old);
    }
  }

  unwatch(runId: string): void {
    this.runs.delete(runId);
    this.stops.delete(runId);
    this.steering.forget(runId);
  }

  /** The run's pending steer, handed over once; null once it stopped. */
  steer(runId: string): Steer | null {
    if (this.stops.has(runId)) return null;
    const run = this.runs.get(runId);
    if (run) run.steerable = true;
    return this.steering.take(runId);
  }

  isWatched(runId: string): boolean {
    return this.runs.has(runId);
  }

  check(runId: string): void {
    const stop = this.stops.get(runId);
    // A fresh error per throw, with this call's stack.
    if (stop) throw new LoopDetected(stop.signal);
  }

  stopped(runId: string): LoopDetected | null {
    return this.stops.get(runId) ?? null;
  }

  verdict(runId: string): Signal | null {
    return this.runs.get(runId)?.strongest ?? null;
  }

  signals(runId: string): Signal[] {
    return [...(this.runs.get(runId)?.signals ?? [])];
  }

  terminated(runId: string): RunTerminated | null {
    return this.runs.get(runId)?.terminated ?? null;
  }

  /** Take one output event; returns the LoopDetected when this event newly stops its run. */
  offer(event: OutputEvent): LoopDetected | null {
    const run = typeof event?.run_id === 'string' ? this.runs.get(event.run_id) : undefined;
    if (!run || (run.projectId !== null && event.project_id !== run.projectId)) {
      this.ignored += 1;
      return null;
    }
    if (typeof event.event_id === 'string') {
      if (run.seen.has(event.event_id)) {
        this.duplicates += 1;
        return null;
      }
      run.seen.add(event.event_id);
    }
    this.received += 1;
    if (event.kind === 'run_terminated') {
      run.terminated = event;
      return null;
    }
    if (event.kind !== 'loop_warning' && event.kind !== 'loop_detected') {
      this.ignored += 1;
      return null;
    }
    const rank = rankOf(event.severity);
    run.signals.push(event);
    if (run.strongest === null || rank > rankOf(run.strongest.severity)) run.strongest = event;
    if (run.stop === null && rank >= this.minRank) {
      // Steered first; a stop after the steer stops the run.
      if (run.steerable && this.steering.holdStop(event)) return null;
      run.stop = new LoopDetected(event);
      this.stops.set(event.run_id, run.stop);
      return run.stop;
    }
    if (run.stop === null) this.steering.offer(event);
    return null;
  }
}
