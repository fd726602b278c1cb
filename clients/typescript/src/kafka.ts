// @confluentinc/kafka-javascript (librdkafka), loaded on first use: an agent that only runs eddy
// in process never needs it.
import type * as RdKafka from '@confluentinc/kafka-javascript';

let lib: typeof RdKafka | null = null;

export function kafka(): typeof RdKafka {
  if (lib === null) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      lib = require('@confluentinc/kafka-javascript') as typeof RdKafka;
    } catch (e) {
      throw new Error(
        `eddy-agent: Emitter and Guard need @confluentinc/kafka-javascript (${(e as Error).message}): ` +
          'npm install @confluentinc/kafka-javascript',
      );
    }
  }
  return lib;
}

export type KafkaConfig = Record<string, string | number | boolean>;
