// scripts/wasm_function_sizes.mjs, the build's check that no kernel-path
// function is too large for the engines' best compilers: on modules made here
// with functions of chosen sizes and names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MAX_BODY_BYTES, functionSizes } from '../../scripts/wasm_function_sizes.mjs';

const SCRIPT = new URL('../../scripts/wasm_function_sizes.mjs', import.meta.url).pathname;

function leb(value) {
  const out = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value) byte |= 0x80;
    out.push(byte);
  } while (value);
  return out;
}

const section = (id, payload) => [id, ...leb(payload.length), ...payload];

// A module importing one function and defining functions of `sizes` body
// bytes (nops), () -> () each.
function moduleOf(sizes) {
  const type = section(1, [1, 0x60, 0, 0]);
  const name = (s) => [...leb(s.length), ...Buffer.from(s)];
  const imports = section(2, [1, ...name('env'), ...name('f'), 0, 0]);
  const functions = section(3, [...leb(sizes.length), ...sizes.map(() => 0)]);
  const bodies = sizes.flatMap((size) => {
    const body = [0, ...new Array(size - 2).fill(0x01), 0x0b];  // no locals, nops, end
    return [...leb(body.length), ...body];
  });
  const code = section(10, [...leb(sizes.length), ...bodies]);
  return Uint8Array.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, ...type, ...imports, ...functions, ...code]);
}

function run(sizes, names) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasm-sizes-'));
  try {
    fs.writeFileSync(path.join(dir, 'in.wasm'), moduleOf(sizes));
    // Emscripten's symbol map: indexes count the import first; '(' escaped as \28.
    fs.writeFileSync(path.join(dir, 'in.symbols'),
      ['0:f', ...names.map((n, i) => `${i + 1}:${n.replace(/\(/g, '\\28')}`)].join('\n'));
    const result = spawnSync(process.execPath, [SCRIPT, path.join(dir, 'in.wasm'), path.join(dir, 'out.wasm'),
      path.join(dir, 'in.symbols')], { encoding: 'utf8' });
    const out = path.join(dir, 'out.wasm');
    return { ...result, out: fs.existsSync(out) ? fs.readFileSync(out) : null };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('a kernel-path function above the limit fails the build, named with its size', () => {
  const big = MAX_BODY_BYTES + 1000;
  const r = run([100, big, big], ['mha::kernels::Attention(x)', 'mha::kernels::GemmTile(a)', 'mha::PlanParameters(p)']);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`${big} bytes  mha::kernels::GemmTile\\(a\\)`));
  assert.doesNotMatch(r.stderr, /PlanParameters/);  // load-time code may be large
  assert.equal(r.out, null);
});

test('Highway per-target namespaces are kernel paths too', () => {
  const r = run([MAX_BODY_BYTES + 10], ['mha::N_WASM::GemmTileRows<4ul, float>(a)']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /mha::N_WASM::GemmTileRows/);
});

test('under the limit: passes and writes the module as it was, without names', () => {
  const input = moduleOf([100, MAX_BODY_BYTES - 10]);
  const r = run([100, MAX_BODY_BYTES - 10], ['mha::kernels::A(x)', 'mha::kernels::B(y)']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /mha::kernels::B \d+/);
  assert.deepEqual(new Uint8Array(r.out), input);
});

test('names kept through a name section, sizes read back', () => {
  const { withNames } = functionSizes(moduleOf([50, 70]), new Map([[1, 'a'], [2, 'b']]));
  const again = functionSizes(withNames());
  assert.deepEqual(again.functions.map((f) => [f.name, f.bytes]), [['b', 70], ['a', 50]]);
  assert.deepEqual(again.withoutNames, moduleOf([50, 70]));
});
