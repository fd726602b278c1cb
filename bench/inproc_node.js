#!/usr/bin/env node
// What eddy's in-process guard costs a Node agent, step by step, beside a loopctl-style check,
// both measured in this one process on the same steps (LoopGuard has no JavaScript package:
// bench/inproc_python.py measures it).
//
//   node bench/inproc_node.js [--trace tests/corpus/events.jsonl] [--repeat 3] [--open 20000]
//
// Per step (every step event of the trace, in its order, each run under a fresh id per repeat):
//   eddy Local.observe   the step's fields as the agent has them (an object) -> the run's
//                        signals: the event built and encoded as the Emitter would send it, the
//                        crossing into the native addon, the detectors, the verdict bookkeeping
//   eddy Local.check     the check before the next tool call (throws LoopDetected on a stop)
//   eddy engine alone    the same steps as ready JSON text straight into the native addon: the
//                        detectors and one crossing, without building and encoding the event
//   loopctl-style        per run, a counter per sha256(tool + sorted-keys JSON input), reset when
//                        the output changes, stop at 10
// Each line: min / p50 / p99 / max in microseconds, over every step. Memory per open run: heap
// and RSS growth while `--open` runs are held open with 5 steps each, divided by the runs.
// Needs the package built (scripts/bootstrap, or `npm run build` in clients/typescript).
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { Local, LoopDetected } = require(path.join(__dirname, '..', 'clients', 'typescript'));

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const trace = opt('--trace', path.join(__dirname, '..', 'tests', 'corpus', 'events.jsonl'));
const repeat = Number(opt('--repeat', 3));
const open = Number(opt('--open', 20000));

const FIELDS = {
  step_type: 'stepType', step_index: 'stepIndex', content: 'content', tool_name: 'toolName',
  tool_input: 'toolInput', tool_output: 'toolOutput', tool_success: 'toolSuccess',
  tool_latency_ms: 'toolLatencyMs', tokens: 'tokens', cost_usd: 'costUsd',
  tokens_in_context: 'tokensInContext', agent: 'agent', caller: 'caller', metadata: 'metadata', ts: 'ts',
};

function stepsOf(file, times) {
  const events = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const out = [];
  for (let r = 0; r < times; r++) {
    for (const ev of events) {
      if (ev.kind !== 'step') continue;
      const step = {};
      for (const [k, f] of Object.entries(FIELDS)) if (k in ev) step[f] = ev[k];
      out.push([`${ev.run_id}~${r}`, step]);
    }
  }
  return out;
}

function stats(name, ns) {
  ns.sort((a, b) => a - b);
  const at = (q) => ns[Math.min(ns.length - 1, Math.floor(q * ns.length))] / 1000;
  const f = (x, w = 8) => x.toFixed(2).padStart(w);
  console.log(`${name.padEnd(22)} steps=${String(ns.length).padEnd(7)} min=${f(ns[0] / 1000)}us ` +
    `p50=${f(at(0.5))}us p99=${f(at(0.99))}us max=${f(ns.at(-1) / 1000, 9)}us`);
}

function sorted(v) {
  if (Array.isArray(v)) return v.map(sorted);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]));
  }
  return v;
}

class LoopctlStyle {
  constructor(stopAt = 10) {
    this.stopAt = stopAt;
    this.runs = new Map();
  }
  observe(runId, step) {
    if (step.toolName === undefined) return false;
    const key = crypto.createHash('sha256').update(`${step.toolName}\0${JSON.stringify(sorted(step.toolInput ?? null))}`).digest('hex');
    const out = crypto.createHash('sha256').update(JSON.stringify(sorted(step.toolOutput ?? null))).digest('hex');
    let calls = this.runs.get(runId);
    if (!calls) this.runs.set(runId, (calls = new Map()));
    const [last, n] = calls.get(key) ?? [null, 0];
    const count = last === out ? n + 1 : 1;
    calls.set(key, [out, count]);
    return count >= this.stopAt;
  }
}

function memory(steps) {
  const perRun = steps.slice(0, 5).map(([, s]) => s);
  const measure = (name, make, feed) => {
    global.gc?.();
    const heap0 = process.memoryUsage().heapUsed;
    const rss0 = process.memoryUsage().rss;
    const holder = make();
    for (let i = 0; i < open; i++) for (const s of perRun) feed(holder, `open-${i}`, s);
    global.gc?.();
    const heap = process.memoryUsage().heapUsed - heap0;
    const rss = process.memoryUsage().rss - rss0;
    console.log(`${name.padEnd(22)} open_runs=${open} rss_growth=${(rss / 2 ** 20).toFixed(1).padStart(7)}MiB ` +
      `per_run=${(rss / open / 1024).toFixed(2).padStart(6)}KiB (js heap ${(heap / open / 1024).toFixed(2)}KiB)`);
    return holder;
  };
  const eddy = measure('eddy Local', () => new Local(), (h, r, s) => h.observe(r, s));
  if (eddy.openRuns !== open) throw new Error(`${eddy.openRuns} runs open, not ${open}`);
  measure('loopctl-style', () => new LoopctlStyle(), (h, r, s) => h.observe(r, s));
}

function perStep(steps) {
  const eddy = new Local();
  const observeNs = [];
  const checkNs = [];
  const clock = process.hrtime.bigint;
  for (const [run, step] of steps) {
    const t0 = clock();
    eddy.observe(run, step);
    const t1 = clock();
    try {
      eddy.check(run);
    } catch (e) {
      if (!(e instanceof LoopDetected)) throw e;
    }
    const t2 = clock();
    observeNs.push(Number(t1 - t0));
    checkNs.push(Number(t2 - t1));
  }
  stats('eddy Local.observe', observeNs);
  stats('eddy Local.check', checkNs);
  const { addon } = require(path.join(__dirname, '..', 'clients', 'typescript', 'dist', 'src', 'native'));
  const engine = new addon.Engine(null, null, 1);
  const texts = steps.map(([run, step], i) => {
    const ev = { v: 1, kind: 'step', project_id: 'default', run_id: run, ts: i, step_type: 'tool_call' };
    for (const [k, f] of Object.entries(FIELDS)) if (f in step && k !== 'ts') ev[k] = step[f];
    return JSON.stringify(ev);
  });
  const engineNs = [];
  for (const text of texts) {
    const t0 = clock();
    engine.observe(text);
    engineNs.push(Number(clock() - t0));
  }
  stats('eddy engine alone', engineNs);
  const lc = new LoopctlStyle();
  const ns = [];
  for (const [run, step] of steps) {
    const t0 = clock();
    lc.observe(run, step);
    ns.push(Number(clock() - t0));
  }
  stats('loopctl-style', ns);
}

const steps = stepsOf(trace, repeat);
// Memory first, in a process that has not grown yet.
memory(steps);
perStep(steps);
