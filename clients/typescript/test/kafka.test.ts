// Emitter and Guard against a real Kafka (EDDY_KAFKA_BROKERS; scripts/test starts one): the
// Emitter's v1 events arrive keyed by run id, in order; the Guard turns a stop signal on the
// signals topic into LoopDetected at the next check, once however often it is delivered; a
// Local's tee puts what the engine saw on the topic.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import * as Kafka from '@confluentinc/kafka-javascript';
import { Emitter, Guard, Local, LoopDetected } from '../src';

const brokers = process.env.EDDY_KAFKA_BROKERS;
const skip = brokers ? false : 'EDDY_KAFKA_BROKERS is not set (scripts/test sets it)';
const tag = `${process.pid}-${Date.now()}`;
const steps = `ts-steps-${tag}`;
const signals = `ts-signals-${tag}`;

/** `p`, or a failure naming `what` after `ms`: no wait of these tests is unbounded. */
async function within<T>(what: string, p: Promise<T>, ms = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function until<T>(what: string, f: () => T | null | undefined, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = f();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

before(async () => {
  if (skip) return;
  const admin = Kafka.AdminClient.create({ 'bootstrap.servers': brokers! });
  for (const topic of [steps, signals]) {
    await within(`create ${topic}`, new Promise<void>((resolve, reject) =>
      admin.createTopic({ topic, num_partitions: 3, replication_factor: 1 }, 10_000, (err) => (err ? reject(err) : resolve())),
    ));
  }
  admin.disconnect();
});

/** Every record of `topic` until `count` arrived: [key, value, partition]. */
async function readAll(topic: string, count: number): Promise<Array<[string, Record<string, unknown>, number]>> {
  const consumer = new Kafka.KafkaConsumer(
    { 'bootstrap.servers': brokers!, 'group.id': `reader-${tag}-${topic}`, 'enable.auto.commit': false },
    { 'auto.offset.reset': 'earliest' },
  );
  const got: Array<[string, Record<string, unknown>, number]> = [];
  await within('reader connect', new Promise<void>((resolve, reject) => consumer.connect({}, (err) => (err ? reject(err) : resolve()))));
  consumer.assign([0, 1, 2].map((partition) => ({ topic, partition, offset: 0 })));
  consumer.on('data', (m) => got.push([String(m.key), JSON.parse(m.value!.toString()), m.partition]));
  consumer.consume();
  try {
    await until(`${count} records on ${topic}`, () => (got.length >= count ? true : null));
  } finally {
    await within('reader disconnect', new Promise<void>((resolve) => consumer.disconnect(() => resolve())));
  }
  return got;
}

test('the Emitter sends v1 events keyed by run id, a run on one partition, in order', { skip, timeout: 90_000 }, async () => {
  const emitter = new Emitter({ brokers: brokers!, topic: steps, projectId: 'acme', agentName: 'bot' });
  const runs = ['run-a', 'run-b', 'run-c', 'run-d'];
  for (const run of runs) {
    emitter.runStarted(run);
    for (let i = 0; i < 3; i++) emitter.step(run, { toolName: 'search', toolInput: { q: i }, toolOutput: null });
    emitter.runFinished(run);
  }
  assert.deepEqual(await within('emitter close', emitter.close()), []);
  const got = await readAll(steps, runs.length * 5);
  for (const run of runs) {
    const mine = got.filter(([key]) => key === run);
    assert.equal(new Set(mine.map(([, , p]) => p)).size, 1, `${run} on one partition`);
    assert.deepEqual(mine.map(([, v]) => [v.kind, v.step_index ?? null]),
      [['run_started', null], ['step', 1], ['step', 2], ['step', 3], ['run_finished', null]]);
    assert.ok(mine.every(([, v]) => v.v === 1 && v.project_id === 'acme' && v.run_id === run));
    assert.deepEqual(mine[1][1].tool_output, null);
  }
});

test('the Guard turns a stop on the signals topic into LoopDetected, once', { skip, timeout: 90_000 }, async () => {
  const guard = new Guard({ brokers: brokers!, topic: signals, refreshMs: 500 });
  assert.ok(await guard.waitReady(30_000), `guard not ready: ${guard.errors.join('; ')}`);
  guard.watch('watched', 'acme');
  const producer = new Kafka.Producer({ 'bootstrap.servers': brokers! });
  await within('producer connect', new Promise<void>((resolve, reject) => producer.connect({}, (err) => (err ? reject(err) : resolve()))));
  const signal = (run: string, severity: string, id: string) => ({
    kind: 'loop_detected', event_id: id, project_id: 'acme', run_id: run, step_index: 4, ts: '2026-01-01T00:00:00Z',
    detector: 'repeated_operation', severity, pattern: 'search x4', fingerprint: 'f', hits: 4,
    step_indices: [1, 2, 3, 4], first_step_index: 1, evidence: {},
  });
  const send = (run: string, v: unknown) => producer.produce(signals, null, Buffer.from(JSON.stringify(v)), run);
  send('other', signal('other', 'stop', 'o1'));
  send('watched', signal('watched', 'alert', 's1'));
  guard.check('watched');
  for (let copy = 0; copy < 2; copy++) send('watched', signal('watched', 'stop', 's2'));
  await within('producer flush', new Promise<void>((resolve) => producer.flush(10_000, () => resolve())));
  const stop = await until('the stop', () => guard.stopped('watched'));
  assert.equal(stop.severity, 'stop');
  assert.throws(() => guard.check('watched'), LoopDetected);
  await until('the duplicate', () => (guard.stats().duplicates >= 1 ? true : null));
  assert.deepEqual(guard.signals('watched').map((s) => s.event_id), ['s1', 's2']);
  assert.equal(guard.stopped('other'), null);
  await within('producer disconnect', new Promise<void>((resolve) => producer.disconnect(() => resolve())));
  await within('guard close', guard.close());
});

test('a Local with a tee puts the events it saw on the input topic', { skip, timeout: 90_000 }, async () => {
  const tee = new Emitter({ brokers: brokers!, topic: steps, projectId: 'acme', agentName: 'bot' });
  const eddy = new Local({ projectId: 'acme', tee });
  const run = eddy.runStarted('teed-run');
  let calls = 0;
  try {
    for (; calls < 50; calls++) {
      eddy.check(run);
      eddy.step(run, { toolName: 'search', toolInput: { q: 'same' }, toolOutput: [] });
    }
  } catch (e) {
    assert.ok(e instanceof LoopDetected);
  }
  eddy.runFinished(run);
  assert.deepEqual(await within('tee close', tee.close()), []);
  const got = (await readAll(steps, 20 + calls + 2)).filter(([key]) => key === 'teed-run');
  assert.equal(got.length, calls + 2);
  assert.equal(got.at(-1)![1].termination_reason, 'loop_detected');
});
