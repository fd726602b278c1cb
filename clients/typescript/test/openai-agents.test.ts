// The OpenAI Agents SDK hook with a Local: a Runner with a scripted model (the SDK's Model
// interface, as its custom model providers implement it) and real function tools; eddy's
// detectors decide in this process. What stopped the run is held to `eddy replay` of the very
// events the hook produced.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, Runner, Usage, tool, setTracingDisabled } from '@openai/agents';
import type { Model, ModelRequest, ModelResponse } from '@openai/agents';
import { z } from 'zod';
import { Local, LoopDetected } from '../src';
import { eddyRun } from '../src/openai-agents';
import { firstVerdict, RecordingTee, replayed, stopAfterSteer } from './helpers';

setTracingDisabled(true);

/** Answers each model call with the next scripted output. */
class ScriptedModel implements Model {
  calls = 0;
  constructor(private readonly next: (n: number) => ModelResponse['output']) {}
  async getResponse(_request: ModelRequest): Promise<ModelResponse> {
    const n = this.calls++;
    return { usage: new Usage(), output: this.next(n), responseId: `resp-${n}` };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not streamed');
  }
}

const search = (n: number, query: string): ModelResponse['output'] => [
  { type: 'function_call', callId: `call-${n}`, name: 'web_search', arguments: JSON.stringify({ query }), status: 'completed' },
];
const say = (text: string): ModelResponse['output'] => [
  { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] },
];

function agentWith(model: Model, calls: string[]) {
  const webSearch = tool({
    name: 'web_search',
    description: 'Search the web.',
    parameters: z.object({ query: z.string() }),
    execute: async ({ query }) => {
      calls.push(query);
      return JSON.stringify({ results: [], note: 'no results' });
    },
  });
  return new Agent({ name: 'researcher', instructions: 'Find it.', model, tools: [webSearch] });
}

test('a looping agent is stopped before its next model call, at the step eddy says', async () => {
  const tee = new RecordingTee();
  const eddy = eddyRun(new Local({ projectId: 'acme', tee }), { agentName: 'researcher' });
  const model = new ScriptedModel((n) => search(n, 'eddy release date'));
  const calls: string[] = [];
  const runner = eddy.attach(new Runner({ callModelInputFilter: eddy.callModelInputFilter, tracingDisabled: true }));
  await assert.rejects(runner.run(agentWith(model, calls), 'When is eddy released?', { maxTurns: 60 }), LoopDetected);
  eddy.finish();
  const stop = eddy.stopped;
  assert.ok(stop);
  // Steered once (the agent was not told about the loop before), then stopped when it went on.
  const want = stopAfterSteer(tee.events, replayed(tee.events));
  assert.ok(want, 'no stop after the steer');
  assert.deepEqual(stop.signal, want);
  const toolSteps = tee.events.filter((e) => e.kind === 'step' && e.tool_name);
  assert.equal(toolSteps.at(-1)?.step_index, want?.step_index);
  assert.equal(calls.length, toolSteps.length);
  // The model was not called after the step that showed the loop.
  assert.equal(model.calls, calls.length);
  const last = tee.events.at(-1)!;
  assert.deepEqual([last.kind, last.termination_reason], ['run_finished', 'loop_detected']);
});

test('a healthy agent finishes, with no stop', async () => {
  const tee = new RecordingTee();
  const eddy = eddyRun(new Local({ projectId: 'acme', tee }), { agentName: 'researcher' });
  const queries = ['eddy release', 'eddy changelog', 'eddy github'];
  const model = new ScriptedModel((n) => (n < queries.length ? search(n, queries[n]) : say('Not announced yet.')));
  const calls: string[] = [];
  const runner = eddy.attach(new Runner({ callModelInputFilter: eddy.callModelInputFilter, tracingDisabled: true }));
  const result = await runner.run(agentWith(model, calls), 'When is eddy released?', { maxTurns: 60 });
  eddy.finish();
  assert.equal(result.finalOutput, 'Not announced yet.');
  assert.deepEqual(calls, queries);
  assert.equal(eddy.stopped, null);
  assert.deepEqual(tee.events.filter((e) => e.kind === 'step').map((e) => e.tool_name ?? e.step_type),
    ['web_search', 'web_search', 'web_search', 'think']);
  assert.deepEqual(tee.events.filter((e) => e.tool_name).map((e) => e.tool_output),
    queries.map(() => ({ results: [], note: 'no results' })));
  assert.ok(replayed(tee.events).every((o) => o.kind === 'run_terminated' || o.severity !== 'stop'));
});

test('the tool guardrail trips once eddy said stop', async () => {
  const eddy = eddyRun(new Local(), {});
  const allow = await eddy.toolInputGuardrail.run();
  assert.equal(allow.behavior.type, 'allow');
  for (let i = 0; i < 20 && !eddy.stopped; i++) {
    eddy.emitter.step(eddy.runId, { toolName: 'web_search', toolInput: { query: 'x' }, toolOutput: [] });
  }
  assert.ok(eddy.stopped);
  assert.equal((await eddy.toolInputGuardrail.run()).behavior.type, 'throwException');
});

test('the first verdict steers the agent once: a model that heeds it finishes, with no stop', async () => {
  const tee = new RecordingTee();
  const eddy = eddyRun(new Local({ projectId: 'acme', tee }), { agentName: 'researcher' });
  const heard: string[] = [];
  const model = new ScriptedModel((n) => (heard.length > 0 ? say('Not announced yet.') : search(n, 'eddy release date')));
  const listen = model.getResponse.bind(model);
  model.getResponse = async (request: ModelRequest) => {
    const items = Array.isArray(request.input) ? request.input : [];
    for (const item of items.slice(1)) {
      if ('role' in item && item.role === 'user' && typeof item.content === 'string') heard.push(item.content);
    }
    return listen(request);
  };
  const calls: string[] = [];
  const runner = eddy.attach(new Runner({ callModelInputFilter: eddy.callModelInputFilter, tracingDisabled: true }));
  const result = await runner.run(agentWith(model, calls), 'When is eddy released?', { maxTurns: 60 });
  eddy.finish();
  assert.equal(result.finalOutput, 'Not announced yet.');
  assert.equal(eddy.stopped, null);
  assert.equal(eddy.steers.length, 1);
  const [steer] = eddy.steers;
  assert.ok(heard.includes(steer.message));
  const outs = replayed(tee.events);
  assert.deepEqual(steer.signal, firstVerdict(outs));
  assert.equal(stopAfterSteer(tee.events, outs), undefined);
  assert.deepEqual(tee.events.filter((e) => e.step_type === 'steer').map((e) => e.signal_event_id), [steer.eventId]);
});
