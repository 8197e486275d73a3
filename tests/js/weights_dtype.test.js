// weightsDtype in WebAssembly (docs/design.md, "Precision"): with weights every
// type holds exactly (q / 128, a 127 in each row: int8's scale is then 1/128
// exactly), float16 and bfloat16 weights give float32's outputs bit for bit,
// one-shot (the register tiles) and decoding steps of 1 and 2 rows (the GEMV
// kernels), and int8 ones within INT8_EXACT_WEIGHTS (its GEMV quantizes the
// rows to 16 bits); 'auto' keeps F16/BF16 safetensors 16-bit; mha.memory is
// the weights' bytes, which a cross-attention call does not grow; an unknown dtype is an MHAError naming it. On every build.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { randomTensor, sameBits } from './helpers/random.js';
import { writeSafetensors } from './helpers/safetensors.js';

const CONFIG = { embedDim: 64, numHeads: 4, numKVHeads: 2, rotary: {} };
const E = 64;
// int8 with weights it holds exactly: only the rows' 16-bit quantization
// (a relative 2^-16 of a block's largest |x|) separates it from float32, by
// at most this share of a call's largest |output|.
const INT8_EXACT_WEIGHTS = 1e-4;

function exactWeights(lib) {
  const specs = lib.createMultiheadAttention(CONFIG).parameters;
  const stateDict = {};
  specs.forEach(({ name, shape }, i) => {
    const { data } = randomTensor(shape, 50 + i);
    if (shape.length === 2) {
      data.forEach((x, j) => { data[j] = j % shape[1] === 0 ? 127 / 128 : Math.round(x * 127) / 128; });
    }
    stateDict[name] = data;
  });
  return { specs, stateDict };
}

// Every output of one-shot calls and of a decoding schedule.
async function outputs(mha) {
  const x = randomTensor([9, 2, E], 1);
  const results = [];
  for (const needWeights of [false, true]) {
    results.push(await mha.forward(x, x, x, { needWeights, isCausal: true }));
  }
  const cache = mha.createKVCache({ batchSize: 2, maxLength: 16 });
  results.push(await mha.forward(x, x, x, { cache, isCausal: true, needWeights: false }));
  for (const rows of [1, 2, 1]) {
    const t = randomTensor([rows, 2, E], 20 + rows);
    results.push(await mha.forward(t, t, t, { cache, needWeights: false }));
  }
  cache.dispose();
  return results;
}

// A .safetensors file: 2-D tensors as `dtype` (F16 or BF16 of values they
// hold exactly), the rest F32.
function safetensors(specs, stateDict, dtype) {
  const tensors = {};
  for (const { name, shape } of specs) {
    const f32 = stateDict[name];
    if (shape.length !== 2) {
      tensors[name] = { shape, data: f32 };
      continue;
    }
    const bits = new Uint16Array(f32.length);
    const u32 = new Uint32Array(f32.buffer, f32.byteOffset, f32.length);
    f32.forEach((x, i) => {
      if (dtype === 'BF16') {
        bits[i] = u32[i] >>> 16;
      } else {
        // Normal halves only: q / 128 with |q| <= 127, q != 0, or zero.
        const sign = x < 0 ? 0x8000 : 0;
        const a = Math.abs(x);
        if (a === 0) { bits[i] = sign; return; }
        const e = Math.floor(Math.log2(a));
        bits[i] = sign | ((e + 15) << 10) | Math.round((a / 2 ** e - 1) * 1024);
      }
    });
    tensors[name] = { shape, dtype, bytes: new Uint8Array(bits.buffer) };
  }
  return writeSafetensors(tensors);
}

for (const build of BUILDS) {
  describe(`weightsDtype on ${build}`, () => {
    let lib;
    let weights;
    let expected;
    let f32Memory;
    before(async () => {
      lib = await loadMHA({ build });
      weights = exactWeights(lib);
      const mha = lib.createMultiheadAttention({ ...CONFIG, weightsDtype: 'float32' });
      assert.equal(mha.memory, 0);
      await mha.loadStateDict(weights.stateDict);
      f32Memory = mha.memory;
      expected = await outputs(mha);
      mha.dispose();
    });

    test('float16 and bfloat16 weights: float32 bits; int8 near them; in their bytes', async () => {
      // Each weight in its bytes, plus a float32 bias (and int8's scale) per output channel.
      const matrices = weights.specs.filter((s) => s.shape.length === 2);
      const count = matrices.reduce((n, s) => n + s.shape[0] * s.shape[1], 0);
      const channels = matrices.reduce((n, s) => n + s.shape[0], 0);
      assert.equal(f32Memory, 4 * count + 4 * channels);
      for (const [weightsDtype, bytes] of [['float16', 2], ['bfloat16', 2], ['int8', 1]]) {
        const mha = lib.createMultiheadAttention({ ...CONFIG, weightsDtype });
        await mha.loadStateDict(weights.stateDict);
        const got = await outputs(mha);
        got.forEach((r, i) => {
          if (weightsDtype !== 'int8') {
            assert.ok(sameBits(r, expected[i]), `${weightsDtype}: call ${i}`);
            return;
          }
          const want = expected[i].output.data;
          const error = r.output.data.reduce((m, x, j) => Math.max(m, Math.abs(x - want[j])), 0);
          const largest = want.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
          assert.ok(error <= INT8_EXACT_WEIGHTS * largest, `int8: call ${i}: max |error| ${error} of ${largest}`);
        });
        assert.equal(mha.memory, bytes * count + (weightsDtype === 'int8' ? 8 : 4) * channels, weightsDtype);
        mha.dispose();
      }
    });

    test("'auto' keeps F16 and BF16 checkpoints in 16 bits", async () => {
      for (const dtype of ['F16', 'BF16']) {
        const mha = lib.createMultiheadAttention(CONFIG);
        await mha.loadSafetensors(safetensors(weights.specs, weights.stateDict, dtype));
        assert.ok(mha.memory < 0.56 * f32Memory, `${dtype}: ${mha.memory} of ${f32Memory}`);
        const got = await outputs(mha);
        got.forEach((r, i) => assert.ok(sameBits(r, expected[i]), `${dtype}: call ${i}`));
        mha.dispose();
      }
    });

    test('a cross-attention call on fused weights copies none of them: mha.memory stays', async () => {
      for (const weightsDtype of ['float32', 'float16', 'bfloat16', 'int8']) {
        const mha = lib.createMultiheadAttention({ embedDim: E, numHeads: 4, weightsDtype });
        const stateDict = {};
        mha.parameters.forEach(({ name, shape }, i) => { stateDict[name] = randomTensor(shape, 70 + i).data; });
        await mha.loadStateDict(stateDict);
        const loaded = mha.memory;
        const x = randomTensor([3, E], 5);
        const y = randomTensor([7, E], 6);
        await mha.forward(x, y, y, { needWeights: false });
        assert.equal(mha.memory, loaded, weightsDtype);
        mha.dispose();
      }
    });

    test('an unknown weightsDtype is an MHAError naming it', () => {
      for (const weightsDtype of ['fp8', 'float64', 16, null]) {
        assert.throws(() => lib.createMultiheadAttention({ ...CONFIG, weightsDtype }),
          (e) => e instanceof MHAError && /^weightsDtype: expected 'auto', 'float32', 'float16', 'bfloat16' or 'int8', received/.test(e.message));
      }
    });
  });
}
