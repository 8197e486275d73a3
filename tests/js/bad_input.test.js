// The bad-input table: each bad call fails with an MHAError (a rejection of a
// Promise-returning method, a throw of the others) naming the argument, what was
// expected and what was received; the same module then still runs a valid
// forward that matches PyTorch. On both WASM builds.
import { loadMHA } from '../../web/src/index.js';
import { errorTableSuite } from './helpers/error_table.js';
import { loadFixture, moduleConfig, stateDict } from './helpers/fixtures.js';

// (L, N, E) = (7, 2, 16), 2 heads, bool key_padding_mask (N, S).
const fixture = loadFixture('e16_h2_l7_bool_kpm.safetensors');
const input = (name) => {
  const t = fixture.tensors[`input.${name}`];
  return { data: t.data, shape: t.shape };
};
const query = input('query');
const key = input('key');
const value = input('value');
const keyPaddingMask = input('key_padding_mask');
const zeros = (shape) => ({ data: new Float32Array(shape.reduce((a, b) => a * b, 1)), shape });
const withEntry = (name, entry) => ({ ...stateDict(fixture), [name]: entry });
const withoutEntry = (name) => {
  const dict = stateDict(fixture);
  delete dict[name];
  return dict;
};

// [what, (ctx) => the bad call, patterns the message must contain]
const BAD_INPUTS = [
  ['query is a bare Float32Array', ({ mha }) => mha.forward(query.data, key, value),
    [/query: expected a tensor \{data, shape\} or \{data, dims\}, received a Float32Array/]],
  ['query data is a Float64Array',
    ({ mha }) => mha.forward({ data: new Float64Array(224), shape: [7, 2, 16] }, key, value),
    [/query\.data: expected a Float32Array, received a Float64Array of length 224/]],
  ['query data is a plain Array',
    ({ mha }) => mha.forward({ data: Array.from(query.data), shape: [7, 2, 16] }, key, value),
    [/query\.data: expected a Float32Array, received an Array of length 224/]],
  ['query data length does not match its shape',
    ({ mha }) => mha.forward({ data: new Float32Array(100), shape: [7, 2, 16] }, key, value),
    [/query: expected 224 elements for shape \(7, 2, 16\), received 100/]],
  ['zero dim', ({ mha }) => mha.forward(zeros([0, 2, 16]), key, value),
    [/query\.shape: expected a non-empty array of positive integers, received \[0, 2, 16\]/]],
  ['negative dim', ({ mha }) => mha.forward(query, { data: key.data, shape: [-7, 2, 16] }, value),
    [/key\.shape: expected .*positive integers, received \[-7, 2, 16\]/]],
  ['non-integer dim', ({ mha }) => mha.forward(query, key, { data: value.data, shape: [7, 2.5, 16] }),
    [/value\.shape: expected .*positive integers, received \[7, 2\.5, 16\]/]],
  ['shape is not an array', ({ mha }) => mha.forward({ data: query.data, shape: '7x2x16' }, key, value),
    [/query\.shape: expected a non-empty array of positive integers, received the string '7x2x16'/]],
  ['query of rank 4', ({ mha }) => mha.forward(zeros([7, 2, 16, 1]), key, value),
    [/query: expected a 3-D .* or 2-D .* tensor, got shape \(7, 2, 16, 1\)/]],
  ['query features differ from embedDim', ({ mha }) => mha.forward(zeros([7, 2, 15]), key, value),
    [/query: expected shape \(7, 2, 16\).*got \(7, 2, 15\)/]],
  ['value length differs from key length', ({ mha }) => mha.forward(query, key, zeros([6, 2, 16])),
    [/value: expected shape \(7, 2, 16\).*got \(6, 2, 16\)/]],
  ['keyPaddingMask of the wrong size',
    ({ mha }) => mha.forward(query, key, value,
      { keyPaddingMask: { data: new Uint8Array(6), shape: [2, 3] } }),
    [/key_padding_mask: expected shape \(2, 7\).*got \(2, 3\)/]],
  ['attnMask with the wrong number of heads',
    ({ mha }) => mha.forward(query, key, value, { attnMask: zeros([3, 7, 7]) }),
    [/attn_mask: expected shape \(7, 7\) or \(4, 7, 7\).*got \(3, 7, 7\)/]],
  ['mask of dtype int32',
    ({ mha }) => mha.forward(query, key, value,
      { keyPaddingMask: { data: new Int32Array(14), shape: [2, 7] } }),
    [/keyPaddingMask\.data: expected a Uint8Array \(bool\) or a Float32Array \(additive\), received an Int32Array/]],
  ['misspelt forward option', ({ mha }) => mha.forward(query, key, value, { needweights: false }),
    [/forward options: unknown option 'needweights', expected one of .*needWeights/]],
  ['needWeights not a boolean', ({ mha }) => mha.forward(query, key, value, { needWeights: 'no' }),
    [/needWeights: expected true or false, received the string 'no'/]],
  ['heads not dividing embedDim', ({ lib }) => lib.createMultiheadAttention({ embedDim: 10, numHeads: 3 }),
    [/num_heads: embed_dim \(10\) must be divisible by num_heads \(3\)/]],
  ['embedDim zero', ({ lib }) => lib.createMultiheadAttention({ embedDim: 0, numHeads: 2 }),
    [/embedDim: expected a positive integer, received number 0/]],
  ['embedDim not an integer', ({ lib }) => lib.createMultiheadAttention({ embedDim: 16.5, numHeads: 2 }),
    [/embedDim: expected a positive integer, received number 16\.5/]],
  ['numHeads missing', ({ lib }) => lib.createMultiheadAttention({ embedDim: 16 }),
    [/numHeads: expected a positive integer, received undefined/]],
  ['kdim negative', ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, kdim: -4 }),
    [/kdim: expected a positive integer, received number -4/]],
  ['config in PyTorch spelling', ({ lib }) => lib.createMultiheadAttention({ embed_dim: 16, num_heads: 2 }),
    [/createMultiheadAttention: unknown option 'embed_dim', expected one of embedDim/]],
  ['missing parameter', ({ mha }) => mha.loadStateDict(withoutEntry('out_proj.bias')),
    [/loadStateDict: .*missing parameters: out_proj\.bias/]],
  ['unexpected parameter', ({ mha }) => mha.loadStateDict(withEntry('bias_k', zeros([1, 1, 16]))),
    [/loadStateDict: .*bias_k.*expected .*in_proj_weight/]],
  ['unexpected parameter as a bare array',
    ({ mha }) => mha.loadStateDict(withEntry('bias_k', new Float32Array(16))),
    [/loadStateDict: .*unexpected parameter 'bias_k' for this configuration/]],
  ['parameter tensor of the wrong shape',
    ({ mha }) => mha.loadStateDict(withEntry('in_proj_weight', zeros([48, 15]))),
    [/in_proj_weight: expected shape \(48, 16\), got \(48, 15\)/]],
  ['parameter array of the wrong length',
    ({ mha }) => mha.loadStateDict(withEntry('out_proj.bias', new Float32Array(15))),
    [/out_proj\.bias: expected 16 elements for shape \(16\), received 15/]],
  ['parameter of the wrong type',
    ({ mha }) => mha.loadStateDict(withEntry('out_proj.bias', new Float64Array(16))),
    [/out_proj\.bias: expected a Float32Array or a tensor \{data, shape\} of shape \(16\), received a Float64Array/]],
  ['safetensors bytes that are not a safetensors file',
    ({ mha }) => mha.loadSafetensors(new Uint8Array(20)), [/loadSafetensors: /]],
  ['safetensors given as a string', ({ mha }) => mha.loadSafetensors('weights.safetensors'),
    [/bytes: expected a Uint8Array, an ArrayBuffer, a Blob, a Response or a ReadableStream, received the string 'weights\.safetensors'/]],
  ['forward on a disposed module', async ({ lib }) => {
    const other = lib.createMultiheadAttention(moduleConfig(fixture.config));
    other.dispose();
    await other.forward(query, key, value);
  }, [/forward: expected a live module, received one that was disposed/]],
  ['forward before parameters are loaded', ({ lib }) =>
    lib.createMultiheadAttention(moduleConfig(fixture.config)).forward(query, key, value),
    [/forward: parameters not loaded: in_proj_weight/]],
  ['sdpa value length differs from key length',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 6, 8])),
    [/value: expected shape \(2, 5, 8\).*got \(2, 6, 8\)/]],
  ['sdpa mask not broadcastable',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { attnMask: { data: new Uint8Array(36), shape: [6, 6] } }),
    [/attn_mask: expected a shape broadcastable to \(2, 7, 5\).*got \(6, 6\)/]],
  ['module softcap negative',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, softcap: -50 }),
    [/createMultiheadAttention: softcap: expected a positive finite number .*received number -50/]],
  ['module scale that is 0 as a float32 (it would become the default)',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, scale: 1e-46 }),
    [/^scale: 1e-46 is 0 as a float32 .*which would mean the default/]],
  ['module softcap that is 0 as a float32 (it would become none)',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, softcap: 1e-46 }),
    [/^softcap: 1e-46 is 0 as a float32 .*which would mean none/]],
  ['module scale not a number',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, scale: '0.1' }),
    [/scale: expected a number, received the string '0.1'/]],
  ['module window zero',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, window: 0 }),
    [/window: expected a positive integer W or \[left, right\] .*received number 0/]],
  ['module window of one side',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, window: [3] }),
    [/window: expected a positive integer W or \[left, right\] .*received an Array of length 1/]],
  ['module window with addZeroAttn',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, window: 4, addZeroAttn: true }),
    [/createMultiheadAttention: window: cannot be combined with add_bias_kv or add_zero_attn/]],
  ['sdpa window negative side',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { window: [-1, 2] }),
    [/window: expected a positive integer W or \[left, right\]/]],
  ['module sinks not a boolean',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, sinks: 1 }),
    [/sinks: expected true or false, received number 1/]],
  ['loading sinks the module was not created with', async ({ lib }) => {
    const other = lib.createMultiheadAttention({ embedDim: 4, numHeads: 2, bias: false });
    const w = { data: new Float32Array(16), shape: [4, 4] };
    try {
      await other.loadStateDict({ 'q.weight': w, 'k.weight': w, 'v.weight': w, 'out_proj.weight': w,
        sinks: { data: new Float32Array(2), shape: [2] } });
    } finally {
      other.dispose();
    }
  }, [/sinks: in the checkpoint, but the module was created without sinks/]],
  ['sdpa sinks not a Float32Array',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { sinks: [0.5] }),
    [/sinks: expected a Float32Array of one logit per query head, received an Array of length 1/]],
  ['sdpa sinks of another length',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { sinks: new Float32Array(3) }),
    [/sinks: expected shape \(1,\) \(one per query head\), got \(3,\)/]],
  ['module alibi slopes of another length',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2,
      alibi: { slopes: new Float32Array(3) } }),
    [/createMultiheadAttention: alibi.slopes: expected num_heads \(2\) finite slopes, got 3/]],
  ['module alibi slopes a plain Array',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, alibi: { slopes: [1, 2] } }),
    [/alibi.slopes: expected a Float32Array of numHeads slopes, received an Array of length 2/]],
  ['module alibi with addBiasKV',
    ({ lib }) => lib.createMultiheadAttention({ embedDim: 16, numHeads: 2, alibi: true, addBiasKV: true }),
    [/createMultiheadAttention: alibi: cannot be combined with add_bias_kv or add_zero_attn/]],
  ['sdpa alibiSlopes of another length',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { alibiSlopes: new Float32Array(2) }),
    [/alibi_slopes: expected shape \(1,\) \(one per query head\), got \(2,\)/]],
  ['sdpa softcap infinite',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { softcap: Infinity }),
    [/softcap: expected a positive finite number .*received number Infinity/]],
  ['sdpa scale infinite as a float32',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { scale: 1e39 }),
    [/scale: expected a finite number, received number 1e\+39/]],
  ['sdpa scale that is 0 as a float32 (it would become the default)',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { scale: 1e-46 }),
    [/scale: 1e-46 is 0 as a float32 .*or undefined for 1\/sqrt\(E\)/]],
  // The core's 0 is its default, which JS asks for with undefined (PyTorch's scale=0 is another call).
  ['sdpa scale 0',
    ({ lib }) => lib.scaledDotProductAttention(zeros([2, 7, 8]), zeros([2, 5, 8]), zeros([2, 5, 8]),
      { scale: 0 }),
    [/scale: expected a nonzero finite number \(or undefined for 1\/sqrt\(E\)\), received number 0/]],
  ['weights too large for the 4 GiB heap',
    ({ mha }) => mha.forward(zeros([40000, 2, 16]), zeros([40000, 2, 16]), zeros([40000, 2, 16])),
    [/forward: out of memory for query \(40000, 2, 16\)/]],
  ['loadMHA with zero threads', () => loadMHA({ threads: 0 }),
    [/threads: expected 'auto' or a positive integer, received number 0/]],
  ['loadMHA with an unknown build', () => loadMHA({ build: 'gpu' }),
    [/build: expected one of 'relaxed-simd-threaded', 'simd-threaded', 'simd', received the string 'gpu'/]],
];

errorTableSuite('bad input', fixture, BAD_INPUTS);
