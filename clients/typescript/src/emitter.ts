// Emitter: an agent's steps to eddy's input topic, as v1 contract events.
//
// Key = run id and librdkafka's murmur2_random partitioner put a run where Kafka's Java clients
// (and `eddy replay --partitions N`) would, so every producer of the topic agrees and eddy sees a
// run's steps in order. A step only queues its event: librdkafka batches (linger.ms) and sends
// from its own thread, so a step never waits on the network.
import type * as RdKafka from '@confluentinc/kafka-javascript';
import { kafka, KafkaConfig } from './kafka';
import { RunGuard, RunWriter, V1Event } from './writer';

export interface EmitterOptions {
  brokers: string;
  topic?: string;
  projectId: string;
  agentName?: string;
  guard?: RunGuard | null;
  firstStepIndex?: number;
  onError?: (message: string) => void;
  /** librdkafka producer properties, over eddy's. */
  producerConfig?: KafkaConfig;
}

export class Emitter extends RunWriter {
  readonly topic: string;
  readonly errors: string[] = [];
  /** Resolves once the producer is connected (events sent before wait for it). */
  readonly ready: Promise<void>;
  private readonly producer: RdKafka.Producer;
  private readonly waiting: Array<[string, Buffer]> = [];
  private connected = false;
  private readonly onError?: (message: string) => void;

  constructor(opts: EmitterOptions) {
    super({ projectId: opts.projectId, agentName: opts.agentName, guard: opts.guard, firstStepIndex: opts.firstStepIndex });
    this.topic = opts.topic ?? 'agent.steps';
    this.onError = opts.onError;
    const { Producer } = kafka();
    this.producer = new Producer({
      'bootstrap.servers': opts.brokers,
      // Kafka's Java partitioner: a run lands where every other producer puts it.
      partitioner: 'murmur2_random',
      // acks=all, and no duplicate or reordered step on a retry.
      'enable.idempotence': true,
      // Small: a verdict can only come after the step that shows the loop is sent.
      'linger.ms': 5,
      'compression.type': 'lz4',
      dr_cb: true,
      ...opts.producerConfig,
    } as RdKafka.ProducerGlobalConfig);
    this.producer.on('delivery-report', (err) => {
      if (err) this.error(`delivery failed: ${err.message}`);
    });
    this.producer.on('event.error', (err) => this.error(`kafka: ${err.message}`));
    this.producer.setPollInterval(20);
    this.ready = new Promise<void>((resolve, reject) => {
      this.producer.connect({}, (err) => (err ? reject(err) : resolve()));
    }).then(() => {
      this.connected = true;
      this.drain();
    });
    this.ready.catch((e: Error) => this.error(`cannot connect: ${e.message}`));
  }

  /** Send an event built elsewhere (Local's tee). */
  deliverEvent(runId: string, event: V1Event): void {
    this.deliver(runId, event);
  }

  protected deliver(runId: string, event: V1Event): void {
    this.waiting.push([runId, Buffer.from(RunWriter.encode(event))]);
    if (this.connected) this.drain();
  }

  private drain(): void {
    while (this.waiting.length > 0) {
      const [key, value] = this.waiting[0];
      try {
        this.producer.produce(this.topic, null, value, key);
      } catch (e) {
        // librdkafka's local queue is full: keep the event and try again shortly, in order.
        setTimeout(() => this.drain(), 50).unref();
        return;
      }
      this.waiting.shift();
    }
  }

  /** Wait until every queued event is delivered; throws after `timeoutMs`. */
  async flush(timeoutMs = 30_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.ready,
      new Promise<void>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not connected within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    while (this.waiting.length > 0 && Date.now() < until) {
      this.drain();
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise<void>((resolve, reject) =>
      this.producer.flush(Math.max(0, until - Date.now()), (err) => (err ? reject(err) : resolve())),
    );
    if (this.waiting.length > 0) throw new Error(`${this.waiting.length} events not sent within ${timeoutMs} ms`);
  }

  /** Flush and disconnect; returns the delivery errors seen (empty when all went through). */
  async close(timeoutMs = 30_000): Promise<string[]> {
    try {
      await this.flush(timeoutMs);
    } catch (e) {
      this.error(`flush: ${(e as Error).message}`);
    }
    await new Promise<void>((resolve) => this.producer.disconnect(() => resolve()));
    return [...this.errors];
  }

  private error(message: string): void {
    this.errors.push(message);
    this.onError?.(message);
  }
}
