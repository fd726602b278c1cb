// Guard: one Kafka consumer of eddy's signals topic per process.
//
// It joins no consumer group and commits nothing: it assigns itself every partition of the topic,
// starting at the first signal written since the guard started (less `lookbackMs` for clock
// skew), and looks for new partitions every `refreshMs`. Records whose key (eddy keys signals by
// run id) is not a watched run are dropped before their JSON is read.
import type * as RdKafka from '@confluentinc/kafka-javascript';
import { kafka, KafkaConfig } from './kafka';
import { LoopDetected, OutputEvent, Severity, Signal, RunTerminated, Verdicts } from './verdicts';
import { Steer, SteeringGuard } from './steering';


/** How long close() waits for librdkafka's consumer to close. */
const CLOSE_TIMEOUT_MS = 10_000;
export interface GuardOptions {
  brokers: string;
  topic?: string;
  minSeverity?: Severity;
  /** Signals from this severity (below stop) become a corrective message (`steer`); null:
   * never. Default alert. */
  steerOn?: Severity | null;
  onStop?: (stop: LoopDetected) => void;
  lookbackMs?: number;
  refreshMs?: number;
  maxWatched?: number;
  /** librdkafka consumer properties, over eddy's. */
  consumerConfig?: KafkaConfig;
}

export class Guard implements SteeringGuard {
  readonly topic: string;
  readonly errors: string[] = [];
  private readonly verdicts: Verdicts;
  private readonly consumer: RdKafka.KafkaConsumer;
  private readonly startMs: number;
  private readonly refreshMs: number;
  private readonly assigned = new Set<number>();
  private readonly onStop?: (stop: LoopDetected) => void;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  /** The partition refresh in flight, if any: closing waits for it (a metadata request or an
   * assignment racing the disconnect can hang librdkafka's close). */
  private refreshing: Promise<void> = Promise.resolve();
  private readyResolve!: () => void;
  /** Resolves once every partition of the topic is assigned. */
  readonly ready: Promise<void>;

  constructor(opts: GuardOptions) {
    this.topic = opts.topic ?? 'agent.signals';
    this.verdicts = new Verdicts(opts.minSeverity ?? 'stop', opts.maxWatched ?? 100_000, opts.steerOn === undefined ? 'alert' : opts.steerOn);
    this.startMs = Date.now() - (opts.lookbackMs ?? 30_000);
    this.refreshMs = opts.refreshMs ?? 5_000;
    this.onStop = opts.onStop;
    this.ready = new Promise((resolve) => {
      this.readyResolve = resolve;
    });
    const { KafkaConsumer } = kafka();
    this.consumer = new KafkaConsumer(
      {
        'bootstrap.servers': opts.brokers,
        // librdkafka wants a group id even for assign(); a fresh one, never joined or committed.
        'group.id': `eddy-agent-guard-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
        'enable.auto.commit': false,
        'enable.auto.offset.store': false,
        'fetch.wait.max.ms': 100,
        'socket.keepalive.enable': true,
        ...opts.consumerConfig,
      } as RdKafka.ConsumerGlobalConfig,
      // A recreated topic (offsets out of range) is read from its start: all of it is new.
      { 'auto.offset.reset': 'earliest' },
    );
    this.consumer.on('event.error', (err) => this.errors.push(`kafka: ${err.message}`));
    this.consumer.on('data', (m) => this.take(m.key, m.value));
    this.consumer.connect({}, (err) => {
      if (err) {
        this.errors.push(`cannot connect: ${err.message}`);
        return;
      }
      this.consumer.consume();
      this.scheduleRefresh(0);
    });
  }

  /** True once every partition of the topic is assigned, false after `timeoutMs` (the topic
   * may not exist yet: signals since the start are still read once it does). */
  async waitReady(timeoutMs = 10_000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      return await Promise.race([this.ready.then(() => true), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  get minSeverity(): Severity {
    return this.verdicts.minSeverity;
  }

  /** Act on this run's signals (only of `projectId`, when given). */
  watch(runId: string, projectId: string | null = null): void {
    this.verdicts.watch(runId, projectId);
  }

  unwatch(runId: string): void {
    this.verdicts.unwatch(runId);
  }

  /** Throws `LoopDetected` if a signal of at least minSeverity arrived for the run. A Map
   * lookup: call it before every tool call, it never waits on the network. */
  check(runId: string): void {
    this.verdicts.check(runId);
  }

  stopped(runId: string): LoopDetected | null {
    return this.verdicts.stopped(runId);
  }

  /** eddy's corrective message for the run, once per loop (see Local.steer). A Map lookup. */
  steer(runId: string): Steer | null {
    return this.verdicts.steer(runId);
  }

  verdict(runId: string): Signal | null {
    return this.verdicts.verdict(runId);
  }

  signals(runId: string): Signal[] {
    return this.verdicts.signals(runId);
  }

  terminated(runId: string): RunTerminated | null {
    return this.verdicts.terminated(runId);
  }

  stats(): { received: number; duplicates: number; ignored: number; partitions: number } {
    const v = this.verdicts;
    return { received: v.received, duplicates: v.duplicates, ignored: v.ignored, partitions: this.assigned.size };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.refreshing;
    try {
      this.consumer.unassign();
    } catch {
      // not connected: nothing assigned
    }
    // librdkafka's close has been seen to hang (once, in a CI rehearsal, after every signal
    // had arrived); an agent shutting down must not wait on it for ever.
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), CLOSE_TIMEOUT_MS);
      timer.unref();
    });
    const closed = new Promise<boolean>((resolve) => this.consumer.disconnect(() => resolve(false)));
    if (await Promise.race([closed, gaveUp])) {
      this.errors.push(`the signals consumer did not close within ${CLOSE_TIMEOUT_MS} ms`);
    }
    clearTimeout(timer);
  }

  private take(key: RdKafka.MessageKey | undefined, value: Buffer | null): void {
    if (key === undefined || key === null || value === null) return;
    const runId = key.toString();
    if (!this.verdicts.isWatched(runId)) return;
    let event: OutputEvent;
    try {
      event = JSON.parse(value.toString()) as OutputEvent;
    } catch {
      return;
    }
    const stop = this.verdicts.offer(event);
    if (stop && this.onStop) {
      try {
        this.onStop(stop);
      } catch (e) {
        this.errors.push(`onStop failed: ${(e as Error).message}`);
      }
    }
  }

  private scheduleRefresh(ms: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.refreshing = this.refresh();
    }, ms);
    this.timer.unref();
  }

  /** Assign partitions not assigned yet, each from the first signal since the guard started. */
  private async refresh(): Promise<void> {
    if (this.closed) return;
    let done = false;
    try {
      const md = await new Promise<RdKafka.Metadata>((resolve, reject) =>
        this.consumer.getMetadata({ topic: this.topic, timeout: 5000 }, (err, data) => (err ? reject(err) : resolve(data))),
      );
      const t = md.topics.find((x) => x.name === this.topic);
      const fresh = (t?.partitions ?? []).map((p) => p.id).filter((p) => !this.assigned.has(p));
      if (t && t.partitions.length > 0 && fresh.length === 0) done = true;
      if (fresh.length > 0) {
        const byTime = await new Promise<RdKafka.TopicPartitionOffset[]>((resolve, reject) =>
          this.consumer.offsetsForTimes(
            fresh.map((partition) => ({ topic: this.topic, partition, offset: this.startMs })),
            5000,
            (err, offsets) => (err ? reject(err) : resolve(offsets)),
          ),
        );
        if (this.closed) return;
        const toppars: RdKafka.Assignment[] = [];
        for (const tp of byTime) {
          let offset = tp.offset;
          if (offset < 0) {
            // Nothing written since the start: begin at today's end, fixed now, so a signal
            // produced between this call and the first fetch is not skipped.
            offset = await new Promise<number>((resolve, reject) =>
              this.consumer.queryWatermarkOffsets(this.topic, tp.partition, 5000, (err, o) =>
                err ? reject(err) : resolve(o.highOffset),
              ),
            );
          }
          toppars.push({ topic: this.topic, partition: tp.partition, offset });
        }
        // In the library, not in its type declarations.
        (this.consumer as unknown as { incrementalAssign(a: RdKafka.Assignment[]): void }).incrementalAssign(toppars);
        for (const tp of toppars) this.assigned.add(tp.partition);
        done = true;
      }
    } catch (e) {
      this.errors.push(`partition refresh failed (will retry): ${(e as Error).message}`);
    }
    if (done) this.readyResolve();
    this.scheduleRefresh(done ? this.refreshMs : 500);
  }
}
