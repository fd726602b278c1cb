// Node agents on the eddy-agent package (clients/typescript) for tests/agent_node.rs, against a
// real `eddy run`. Prints one JSON report line on stdout.
//
//   node agent_node.js --brokers B --steps-topic T --signals-topic S --run R --scenario fleet|tee
//
// fleet: an Emitter whose guard is the fleet's Guard; the agent repeats one search (each call
//        takes 50 ms, as a tool would) until the worker's stop reaches the guard.
// tee:   a Local with an Emitter as its tee; the agent repeats the search until the Local stops
//        it, then ends the run. Reports every signal the Local gave, for comparison with the
//        worker's verdicts on the same events.
'use strict';
const path = require('node:path');
const { Emitter, Guard, Local, LoopDetected } = require(path.join(__dirname, '..', 'clients', 'typescript'));

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  if (i < 0) throw new Error(`${name} is required`);
  return args[i + 1];
};
const brokers = opt('--brokers');
const run = opt('--run');
const scenario = opt('--scenario');
const step = { toolName: 'web_search', toolInput: { query: 'eddy release date' }, toolOutput: { results: [] } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function fleet() {
  const guard = new Guard({ brokers, topic: opt('--signals-topic'), refreshMs: 500 });
  if (!(await guard.waitReady(60_000))) throw new Error(`guard not ready: ${guard.errors.join('; ')}`);
  console.error('agent: guard ready');
  const emitter = new Emitter({ brokers, topic: opt('--steps-topic'), projectId: 'node-agents', agentName: 'researcher', guard });
  emitter.runStarted(run);
  let calls = 0;
  let stop = null;
  for (; calls < 400; calls++) {
    try {
      guard.check(run);
    } catch (e) {
      if (!(e instanceof LoopDetected)) throw e;
      stop = e;
      break;
    }
    await sleep(50);
    emitter.step(run, step);
  }
  console.error(`agent: ${calls} calls, stopped: ${stop !== null}`);
  emitter.runFinished(run, { status: 'failed' });
  const errors = await emitter.close();
  console.error('agent: emitter closed');
  await guard.close();
  console.error('agent: guard closed');
  return { run_id: run, stopped: stop !== null, tool_calls: calls, errors, signal: stop && stop.signal };
}

async function tee() {
  const emitter = new Emitter({ brokers, topic: opt('--steps-topic'), projectId: 'node-agents', agentName: 'researcher' });
  const eddy = new Local({ projectId: 'node-agents', agentName: 'researcher', tee: emitter });
  eddy.runStarted(run);
  let calls = 0;
  for (; calls < 400; calls++) {
    try {
      eddy.check(run);
    } catch (e) {
      if (!(e instanceof LoopDetected)) throw e;
      break;
    }
    eddy.step(run, step);
  }
  const signals = eddy.signals(run);
  eddy.runFinished(run, { status: 'failed' });
  const errors = await emitter.close();
  return { run_id: run, tool_calls: calls, errors, signals, terminated: eddy.terminated(run) };
}

(scenario === 'fleet' ? fleet() : tee()).then(
  (report) => {
    process.stdout.write(JSON.stringify(report) + '\n');
  },
  (e) => {
    console.error(e);
    // Kafka clients still connected would keep the process alive.
    process.exit(1);
  },
);
