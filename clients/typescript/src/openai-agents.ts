// The OpenAI Agents SDK for JavaScript (`@openai/agents`): eddy on a Runner.
//
//   import { Agent, Runner } from '@openai/agents';
//   import { Local } from 'eddy-agent';
//   import { eddyRun } from 'eddy-agent/openai-agents';
//
//   const eddy = eddyRun(new Local(), { agentName: 'researcher' });
//   const runner = eddy.attach(new Runner({ callModelInputFilter: eddy.callModelInputFilter }));
//   await runner.run(agent, 'find the release date');   // rejects with LoopDetected on stop
//   eddy.finish();
//
// Each tool the agent runs becomes an eddy step (the Runner's `agent_tool_end` hook), the final
// output a `think` step. Before each model call (the Runner's `callModelInputFilter`, the SDK's
// own place to edit a model call's input) the run throws LoopDetected once eddy said stop, and
// after an alert, once per loop, the call gets eddy's corrective message (steering). For a
// stop between tool calls of one model turn, add `eddy.toolInputGuardrail` to a tool's
// `inputGuardrails`: it trips (ToolInputGuardrailTripwireTriggered) once eddy said stop.
import { Steer, steerOrStop } from './steering';
import { LoopDetected } from './verdicts';
import { RunGuard, StepSink } from './writer';

/** The Runner's hooks eddy listens to (a RunHooks event emitter). */
interface RunnerHooks {
  on(event: 'agent_tool_end', listener: (ctx: unknown, agent: unknown, tool: { name?: string }, result: unknown,
    details: { toolCall?: { arguments?: string; name?: string } }) => void): unknown;
  on(event: 'agent_end', listener: (ctx: unknown, agent: { name?: string }, output: unknown) => void): unknown;
}

interface ModelInputData {
  input: unknown[];
  instructions?: string;
}

export interface EddyRunOptions {
  runId?: string;
  agentName?: string;
  metadata?: Record<string, unknown>;
}

function parsed(args: string | undefined): unknown {
  if (args === undefined) return null;
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

function jsonable(value: unknown): unknown {
  if (typeof value === 'string') {
    const s = value.trim();
    if (s.startsWith('{') || s.startsWith('[')) {
      try {
        return JSON.parse(s);
      } catch {
        return value;
      }
    }
  }
  return value ?? null;
}

export class EddyRun {
  readonly runId: string;
  private finished = false;
  /** The stop, kept when the run ends (a Local forgets an ended run). */
  private stop: LoopDetected | null = null;

  constructor(readonly emitter: StepSink, readonly guard: RunGuard | null, opts: EddyRunOptions = {}) {
    this.runId = emitter.runStarted(opts.runId, { agentName: opts.agentName, metadata: opts.metadata });
  }

  get stopped(): LoopDetected | null {
    return this.stop ?? this.guard?.stopped(this.runId) ?? null;
  }

  /** Report the Runner's tool calls and final output to eddy. Returns the runner. */
  attach<R extends RunnerHooks>(runner: R): R {
    runner.on('agent_tool_end', (_ctx, agent, tool, result, details) => {
      this.emitter.step(this.runId, {
        toolName: tool?.name ?? details?.toolCall?.name ?? 'tool',
        toolInput: parsed(details?.toolCall?.arguments),
        toolOutput: jsonable(result),
        toolSuccess: true,
        agent: (agent as { name?: string } | undefined)?.name,
      });
    });
    runner.on('agent_end', (_ctx, agent, output) => {
      const text = typeof output === 'string' ? output : JSON.stringify(output);
      if (text && text.trim()) this.emitter.step(this.runId, { stepType: 'think', content: text, agent: agent?.name });
    });
    return runner;
  }

  /** For the Runner's (or a run's) `callModelInputFilter`: throws LoopDetected before a model
   * call of a run eddy stopped; after an alert, once per loop, adds eddy's corrective message to
   * the call as a user message and reports that it did (a `steer` step). */
  readonly callModelInputFilter = <T extends ModelInputData>({ modelData }: { modelData: T }): T => {
    const steer = steerOrStop(this.guard, this.emitter, this.runId);
    if (steer === null) return modelData;
    this.steers.push(steer);
    return { ...modelData, input: [...modelData.input, { role: 'user', content: steer.message }] };
  };

  /** The corrective messages handed to the model, in order. */
  readonly steers: Steer[] = [];

  /** A tool input guardrail (add it to a tool's `inputGuardrails`): trips once eddy said stop. */
  readonly toolInputGuardrail = {
    type: 'tool_input' as const,
    name: 'eddy',
    run: async (): Promise<{ behavior: { type: 'allow' } | { type: 'throwException' }; outputInfo?: unknown }> => {
      const stop = this.stopped;
      return stop ? { behavior: { type: 'throwException' }, outputInfo: stop.signal } : { behavior: { type: 'allow' } };
    },
  };

  /** End the run: completed (termination_reason loop_detected when eddy stopped it), or failed
   * with `error`. */
  finish(error?: unknown): void {
    if (this.finished) return;
    this.finished = true;
    this.stop = this.stopped;
    if (error !== undefined && !(error instanceof LoopDetected) && this.stopped === null) {
      this.emitter.runFinished(this.runId, { status: 'failed', terminationReason: 'error', output: String(error).slice(0, 4000) });
    } else {
      this.emitter.runFinished(this.runId, {});
    }
  }
}

/** eddy for one agent run. `eddy` is a Local, or an Emitter whose guard is the fleet's Guard. */
export function eddyRun(eddy: StepSink & { guard?: RunGuard | null }, opts: EddyRunOptions = {}): EddyRun {
  return new EddyRun(eddy, eddy.guard ?? null, opts);
}
