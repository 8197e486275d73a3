// Tensors from the neighbours (issue 35 item 9): onnxruntime-web's Tensor ({data, dims}, data a
// getter of its class; transformers.js's Tensor has the same face) wherever {data, shape} is
// taken: forward's inputs and masks, scaledDotProductAttention's, state_dict entries; the results
// as theirs again. Each gives the very bits of the same call with {data, shape}. Through the proxy:
// the contract table's {data, dims} rows (tests/e2e/contract.test.mjs).
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { Tensor } from 'onnxruntime-web';
import { loadMHA } from '../../web/src/index.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

const ort = ({ data, shape }) => new Tensor(data instanceof Uint8Array ? 'bool' : 'float32', data, shape);
const CONFIG = { embedDim: 16, numHeads: 4, numKVHeads: 2, batchFirst: true };

let lib;
before(async () => {
  lib = await loadMHA();
});

test('forward: query, key, value and masks as onnxruntime Tensors', async () => {
  const mha = randomModule(lib, CONFIG, 1);
  const [q, k] = [randomTensor([2, 5, 16], 2), randomTensor([2, 6, 16], 3)];
  const keyPaddingMask = { data: Uint8Array.of(0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1), shape: [2, 6] };
  const attnMask = randomTensor([5, 6], 4);
  const expected = await mha.forward(q, k, k, { keyPaddingMask, attnMask });
  const got = await mha.forward(ort(q), ort(k), ort(k), { keyPaddingMask: ort(keyPaddingMask), attnMask: ort(attnMask) });
  assert.ok(sameBits(got, expected));
  // A result made an onnxruntime Tensor is an input again.
  const again = await mha.forward(ort(got.output), ort(k), ort(k));
  assert.ok(sameBits(again, await mha.forward(expected.output, k, k)));
  mha.dispose();
});

test('loadStateDict: onnxruntime Tensors as entries', async () => {
  const reference = randomModule(lib, CONFIG, 5);
  const mha = lib.createMultiheadAttention(CONFIG);
  await mha.loadStateDict(Object.fromEntries(mha.parameters.map(({ name, shape }, i) =>
    [name, ort(randomTensor(shape, 500 + i))])));
  const x = randomTensor([1, 3, 16], 6);
  assert.ok(sameBits(await mha.forward(x, x, x), await reference.forward(x, x, x)));
  mha.dispose();
  reference.dispose();
});

test('scaledDotProductAttention: onnxruntime Tensors', async () => {
  const [q, k, v] = [randomTensor([1, 2, 3, 4], 7), randomTensor([1, 2, 5, 4], 8), randomTensor([1, 2, 5, 4], 9)];
  const attnMask = { data: Uint8Array.of(1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1), shape: [3, 5] };
  const expected = await lib.scaledDotProductAttention(q, k, v, { attnMask });
  const got = await lib.scaledDotProductAttention(ort(q), ort(k), ort(v), { attnMask: ort(attnMask) });
  assert.ok(sameBits({ output: got }, { output: expected }));
});
