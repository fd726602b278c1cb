import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { replay } from '../src';
import type { OutputEvent } from '../src';
import type { V1Event } from '../src';

/** A tee that keeps what the fleet would have received. */
export class RecordingTee {
  readonly events: V1Event[] = [];
  deliverEvent(_runId: string, event: V1Event): void {
    this.events.push(event);
  }
}

export function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'eddy-agent-test-'));
}

/** `eddy replay` of events as the Emitter puts them on the topic. */
export function replayed(events: V1Event[]): OutputEvent[] {
  const file = path.join(tempDir(), 'events.jsonl');
  fs.writeFileSync(file, events.map((e) => JSON.stringify(e) + '\n').join(''));
  return replay(file);
}

/** The first signal a guard acts on at the default steerOn: an alert, or a stop that came with
 * no alert before it (eddy stops at conclusive evidence). */
export function firstVerdict(outs: OutputEvent[]): OutputEvent | undefined {
  return outs.find((o) => o.kind !== 'run_terminated' && (o.severity === 'alert' || o.severity === 'stop'));
}

/** The stop that ends a steered run: the first stop after its one `steer` step. */
export function stopAfterSteer(events: V1Event[], outs: OutputEvent[]): OutputEvent | undefined {
  const steered = events.filter((e) => e.kind === 'step' && e.step_type === 'steer');
  if (steered.length !== 1) throw new Error(`steered ${steered.length} times, not once`);
  const at = steered[0].step_index as number;
  return outs.find((o) => o.kind !== 'run_terminated' && o.severity === 'stop' && (o.step_index as number) > at);
}
