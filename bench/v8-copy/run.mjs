// The price of a wasm `memory.copy` in V8 (Node's, which is not Envoy's build of it but
// carries the instruction out the same way: a call into C). Run from the repository:
//   node bench/v8-copy/run.mjs
// It assembles copy.wat with binaryen's wasm-as (as `make wasm-opt` installs), then times
// each way of copying over many turns, five times, and prints the median ns per copy
// with the empty loop's taken off.
import { execFileSync } from 'node:child_process';
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(mkdtempSync(join(tmpdir(), 'v8-copy-')), 'copy.wasm');
execFileSync('wasm-as', ['--enable-bulk-memory', join(here, 'copy.wat'), '-o', out]);
const { instance } = await WebAssembly.instantiate(readFileSync(out));
const f = instance.exports;
const turns = 2_000_000;
const ns = (fn, len) => {
  const start = process.hrtime.bigint();
  fn(turns, len);
  return Number(process.hrtime.bigint() - start) / turns;
};
const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ways = [
  ['memory.copy, 16 bytes', f.bulk, 16],
  ['memory.copy, 64 bytes', f.bulk, 64],
  ['memory.copy, 336 bytes', f.bulk, 336],
  ['memory.copy, 336 bytes (constant length)', f.bulk336, 336],
  ['i64 loads and stores, 16 bytes', f.words, 16],
  ['i64 loads and stores, 64 bytes', f.words, 64],
  ['i64 loads and stores, 336 bytes', f.words, 336],
];
ns(f.empty, 0); // warm up the compiler tiers
const rounds = 5;
const floor = median(Array.from({ length: rounds }, () => ns(f.empty, 0)));
console.log(`V8 ${process.versions.v8}, ${turns} turns, median of ${rounds} runs, the loop's own ${floor.toFixed(1)} ns taken off`);
for (const [name, fn, len] of ways) {
  ns(fn, len);
  const each = median(Array.from({ length: rounds }, () => ns(fn, len))) - floor;
  console.log(`${name}: ${each.toFixed(1)} ns`);
}
