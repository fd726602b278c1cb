#!/usr/bin/env node
// `npx eddy-agent replay FILE`: what `eddy replay FILE` prints, from the package's engine. For
// checking a trace in a project's own CI without the eddy binary: the output events on stdout,
// one JSON line each, skipped lines and the closing count on stderr.
import { addon } from './native';

const USAGE = `usage: eddy-agent replay FILE [--config F] [--partitions N] [--summary]

Run eddy's detectors over JSONL v1 events (FILE or - for stdin); print output events.
  --config F       TOML config file, as for eddy (also EDDY_CONFIG)
  --partitions N   hash runs to this many partitions, as the producer does (default 1)
  --summary        print a per-run summary table on stderr`;

function main(argv: string[]): number {
  const [cmd, ...rest] = argv;
  if (cmd === '-h' || cmd === '--help') {
    console.log(USAGE);
    return 0;
  }
  if (cmd !== 'replay') {
    console.error(USAGE);
    return 2;
  }
  let file: string | undefined;
  let config = process.env.EDDY_CONFIG || undefined;
  let partitions = 1;
  let summary = false;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    const value = (): string => {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : rest[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--summary') summary = true;
    else if (a === '--config' || a.startsWith('--config=')) config = value();
    else if (a === '--partitions' || a.startsWith('--partitions=')) partitions = Number(value());
    else if (a.startsWith('--') && a !== '--') throw new Error(`unknown option ${a}`);
    else if (file === undefined) file = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (file === undefined) {
    console.error(USAGE);
    return 2;
  }
  if (!Number.isInteger(partitions) || partitions < 1) throw new Error('--partitions takes a whole number >= 1');
  addon.replayToStdout(file, config ?? null, partitions, summary);
  return 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  console.error(`Error: ${(e as Error).message}`);
  process.exitCode = 1;
}
