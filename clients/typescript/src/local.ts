// Local: eddy's engine inside the agent's process. No Kafka, no ClickHouse, no servers.
//
//   const eddy = new Local();                   // or new Local({ config: 'eddy.toml' })
//   eddy.step(run, { toolName: 'search', toolInput: args, toolOutput: out });
//   eddy.check(run);                            // throws LoopDetected once eddy says stop
//
// The detectors are eddy's own (the addon is built from the same crate as the `eddy` binary),
// fed the same v1 event JSON, so a run gets exactly the signals `eddy replay` and the fleet's
// workers give it, before `step` returns. A Local is written to like an Emitter and checked like
// a Guard: the hooks take it as both. Memory stays bounded by the engine's own rules: a run ends
// with runFinished, when idle for idle_timeout_ms of event time (the workers' rule), or by
// eviction past max_open_runs, and an ended run's state is dropped at once.
import { addon, NativeEngine } from './native';
import { LoopDetected, OutputEvent, Severity, Signal, RunTerminated, Verdicts } from './verdicts';
import { Steer, SteeringGuard } from './steering';
import { RunWriter, StepFields, V1Event } from './writer';

export interface LocalOptions {
  /** An eddy TOML file: its [engine] table (EDDY_ENGINE__* variables apply, as for eddy). */
  config?: string;
  /** The same as TOML text. */
  toml?: string;
  projectId?: string;
  agentName?: string;
  minSeverity?: Severity;
  /** Signals from this severity (below stop) become a corrective message for the agent, once
   * per loop (`steer`); null: never. Default alert. */
  steerOn?: Severity | null;
  /** Hash runs to this many engines, as a fleet reading that many input partitions. */
  partitions?: number;
  /** Also send every event to the fleet's input topic (the fleet view fills while the agent
   * is protected here). */
  tee?: { deliverEvent(runId: string, event: V1Event): void };
  onStop?: (stop: LoopDetected) => void;
  onError?: (message: string) => void;
  firstStepIndex?: number;
  maxWatched?: number;
  maxTerminated?: number;
}

export class Local extends RunWriter implements SteeringGuard {
  readonly tee: LocalOptions['tee'] | null;
  readonly errors: string[] = [];
  private readonly engine: NativeEngine;
  private readonly verdicts: Verdicts;
  private readonly ended = new Map<string, RunTerminated>();
  private readonly onStop?: (stop: LoopDetected) => void;
  private readonly onError?: (message: string) => void;
  private readonly maxTerminated: number;

  constructor(opts: LocalOptions = {}) {
    super({ projectId: opts.projectId ?? 'default', agentName: opts.agentName ?? 'agent', firstStepIndex: opts.firstStepIndex });
    this.guard = this;
    this.engine = new addon.Engine(opts.config ?? null, opts.toml ?? null, opts.partitions ?? 1);
    this.verdicts = new Verdicts(opts.minSeverity ?? 'stop', opts.maxWatched ?? 100_000, opts.steerOn === undefined ? 'alert' : opts.steerOn);
    this.tee = opts.tee ?? null;
    this.onStop = opts.onStop;
    this.onError = opts.onError;
    this.maxTerminated = opts.maxTerminated ?? 1024;
  }

  // ---------------------------------------------------------------- feeding the engine

  /** Run the detectors on one step of `runId` now; returns the run's signals it caused.
   * Throws for a step eddy would reject. */
  observe(runId: string, step: StepFields = {}): Signal[] {
    const event = this.stepEvent(runId, step);
    return this.applyBoth(runId, event, true)[1].filter(
      (o): o is Signal => o.kind !== 'run_terminated' && o.run_id === runId,
    );
  }

  /** Apply one whole v1 event (an object or its JSON text); returns every output event it
   * caused, in order: exactly what `eddy replay` prints for it (a run ended by its idle timeout
   * included). Throws for an event eddy would reject. */
  observeEvent(event: V1Event | string): OutputEvent[] {
    return this.observeWhole(event)[1];
  }

  /** `observeEvent`, with the output events as eddy's own JSON text: byte for byte the lines
   * `eddy replay` prints (to forward them as they are). */
  observeEventJson(event: V1Event | string): string[] {
    return this.observeWhole(event)[0];
  }

  private observeWhole(event: V1Event | string): [string[], OutputEvent[]] {
    if (typeof event !== 'string') {
      return this.applyBoth(typeof event.run_id === 'string' ? event.run_id : '', event, true);
    }
    const result = this.outputs(event);
    if (this.tee) {
      const parsed = JSON.parse(event) as V1Event;
      this.tee.deliverEvent(String(parsed.run_id ?? ''), parsed);
    }
    return result;
  }

  protected deliver(runId: string, event: V1Event): void {
    this.applyBoth(runId, event, false);
  }

  private applyBoth(runId: string, event: V1Event, strict: boolean): [string[], OutputEvent[]] {
    let result: [string[], OutputEvent[]];
    try {
      result = this.outputs(RunWriter.encode(event));
    } catch (e) {
      if (strict) throw e;
      // Like a delivery error of the Emitter: the agent goes on, the error is kept.
      const message = `${JSON.stringify(runId)}: eddy rejected the ${String(event.kind)} event: ${(e as Error).message}`;
      this.errors.push(message);
      this.onError?.(message);
      return [[], []];
    }
    this.tee?.deliverEvent(runId, event);
    return result;
  }

  private outputs(text: string): [string[], OutputEvent[]] {
    const lines = this.engine.observe(text);
    if (lines.length === 0) return [lines, []];
    const outs = lines.map((l) => JSON.parse(l) as OutputEvent);
    const stops: LoopDetected[] = [];
    for (const o of outs) {
      const stop = this.take(o);
      if (stop) stops.push(stop);
    }
    for (const stop of stops) {
      try {
        this.onStop?.(stop);
      } catch (e) {
        this.errors.push(`onStop failed: ${(e as Error).message}`);
      }
    }
    return [lines, outs];
  }

  private take(o: OutputEvent): LoopDetected | null {
    if (o.kind === 'run_terminated') {
      // The engine dropped the run; so does the guard (its stop was read before the end).
      this.verdicts.unwatch(o.run_id);
      this.ended.delete(o.run_id);
      this.ended.set(o.run_id, o);
      while (this.ended.size > this.maxTerminated) this.ended.delete(this.ended.keys().next().value as string);
      return null;
    }
    this.verdicts.watch(o.run_id, o.project_id);
    return this.verdicts.offer(o);
  }

  // ---------------------------------------------------------------- the guard's side

  get minSeverity(): Severity {
    return this.verdicts.minSeverity;
  }

  /** Every run the engine sees is watched; kept for the guard's interface. */
  watch(_runId: string, _projectId?: string | null): void {}

  unwatch(runId: string): void {
    this.verdicts.unwatch(runId);
  }

  /** Throws `LoopDetected` if the run got a signal of at least minSeverity. */
  check(runId: string): void {
    this.verdicts.check(runId);
  }

  stopped(runId: string): LoopDetected | null {
    return this.verdicts.stopped(runId);
  }

  /** eddy's corrective message for the run, once per loop: on a signal of at least steerOn
   * (default alert) that did not stop it. A hook puts `.message` into the agent's next model
   * call and reports it (`steerOrStop` does both). */
  steer(runId: string): Steer | null {
    return this.verdicts.steer(runId);
  }

  /** The strongest signal of the (open) run, of any severity. */
  verdict(runId: string): Signal | null {
    return this.verdicts.verdict(runId);
  }

  /** Every signal of the (open) run, in order. */
  signals(runId: string): Signal[] {
    return this.verdicts.signals(runId);
  }

  /** eddy's run_terminated record of one of the last `maxTerminated` runs that ended. */
  terminated(runId: string): RunTerminated | null {
    return this.ended.get(runId) ?? null;
  }

  get openRuns(): number {
    return this.engine.openRuns;
  }

  /** Keys of ended runs the engine remembers (so a late event cannot reopen them). */
  get endedRuns(): number {
    return this.engine.endedRuns;
  }
}

/** `eddy replay FILE` in this process: the output events of a JSONL trace. */
export function replay(file: string, opts: { config?: string; partitions?: number } = {}): OutputEvent[] {
  return addon.replay(file, opts.config ?? null, opts.partitions ?? 1).map((l) => JSON.parse(l) as OutputEvent);
}
