// Steering: before eddy stops a looping agent, it can tell the agent what it is doing wrong.
//
// On an `alert` (configurable with `steerOn`), the guard hands the agent eddy's corrective
// message once per loop: the signal's `advice` (what repeats, since which step, the evidence,
// what to try instead). A framework hook puts it into the agent's next model call and reports it
// to eddy as a `steer` step, so the run shows it was steered and whether the loop came back. On
// `stop`, the guard throws LoopDetected as always. The same rules as the Python package's
// `eddy_agent.steering`.
import { severityRank, Severity, Signal } from './signals';
import type { RunGuard, StepSink } from './writer';

export const STEER_STEP_TYPE = 'steer';

/** What the guard hands the agent once per loop: `message` goes into its next model call. */
export interface Steer {
  runId: string;
  message: string;
  eventId: string;
  detector: string;
  severity: string;
  pattern: string;
  stepIndex: number | null;
  firstStepIndex: number | null;
  signal: Signal;
}

/** The signal's `advice`; for a signal from a worker older than steering, eddy's fallback
 * sentence built from its pattern. */
export function adviceOf(signal: Signal): string {
  const advice = signal.advice;
  if (typeof advice === 'string' && advice) return advice;
  return `eddy: this run is repeating itself. Since step ${signal.first_step_index}: ${signal.pattern ?? ''}. ` +
    'Repeating it will not help: try a different approach, or say what is blocking you.';
}

function steerOf(signal: Signal): Steer {
  return {
    runId: signal.run_id,
    message: adviceOf(signal),
    eventId: signal.event_id ?? '',
    detector: signal.detector ?? '',
    severity: signal.severity ?? '',
    pattern: signal.pattern ?? '',
    stepIndex: typeof signal.step_index === 'number' ? signal.step_index : null,
    firstStepIndex: typeof signal.first_step_index === 'number' ? signal.first_step_index : null,
    signal,
  };
}

class RunSteering {
  pending: Steer | null = null;
  /** (detector, fingerprint) of every signal taken as one loop already steered (or pending). */
  keys = new Set<string>();
  /** The step of the signal last handed over: a repetition that began at or before it is the
   * loop the agent was already told about. */
  handedAt: number | null = null;
  /** How many steers were handed over. */
  handed = 0;
}

/** Which signals become a steer: one loop is steered once, however many detectors and levels
 * report it, and a new loop after it is steered again. A stop on a loop the agent was not told
 * about yet (eddy stops at conclusive evidence, often with no alert first) is steered first,
 * for runs whose hook asks for steers; eddy re-arms its detectors on the `steer` step, so a loop
 * that goes on is stopped again at once, and that stop throws. At most maxSteers per run. */
export class Steering {
  readonly steerOn: Severity | null;
  private readonly rank: number | null;
  private readonly runs = new Map<string, RunSteering>();

  constructor(steerOn: Severity | null = 'alert', readonly maxSteers = 3) {
    if (steerOn !== null && severityRank(steerOn) >= severityRank('stop')) {
      throw new RangeError('steerOn must be below stop (a stop throws LoopDetected), or null');
    }
    if (!(maxSteers >= 1)) throw new RangeError('maxSteers must be at least 1 (steerOn null turns steering off)');
    this.steerOn = steerOn;
    this.rank = steerOn === null ? null : severityRank(steerOn);
  }

  /** Take one distinct signal of a watched run that did not stop it. */
  offer(signal: Signal): Steer | null {
    if (this.rank === null) return null;
    const rank = (['info', 'warn', 'alert', 'stop'] as const).indexOf(signal.severity);
    if (rank < this.rank || rank >= severityRank('stop')) return null;
    let run = this.runs.get(signal.run_id);
    if (!run) this.runs.set(signal.run_id, (run = new RunSteering()));
    const key = `${signal.detector}\0${signal.fingerprint}`;
    if (run.keys.has(key)) return null;
    run.keys.add(key);
    if (run.pending !== null) return null; // one loop, reported by another detector: one steer
    const began = signal.first_step_index;
    if (run.handedAt !== null && typeof began === 'number' && began <= run.handedAt) return null;
    if (run.handed >= this.maxSteers) return null;
    run.pending = steerOf(signal);
    return run.pending;
  }

  /** A stop of a run whose agent can be steered: true when it becomes (or joins) the pending
   * steer instead of stopping the run, because the agent was not told about this loop yet;
   * false (stop now) for a loop that went on after its steer, a budget (not a loop), steering
   * off, or a run steered maxSteers times already. */
  holdStop(signal: Signal): boolean {
    if (this.rank === null || signal.detector === 'budget') return false;
    let run = this.runs.get(signal.run_id);
    if (!run) this.runs.set(signal.run_id, (run = new RunSteering()));
    const began = signal.first_step_index;
    if (run.handedAt !== null && (typeof began !== 'number' || began <= run.handedAt)) return false;
    if (run.pending === null) {
      if (run.handed >= this.maxSteers) return false;
      run.pending = steerOf(signal);
    }
    run.keys.add(`${signal.detector}\0${signal.fingerprint}`);
    return true;
  }

  /** The run's pending steer, handed over once. */
  take(runId: string): Steer | null {
    const run = this.runs.get(runId);
    if (!run || run.pending === null) return null;
    const steer = run.pending;
    run.pending = null;
    run.handed += 1;
    if (steer.stepIndex !== null) run.handedAt = Math.max(run.handedAt ?? steer.stepIndex, steer.stepIndex);
    return steer;
  }

  forget(runId: string): void {
    this.runs.delete(runId);
  }
}

/** A guard that steers: the fleet's Guard and Local both are. */
export interface SteeringGuard extends RunGuard {
  /** The run's next steer, once per loop (then null until another loop). Never waits. */
  steer(runId: string): Steer | null;
}

/** Before the agent's next model call: throws LoopDetected on a stop; else the steer to put into
 * the call (reported to eddy as a `steer` step), or null. */
export function steerOrStop(guard: RunGuard | null, emitter: StepSink | null, runId: string): Steer | null {
  if (!guard) return null;
  guard.check(runId);
  const steer = typeof (guard as Partial<SteeringGuard>).steer === 'function' ? (guard as SteeringGuard).steer(runId) : null;
  if (steer && emitter) report(emitter, runId, steer);
  return steer;
}

/** Tell eddy the agent was steered: a `steer` step with the message and the signal's id. */
export function report(emitter: StepSink, runId: string, steer: Steer): number {
  return emitter.step(runId, {
    stepType: STEER_STEP_TYPE,
    content: steer.message,
    extra: steer.eventId ? { signal_event_id: steer.eventId } : undefined,
  });
}
