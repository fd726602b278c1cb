// What every writer of an agent's steps shares: the three v1 event kinds, built one way (the
// Python package's Emitter builds the same fields in the same order). `Emitter` sends them to
// Kafka, `Local` hands them to the engine in this process.
import { randomUUID } from 'node:crypto';
import type { LoopDetected } from './signals';

/** A step's fields; `undefined` leaves a field out, `null` sends JSON null where eddy takes it. */
export interface StepFields {
  stepType?: string;
  stepIndex?: number;
  content?: string;
  toolName?: string;
  toolInput?: unknown;
  toolOutput?: unknown;
  toolSuccess?: boolean | null;
  toolLatencyMs?: number;
  tokens?: number;
  costUsd?: number;
  tokensInContext?: number;
  agent?: string;
  caller?: string;
  metadata?: Record<string, unknown>;
  /** Epoch ms or RFC 3339; default now. */
  ts?: number | string;
  projectId?: string;
  /** Further v1 fields, as eddy names them. */
  extra?: Record<string, unknown>;
}

export interface RunStartedFields {
  agentName?: string;
  input?: string;
  metadata?: Record<string, unknown>;
  ts?: number | string;
  projectId?: string;
  /** With a guard, watch the run (default true). */
  watch?: boolean;
  extra?: Record<string, unknown>;
}

export interface RunFinishedFields {
  status?: 'completed' | 'failed' | 'abandoned' | string;
  terminationReason?: string;
  output?: string;
  reportedLoopDetected?: boolean;
  reportedLoopStepIndex?: number;
  reportedTotals?: Record<string, unknown>;
  ts?: number | string;
  projectId?: string;
  extra?: Record<string, unknown>;
}

/** What a hook needs of an emitter: the three v1 events. */
export interface StepSink {
  runStarted(runId?: string, fields?: RunStartedFields): string;
  step(runId: string, fields?: StepFields): number;
  runFinished(runId: string, fields?: RunFinishedFields): void;
}

/** What a hook needs of a guard: the fleet's `Guard`, or a `Local`. Neither call waits. */
export interface RunGuard {
  watch(runId: string, projectId?: string | null): void;
  unwatch(runId: string): void;
  /** Throws `LoopDetected` once eddy said stop for the run. */
  check(runId: string): void;
  stopped(runId: string): LoopDetected | null;
}

export type V1Event = Record<string, unknown>;

function defined(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}

export abstract class RunWriter implements StepSink {
  readonly projectId: string;
  readonly agentName: string | undefined;
  guard: RunGuard | null;
  readonly firstStepIndex: number;
  private readonly nextIndex = new Map<string, number>();

  constructor(opts: { projectId: string; agentName?: string; guard?: RunGuard | null; firstStepIndex?: number }) {
    if (!opts.projectId) throw new Error('projectId is required: eddy keys runs by (project_id, run_id)');
    this.projectId = opts.projectId;
    this.agentName = opts.agentName;
    this.guard = opts.guard ?? null;
    this.firstStepIndex = opts.firstStepIndex ?? 1;
  }

  /** Start a run (a new uuid when `runId` is not given) and, with a guard, watch it. */
  runStarted(runId?: string, f: RunStartedFields = {}): string {
    const run = runId || randomUUID();
    const name = f.agentName ?? this.agentName;
    if (!name) throw new Error('agentName is required for runStarted (or give it to the constructor)');
    const project = f.projectId ?? this.projectId;
    // Before the event is sent: no signal of the run can precede it.
    if ((f.watch ?? true) && this.guard) this.guard.watch(run, project);
    if (!this.nextIndex.has(run)) this.nextIndex.set(run, this.firstStepIndex);
    this.send(run, 'run_started', project, f.ts, defined({ agent_name: name, input: f.input, metadata: f.metadata }), f.extra);
    return run;
  }

  /** Send one step; returns its step_index (counted per run unless given). */
  step(runId: string, f: StepFields = {}): number {
    const event = this.stepEvent(runId, f);
    this.deliver(runId, event);
    return event.step_index as number;
  }

  /** The step event `step()` sends (its index taken). */
  protected stepEvent(runId: string, f: StepFields): V1Event {
    const index = this.takeIndex(runId, f.stepIndex);
    const fields = defined({
      step_index: index,
      step_type: f.stepType ?? 'tool_call',
      content: f.content,
      tool_name: f.toolName,
      tool_latency_ms: f.toolLatencyMs,
      tokens: f.tokens,
      cost_usd: f.costUsd,
      tokens_in_context: f.tokensInContext,
      agent: f.agent,
      caller: f.caller,
      metadata: f.metadata,
    });
    // These three may be sent as an explicit null; leaving them out is a different event.
    if (f.toolInput !== undefined) fields.tool_input = f.toolInput;
    if (f.toolOutput !== undefined) fields.tool_output = f.toolOutput;
    if (f.toolSuccess !== undefined) fields.tool_success = f.toolSuccess;
    return this.event(runId, 'step', f.projectId ?? this.projectId, f.ts, fields, f.extra);
  }

  /** End a run. A run the guard stopped ends with terminationReason loop_detected unless another
   * reason is given. */
  runFinished(runId: string, f: RunFinishedFields = {}): void {
    let reason = f.terminationReason;
    if (reason === undefined && this.guard?.stopped(runId)) reason = 'loop_detected';
    this.nextIndex.delete(runId);
    this.send(runId, 'run_finished', f.projectId ?? this.projectId, f.ts, defined({
      status: f.status ?? 'completed',
      termination_reason: reason,
      output: f.output,
      reported_loop_detected: f.reportedLoopDetected,
      reported_loop_step_index: f.reportedLoopStepIndex,
      reported_totals: f.reportedTotals,
    }), f.extra);
  }

  protected takeIndex(runId: string, given?: number): number {
    const index = given ?? this.nextIndex.get(runId) ?? this.firstStepIndex;
    this.nextIndex.set(runId, Math.max(this.nextIndex.get(runId) ?? 0, index + 1));
    return index;
  }

  protected send(runId: string, kind: string, projectId: string, ts: number | string | undefined,
    fields: Record<string, unknown>, extra?: Record<string, unknown>): void {
    this.deliver(runId, this.event(runId, kind, projectId, ts, fields, extra));
  }

  protected event(runId: string, kind: string, projectId: string, ts: number | string | undefined,
    fields: Record<string, unknown>, extra?: Record<string, unknown>): V1Event {
    if (!runId) throw new Error('runId must be a non-empty string');
    return { v: 1, kind, project_id: projectId, run_id: runId, ts: ts ?? Date.now(), ...fields, ...extra };
  }

  /** The event's JSON, as it goes on the topic and into the engine. */
  static encode(event: V1Event): string {
    return JSON.stringify(event);
  }

  protected abstract deliver(runId: string, event: V1Event): void;
}
