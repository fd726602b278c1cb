// Feeds a JSONL trace to the eddy-agent package's Local one event at a time, as an agent would,
// and prints the output events the guard returned, as eddy's JSON lines (tests/inproc.rs
// compares them with `eddy replay`).
//
//   node inproc_node.js FILE [--partitions N] [--config F] [--as-objects OUT]
//
// `--as-objects OUT`: hand each event to the guard as an object (so the package serialises it, as
// its Emitter would put it on the topic) and write those serialised events to OUT, for replay.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { Local } = require(path.join(__dirname, '..', 'clients', 'typescript'));

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : undefined;
};
const partitions = Number(opt('--partitions') ?? 1);
const config = opt('--config');
const asObjects = opt('--as-objects');
const [file] = args;

const eddy = new Local({ config, partitions });
const out = [];
const sent = [];
let skipped = 0;
for (const raw of fs.readFileSync(file, 'utf8').split('\n')) {
  const line = raw.trim();
  if (!line) continue;
  let lines;
  try {
    if (asObjects) {
      const event = JSON.parse(line);
      lines = eddy.observeEventJson(event);
      sent.push(JSON.stringify(event) + '\n');
    } else {
      lines = eddy.observeEventJson(line);
    }
  } catch {
    skipped += 1;
    continue;
  }
  for (const o of lines) out.push(o + '\n');
}
if (asObjects) fs.writeFileSync(asObjects, sent.join(''));
process.stdout.write(out.join(''));
console.error(`skipped ${skipped}, open ${eddy.openRuns}, ended ${eddy.endedRuns}`);
