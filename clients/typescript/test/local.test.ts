// Local: eddy's engine in this process. Expected verdicts come from replaying the same events
// (the package's replay, the `eddy replay` of the addon), never from numbers read off the guard;
// tests/inproc.rs holds both to the eddy binary byte for byte.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Local, LoopDetected, replay } from '../src';
import type { StepFields } from '../src';
import { RecordingTee, replayed, tempDir } from './helpers';

const SEARCH: StepFields = { toolName: 'web_search', toolInput: { query: 'eddy release date' }, toolOutput: { results: [] } };

function loopUntilStopped(eddy: Local, run: string, step: StepFields = SEARCH, limit = 100): number {
  for (let calls = 0; calls < limit; calls++) {
    try {
      eddy.check(run);
    } catch (e) {
      assert.ok(e instanceof LoopDetected);
      return calls;
    }
    eddy.step(run, step);
  }
  return limit;
}

test('a repeated call is stopped before the next call, with the signal replay gives', () => {
  const tee = new RecordingTee();
  const eddy = new Local({ projectId: 'acme', tee });
  const run = eddy.runStarted('r-1');
  const calls = loopUntilStopped(eddy, run);
  assert.ok(calls < 100, 'the loop was never stopped');
  const stop = eddy.stopped(run);
  assert.ok(stop);
  assert.equal(stop.severity, 'stop');
  assert.equal(stop.stepIndex, calls, 'no call ran after the verdict');
  const want = replayed(tee.events).filter((o) => o.kind !== 'run_terminated');
  assert.deepEqual(eddy.signals(run), want);
  assert.deepEqual(want.at(-1), stop.signal);
});

test('observe returns the run\'s signals at once', () => {
  const eddy = new Local();
  const seen: Record<string, unknown>[] = [];
  const got: unknown[] = [];
  for (let i = 1; i < 30; i++) {
    seen.push({ v: 1, kind: 'step', project_id: 'default', run_id: 'r', ts: 1000 + i, step_index: i,
      step_type: 'tool_call', tool_name: 'web_search', tool_input: { query: 'eddy release date' }, tool_output: { results: [] } });
    got.push(...eddy.observe('r', { ...SEARCH, stepIndex: i, ts: 1000 + i }));
  }
  const want = replayed(seen);
  assert.ok(want.length > 0);
  assert.deepEqual(got, want);
});

test('a config file sets the thresholds as for eddy run', () => {
  const dir = tempDir();
  const cfg = path.join(dir, 'eddy.toml');
  fs.writeFileSync(cfg, 'kafka_brokers = "unused:9092"\n[engine.detectors.repeat]\n' +
    'normal = { warn = 0, alert = 0, stop = 4 }\nconsecutive = { warn = 0, alert = 0, stop = 0 }\n');
  const d = loopUntilStopped(new Local(), 'r');
  const strict = new Local({ config: cfg });
  const s = loopUntilStopped(strict, 'r');
  // Stopped at the 4th identical call, as configured: later than by default.
  assert.equal(s, 4);
  assert.ok(d < s, `${d} < ${s}`);
  assert.equal(loopUntilStopped(new Local({ toml: fs.readFileSync(cfg, 'utf8') }), 'r'), s);
  const events = Array.from({ length: s }, (_, k) => ({ v: 1, kind: 'step', project_id: 'default', run_id: 'r',
    ts: 1000 + k, step_index: k + 1, step_type: 'tool_call', tool_name: 'web_search',
    tool_input: { query: 'eddy release date' }, tool_output: { results: [] } }));
  const file = path.join(dir, 'e.jsonl');
  fs.writeFileSync(file, events.map((e) => JSON.stringify(e) + '\n').join(''));
  const stops = replay(file, { config: cfg }).filter((o) => o.kind !== 'run_terminated' && o.severity === 'stop');
  assert.equal(stops[0]?.step_index, strict.stopped('r')?.stepIndex);
});

test('a bad or missing config is refused', () => {
  assert.throws(() => new Local({ toml: '[engine]\nno_such_key = 1\n' }));
  assert.throws(() => new Local({ config: path.join(tempDir(), 'nope.toml') }), /does not exist/);
});

test('an ended run is dropped', () => {
  const eddy = new Local();
  const run = eddy.runStarted('r');
  loopUntilStopped(eddy, run);
  assert.equal(eddy.openRuns, 1);
  assert.ok(eddy.signals(run).length > 0);
  eddy.runFinished(run);
  assert.equal(eddy.openRuns, 0);
  assert.deepEqual(eddy.signals(run), []);
  assert.equal(eddy.stopped(run), null);
  assert.equal(eddy.terminated(run)?.termination_reason, 'loop_detected');
  assert.equal(eddy.endedRuns, 1);
});

test('an idle run ends by event time', () => {
  const eddy = new Local({ toml: '[engine]\nidle_timeout_ms = 60000\n' });
  eddy.observe('quiet', { ...SEARCH, ts: 1_000 });
  const busy = (ts: number, i: number) => ({ v: 1, kind: 'step', project_id: 'default', run_id: 'busy', ts,
    step_index: i, step_type: 'think', content: `idea ${i}` });
  assert.deepEqual(eddy.observeEvent(busy(30_000, 1)), []);
  const outs = eddy.observeEvent(busy(62_000, 2));
  assert.deepEqual(outs.map((o) => [o.kind, o.run_id, (o as { termination_reason?: string }).termination_reason]),
    [['run_terminated', 'quiet', 'timeout']]);
  assert.equal(eddy.openRuns, 1);
});

test('an event eddy rejects', () => {
  const eddy = new Local();
  assert.throws(() => eddy.observe('r', { ...SEARCH, stepIndex: -1 }), /step_index/);
  assert.throws(() => eddy.observeEvent('{"v": 1}'));
  eddy.step('r', { ...SEARCH, stepIndex: -2 });
  assert.equal(eddy.errors.length, 1);
  assert.match(eddy.errors[0], /step_index/);
});

test('the replay command prints what replay returns', () => {
  const dir = tempDir();
  const file = path.join(dir, 'trace.jsonl');
  const lines = Array.from({ length: 12 }, (_, i) => JSON.stringify({ v: 1, kind: 'step', project_id: 'p', run_id: 'r',
    ts: 1000 + i, step_index: i, step_type: 'tool_call', tool_name: 'web_search', tool_input: { q: 1 }, tool_output: [] }));
  lines.splice(3, 0, 'not json');
  fs.writeFileSync(file, lines.join('\n') + '\n');
  const cli = path.join(__dirname, '..', 'src', 'cli.js');
  const done = spawnSync(process.execPath, [cli, 'replay', file], { encoding: 'utf8' });
  assert.equal(done.status, 0, done.stderr);
  const printed = done.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.ok(printed.length > 0);
  assert.deepEqual(printed, replay(file));
  assert.match(done.stderr, /line 4: skipped: /);
  assert.ok(done.stderr.trimEnd().endsWith(`replayed 12 events (1 malformed lines skipped), ${printed.length} output events`));
});
