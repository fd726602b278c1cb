#!/usr/bin/env node
// Builds the native addon (native/, eddy's engine crate behind napi-rs) with cargo and puts it
// where the package loads it: eddy-agent.linux-x64-gnu.node. Needs Rust (https://rustup.rs).
//
//   node scripts/build-native.js              release build (what users run)
//   EDDY_NATIVE_PROFILE=quick node ...        optimised without LTO (scripts/bootstrap, tests)
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const profile = process.env.EDDY_NATIVE_PROFILE || 'release';
const target = path.join(root, 'eddy-agent.linux-x64-gnu.node');

const cargo = spawnSync(
  'cargo',
  ['build', '--locked', '--profile', profile, '--manifest-path', path.join(root, 'native', 'Cargo.toml'),
    '--message-format=json-render-diagnostics'],
  { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 28 },
);
if (cargo.error) {
  console.error(`build-native: cannot run cargo (${cargo.error.message}): install Rust from https://rustup.rs`);
  process.exit(1);
}
if (cargo.status !== 0) {
  process.exit(cargo.status ?? 1);
}
let built = null;
for (const line of cargo.stdout.toString().split('\n')) {
  if (!line.startsWith('{')) continue;
  const msg = JSON.parse(line);
  if (msg.reason === 'compiler-artifact' && msg.target.name === 'eddy_agent_node' &&
      msg.target.kind.includes('cdylib')) {
    built = msg.filenames.find((f) => f.endsWith('.so') || f.endsWith('.dylib') || f.endsWith('.dll'));
  }
}
if (!built) {
  console.error('build-native: cargo built no eddy_agent_node library');
  process.exit(1);
}
// Copied to a temporary name, then renamed: a running process that loaded the old addon keeps it.
fs.copyFileSync(built, `${target}.tmp`);
fs.renameSync(`${target}.tmp`, target);
console.error(`build-native: ${path.relative(process.cwd(), target)} (${profile})`);
