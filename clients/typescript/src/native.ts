// The native addon (native/, eddy's engine crate behind napi-rs), built by
// scripts/build-native.js next to package.json.
import path from 'node:path';

export interface NativeEngine {
  observe(event: string): string[];
  readonly partitions: number;
  readonly openRuns: number;
  readonly endedRuns: number;
}

export interface ReplayStats {
  lines: number;
  events: number;
  malformed: number;
  outputs: number;
}

interface Addon {
  Engine: new (config?: string | null, toml?: string | null, partitions?: number | null) => NativeEngine;
  replayToStdout(file: string, config?: string | null, partitions?: number | null, summary?: boolean | null): ReplayStats;
  replay(file: string, config?: string | null, partitions?: number | null): string[];
}

const file = path.join(__dirname, '..', '..', `eddy-agent.${process.platform}-${process.arch}-gnu.node`);

function load(): Addon {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(file) as Addon;
  } catch (e) {
    throw new Error(
      `eddy-agent: cannot load its native addon ${file} (${(e as Error).message}); ` +
        'build it with `npm run build` in the package (needs Rust: https://rustup.rs)',
    );
  }
}

export const addon: Addon = load();
