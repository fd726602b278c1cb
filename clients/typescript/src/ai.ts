// The Vercel AI SDK (`ai`, v5 and later): eddy as a stop condition and a step preparation.
//
//   import { generateText, stepCountIs } from 'ai';
//   import { Local } from 'eddy-agent';
//   import { eddyLoop } from 'eddy-agent/ai';
//
//   const eddy = eddyLoop(new Local(), { agentName: 'researcher' });
//   const result = await generateText({
//     model, tools, prompt,
//     stopWhen: [stepCountIs(50), eddy.stopWhen],    // ends the loop once eddy says stop
//     prepareStep: eddy.prepareStep,                  // on an alert, eddy's corrective message
//     onFinish: eddy.onFinish,                        // ends the eddy run
//   });
//   eddy.stopped;                                     // the LoopDetected, when eddy stopped it
//
// Every step the SDK finishes becomes eddy steps (the model's text a `think` step, each tool
// result a `tool_call` step), reported from whichever of the callbacks sees it first, so the
// stop condition alone is enough. With a Local the verdict on a step is there before the SDK
// decides whether to call the model again; with the fleet's Emitter + Guard it arrives later.
import { Steer, steerOrStop } from './steering';
import { LoopDetected } from './verdicts';
import { RunGuard, StepSink } from './writer';

/** The parts of the SDK's step results eddy reads (StepResult of `ai` v5, v6). */
interface SdkStep {
  text?: string;
  content?: Array<{ type: string; toolName?: string; input?: unknown; output?: unknown; error?: unknown }>;
  toolResults?: Array<{ toolName: string; input: unknown; output: unknown }>;
  usage?: { totalTokens?: number; inputTokens?: number };
}

export interface EddyLoopOptions {
  /** The eddy run (default: a new one per EddyLoop). */
  runId?: string;
  agentName?: string;
  /** Sub-agent name on every step. */
  agent?: string;
  metadata?: Record<string, unknown>;
}

export class EddyLoop {
  readonly runId: string;
  private reported = 0;
  private finished = false;
  /** The stop, kept when the run ends (a Local forgets an ended run). */
  private stop: LoopDetected | null = null;

  constructor(
    readonly emitter: StepSink,
    readonly guard: RunGuard | null,
    private readonly opts: EddyLoopOptions = {},
  ) {
    this.runId = emitter.runStarted(opts.runId, { agentName: opts.agentName, metadata: opts.metadata });
  }

  /** The run's stop, once eddy said stop. */
  get stopped(): LoopDetected | null {
    return this.stop ?? this.guard?.stopped(this.runId) ?? null;
  }

  /** For `stopWhen`: true once eddy said stop for the run. */
  readonly stopWhen = ({ steps }: { steps: ReadonlyArray<SdkStep> }): boolean => {
    this.report(steps);
    return this.stopped !== null;
  };

  /** For `prepareStep`: reports what the SDK did since; throws LoopDetected before a model call
   * of a stopped run (when no stop condition ended the loop first); after an alert, once per
   * loop, adds eddy's corrective message to this call as a user message, and reports that it
   * did (a `steer` step). */
  readonly prepareStep = <M>({ steps, messages }: { steps: ReadonlyArray<SdkStep>; messages: M[] }):
    { messages: M[] } | undefined => {
    this.report(steps);
    const steer = steerOrStop(this.guard, this.emitter, this.runId);
    if (steer === null) return undefined;
    this.steers.push(steer);
    return { messages: [...messages, { role: 'user', content: steer.message } as M] };
  };

  /** The corrective messages handed to the model, in order. */
  readonly steers: Steer[] = [];

  /** For `onFinish`: reports the last step and ends the run. */
  readonly onFinish = ({ steps }: { steps: ReadonlyArray<SdkStep> }): void => {
    this.report(steps);
    this.finish();
  };

  /** End the run (done by `onFinish`): completed, with termination_reason loop_detected when
   * eddy stopped it; failed with `error`. */
  finish(error?: unknown): void {
    if (this.finished) return;
    this.finished = true;
    this.stop = this.stopped;
    if (error !== undefined && !(error instanceof LoopDetected)) {
      this.emitter.runFinished(this.runId, { status: 'failed', terminationReason: 'error', output: String(error).slice(0, 4000) });
    } else {
      this.emitter.runFinished(this.runId, {});
    }
  }

  private report(steps: ReadonlyArray<SdkStep>): void {
    for (; this.reported < steps.length; this.reported++) {
      const s = steps[this.reported];
      const agent = this.opts.agent;
      // A step that only calls tools has no text: an empty think step would read as an empty
      // answer to eddy's content detector.
      if (s.text && s.text.trim()) {
        this.emitter.step(this.runId, {
          stepType: 'think',
          content: s.text,
          tokens: s.usage?.totalTokens,
          tokensInContext: s.usage?.inputTokens,
          agent,
        });
      }
      for (const part of s.content ?? []) {
        if (part.type === 'tool-result') {
          this.emitter.step(this.runId, { toolName: part.toolName, toolInput: part.input ?? null, toolOutput: part.output ?? null, toolSuccess: true, agent });
        } else if (part.type === 'tool-error') {
          this.emitter.step(this.runId, {
            toolName: part.toolName,
            toolInput: part.input ?? null,
            toolOutput: { error: String(part.error) },
            toolSuccess: false,
            agent,
          });
        }
      }
    }
  }
}

/** eddy for one generateText / streamText call (or one ToolLoopAgent.generate). `eddy` is a
 * Local, or an Emitter whose guard is the fleet's Guard. */
export function eddyLoop(eddy: StepSink & { guard?: RunGuard | null }, opts: EddyLoopOptions = {}): EddyLoop {
  return new EddyLoop(eddy, eddy.guard ?? null, opts);
}
