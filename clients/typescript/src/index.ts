// eddy-agent: stop an agent that loops, with eddy's engine in this process or an eddy fleet.
//
// In this process, no servers:
//
//   import { Local } from 'eddy-agent';
//   const eddy = new Local();
//   eddy.step(run, { toolName: 'search', toolInput: args, toolOutput: out });
//   eddy.check(run);                            // throws LoopDetected once eddy says stop
//
// With a fleet (Kafka in, signals out): the same calls on
//   new Emitter({ brokers, projectId, guard: new Guard({ brokers }) })
//
// Framework hooks: 'eddy-agent/ai' (the Vercel AI SDK), 'eddy-agent/openai-agents'.
export { Local, replay } from './local';
export type { LocalOptions } from './local';
export { Emitter } from './emitter';
export type { EmitterOptions } from './emitter';
export { Guard } from './guard';
export type { GuardOptions } from './guard';
export { LoopDetected, Verdicts, SEVERITIES, severityRank } from './verdicts';
export type { OutputEvent, RunTerminated, Severity, Signal } from './verdicts';
export { adviceOf, report, Steering, steerOrStop, STEER_STEP_TYPE } from './steering';
export type { Steer, SteeringGuard } from './steering';
export { RunWriter } from './writer';
export type { RunFinishedFields, RunGuard, RunStartedFields, StepFields, StepSink, V1Event } from './writer';
