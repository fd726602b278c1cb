// The Vercel AI SDK hook with a Local: generateText with the SDK's own mock model
// (MockLanguageModelV3 from 'ai/test') and real tools; eddy's detectors decide in this process.
// What stopped the loop is held to `eddy replay` of the very events the hook produced.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import type { LanguageModelV3GenerateResult } from '@ai-sdk/provider';
import { z } from 'zod';
import { Local } from '../src';
import { eddyLoop } from '../src/ai';
import { firstVerdict, RecordingTee, replayed, stopAfterSteer } from './helpers';

const usage = {
  inputTokens: { total: 20, noCache: 20, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

function callTool(n: number, name: string, input: unknown, text = ''): LanguageModelV3GenerateResult {
  const content: LanguageModelV3GenerateResult['content'] = [];
  if (text) content.push({ type: 'text', text });
  content.push({ type: 'tool-call', toolCallId: `call-${n}`, toolName: name, input: JSON.stringify(input) });
  return { content, finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] };
}

function answer(text: string): LanguageModelV3GenerateResult {
  return { content: [{ type: 'text', text }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
}

function tools(calls: string[]) {
  return {
    web_search: tool({
      description: 'Search the web.',
      inputSchema: z.object({ query: z.string() }),
      execute: async ({ query }) => {
        calls.push(query);
        return { results: [], note: 'no results' };
      },
    }),
  };
}

test('a looping agent is stopped by the stop condition at the step eddy says', async () => {
  const tee = new RecordingTee();
  const eddy = eddyLoop(new Local({ projectId: 'acme', tee }), { agentName: 'researcher' });
  let n = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => callTool(n++, 'web_search', { query: 'eddy release date' }, 'Let me search again.'),
  });
  const calls: string[] = [];
  const result = await generateText({
    model,
    tools: tools(calls),
    prompt: 'When is eddy released?',
    stopWhen: [stepCountIs(60), eddy.stopWhen],
    prepareStep: eddy.prepareStep,
    onFinish: eddy.onFinish,
  });
  const stop = eddy.stopped;
  assert.ok(stop, 'eddy never stopped the loop');
  assert.ok(result.steps.length < 60);
  // Steered once (the agent was not told about the loop before), then stopped when it went on.
  const want = stopAfterSteer(tee.events, replayed(tee.events));
  assert.ok(want, 'no stop after the steer');
  assert.deepEqual(stop.signal, want);
  const toolSteps = tee.events.filter((e) => e.kind === 'step' && e.tool_name);
  // The verdict came with the SDK step that showed it (its thought or its tool call, which the
  // SDK runs together): the model was not called again.
  const last = toolSteps.at(-1)?.step_index as number;
  assert.ok([last - 1, last].includes(want?.step_index as number), `stop at ${want?.step_index}, last tool step ${last}`);
  assert.equal(calls.length, toolSteps.length);
  assert.equal(result.steps.length, calls.length);
  assert.ok(tee.events.some((e) => e.step_type === 'think' && e.content === 'Let me search again.'));
  const end = tee.events.at(-1)!;
  assert.deepEqual([end.kind, end.termination_reason], ['run_finished', 'loop_detected']);
});

test('a healthy agent finishes, with no stop', async () => {
  const tee = new RecordingTee();
  const eddy = eddyLoop(new Local({ projectId: 'acme', tee }), { agentName: 'researcher' });
  const queries = ['eddy release', 'eddy changelog', 'eddy github'];
  let n = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => (n < queries.length ? callTool(n, 'web_search', { query: queries[n++] }) : answer('Not announced yet.')),
  });
  const calls: string[] = [];
  const result = await generateText({
    model,
    tools: tools(calls),
    prompt: 'When is eddy released?',
    stopWhen: [stepCountIs(60), eddy.stopWhen],
    prepareStep: eddy.prepareStep,
    onFinish: eddy.onFinish,
  });
  assert.equal(result.text, 'Not announced yet.');
  assert.deepEqual(calls, queries);
  assert.equal(eddy.stopped, null);
  const outs = replayed(tee.events);
  assert.ok(outs.every((o) => o.kind === 'run_terminated' || o.severity !== 'stop'));
  assert.deepEqual(tee.events.filter((e) => e.kind === 'step').map((e) => e.tool_name ?? e.step_type),
    ['web_search', 'web_search', 'web_search', 'think']);
  assert.equal(tee.events.at(-1)?.kind, 'run_finished');
});

test('the first verdict steers the agent once: a model that heeds it finishes, with no stop', async () => {
  const tee = new RecordingTee();
  const eddy = eddyLoop(new Local({ projectId: 'acme', tee }), { agentName: 'researcher' });
  const heard: string[] = [];
  let n = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      // Every user turn after the question is eddy's.
      const said = prompt.filter((m) => m.role === 'user').slice(1)
        .flatMap((m) => m.content.map((p) => (p.type === 'text' ? p.text : '')));
      if (said.length > heard.length) heard.push(...said.slice(heard.length));
      return heard.length > 0 ? answer('Not announced yet; I stopped searching.') : callTool(n++, 'web_search', { query: 'eddy release date' });
    },
  });
  const calls: string[] = [];
  const result = await generateText({
    model,
    tools: tools(calls),
    prompt: 'When is eddy released?',
    stopWhen: [stepCountIs(60), eddy.stopWhen],
    prepareStep: eddy.prepareStep,
    onFinish: eddy.onFinish,
  });
  assert.equal(result.text, 'Not announced yet; I stopped searching.');
  assert.equal(eddy.stopped, null);
  assert.equal(eddy.steers.length, 1);
  const [steer] = eddy.steers;
  assert.deepEqual(heard, [steer.message]);
  // The steer is the first verdict eddy replay gives for the same events (a stop at conclusive
  // evidence, held for the steer), it is reported, and nothing stopped the run after it.
  const outs = replayed(tee.events);
  assert.deepEqual(steer.signal, firstVerdict(outs));
  assert.equal(stopAfterSteer(tee.events, outs), undefined);
  const reported = tee.events.filter((e) => e.step_type === 'steer');
  assert.deepEqual(reported.map((e) => [e.content, e.signal_event_id]), [[steer.message, steer.eventId]]);
});
