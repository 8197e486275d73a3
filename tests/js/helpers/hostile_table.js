// The hostile-input table (see tests/js/hostile.test.js), shared by the
// in-thread suite (Node) and the proxy's (Chromium, tests/e2e/proxy.test.mjs):
// no Node modules here. The RESULTS checks use the assertions given, where
// they run (Node).
import { moduleConfig } from './fixture_data.js';

export const HOSTILE_FIXTURE = 'e16_h2_l7_bool_kpm.safetensors';

// fixture: HOSTILE_FIXTURE loaded; returns { errors, results } for errorTableSuite.
export function hostileTable(fixture, { assert, assertClose, assertMatchesFixture } = {}) {
  // (L, N, E) = (7, 2, 16), S = 7, 2 heads, bool key_padding_mask (N, S) that
  // masks keys 5 (n = 0) and 2, 4, 5, 6 (n = 1).
  const tensor = (name) => {
    const t = fixture.tensors[name];
    return { data: t.data, shape: t.shape };
  };
  const input = (name) => tensor(`input.${name}`);
  const query = input('query');
  const key = input('key');
  const value = input('value');
  const keyPaddingMask = input('key_padding_mask');
  const expected = { output: tensor('expected.output'), weights: tensor('expected.weights') };
  const E = 16;

  const copy = (t) => ({ data: t.data.slice(), shape: [...t.shape] });
  const detached = (t) => {
    const c = copy(t);
    structuredClone(c.data.buffer, { transfer: [c.data.buffer] });
    return c;
  };
  const withShape = (t, shape) => ({ data: t.data, shape });
  const withData = (t, data) => ({ data, shape: t.shape });
  const zeros = (shape) => ({ data: new Float32Array(shape.reduce((a, b) => a * b, 1)), shape });
  // `t`'s values in a view at `byteOffset` (a multiple of the element size) of
  // a larger buffer (or SharedArrayBuffer).
  const inBuffer = (t, byteOffset, Buffer = ArrayBuffer) => {
    const Type = t.data.constructor;
    const buffer = new Buffer(byteOffset + t.data.byteLength + 64);
    const view = new Type(buffer, byteOffset, t.data.length);
    view.set(t.data);
    return { data: view, shape: t.shape };
  };
  // A tensor whose shape getter answers validation (its first read) honestly, then lies.
  const lyingShape = (t, lie) => {
    let reads = 0;
    return { data: t.data, get shape() { return ++reads > 1 ? lie : t.shape; } };
  };
  // key_padding_mask as a float mask: 0 or -inf.
  const floatMask = (mask) => ({ data: Float32Array.from(mask.data, (m) => (m ? -Infinity : 0)), shape: mask.shape });

  // [what, (ctx) => the bad call, patterns the MHAError message must contain]
  const ERRORS = [
    // Wrong types.
    ['query null', ({ mha }) => mha.forward(null, key, value), [/query: expected a tensor \{data, shape\} or \{data, dims\}, received null/]],
    ['query a number', ({ mha }) => mha.forward(3, key, value), [/query: expected a tensor .*received number 3/]],
    ['query a Promise of a tensor', ({ mha }) => mha.forward(Promise.resolve(query), key, value),
      [/query: expected a tensor \{data, shape\}/]],
    ['query data a DataView', ({ mha }) => mha.forward(withData(query, new DataView(query.data.buffer)), key, value),
      [/query\.data: expected a Float32Array, received a DataView/]],
    ['query data a Float64Array', ({ mha }) => mha.forward(withData(query, Float64Array.from(query.data)), key, value),
      [/query\.data: expected a Float32Array, received a Float64Array/]],
    ['options a string', ({ mha }) => mha.forward(query, key, value, 'causal'),
      [/forward options: expected an options object, received the string 'causal'/]],
    ['isCausal a number', ({ mha }) => mha.forward(query, key, value, { isCausal: 1 }),
      [/isCausal: expected true or false, received number 1/]],
    ['embedDim NaN', ({ lib }) => lib.createMultiheadAttention({ embedDim: NaN, numHeads: 2 }),
      [/embedDim: expected a positive integer, received number NaN/]],
    ['embedDim a string', ({ lib }) => lib.createMultiheadAttention({ embedDim: '16', numHeads: 2 }),
      [/embedDim: expected a positive integer, received the string '16'/]],
    ['createMultiheadAttention(null)', ({ lib }) => lib.createMultiheadAttention(null),
      [/createMultiheadAttention: expected an options object, received null/]],
    // Detached buffers.
    ['query buffer detached', ({ mha }) => mha.forward(detached(query), key, value),
      [/query: expected 224 elements for shape \(7, 2, 16\), received 0/]],
    ['mask buffer detached', ({ mha }) => mha.forward(query, key, value, { keyPaddingMask: detached(keyPaddingMask) }),
      [/keyPaddingMask: expected 14 elements for shape \(2, 7\), received 0/]],
    ['safetensors buffer detached', ({ mha }) => {
      const bytes = fixture.bytes.slice();
      structuredClone(bytes.buffer, { transfer: [bytes.buffer] });
      return mha.loadSafetensors(bytes, { prefix: 'param.' });
    }, [/detached|safetensors/]],
    // Shapes.
    ['NaN dim', ({ mha }) => mha.forward(withShape(query, [NaN, 2, 16]), key, value),
      [/query\.shape: expected a non-empty array of positive integers, received \[NaN, 2, 16\]/]],
    ['Infinity dim', ({ mha }) => mha.forward(withShape(query, [Infinity, 2, 16]), key, value),
      [/query\.shape: .*received \[Infinity, 2, 16\]/]],
    ['dim beyond 2^53', ({ mha }) => mha.forward(withShape(query, [2 ** 60, 2, 16]), key, value),
      [/query\.shape: .*positive integers, received \[1152921504606847000, 2, 16\]/]],
    ['huge dims with too little data', ({ mha }) => mha.forward(withShape(query, [2 ** 31, 2 ** 20, 16]), key, value),
      [/query: expected 36028797018963970 elements for shape \(2147483648, 1048576, 16\), received 224/]],
    ['-0 dim', ({ mha }) => mha.forward(query, withShape(key, [-0, 2, 16]), value), [/key\.shape: .*positive integers/]],
    ['BigInt dim', ({ mha }) => mha.forward(withShape(query, [7n, 2, 16]), key, value), [/query\.shape: .*received \[7, 2, 16\]/]],
    ['string dim', ({ mha }) => mha.forward(withShape(query, ['7', 2, 16]), key, value), [/query\.shape: .*received \[7, 2, 16\]/]],
    ['empty shape', ({ mha }) => mha.forward(withShape(query, []), key, value), [/query\.shape: .*received \[\]/]],
    ['shape an Int32Array', ({ mha }) => mha.forward(withShape(query, Int32Array.of(7, 2, 16)), key, value),
      [/query\.shape: .*received an Int32Array of length 3/]],
    ['mask shape fractional', ({ mha }) => mha.forward(query, key, value, { attnMask: withShape(zeros([49]), [7.5, 6.5333333333333335]) }),
      [/attnMask\.shape: .*received \[7\.5, 6\.53/]],
    // Masks of the wrong dtype.
    ...[Int8Array, Uint8ClampedArray, Uint16Array, Float64Array, BigInt64Array].map((Type) => [
      `mask of ${Type.name}`, ({ mha }) => mha.forward(query, key, value,
        { keyPaddingMask: { data: new Type(14), shape: [2, 7] } }),
      [new RegExp(`keyPaddingMask\\.data: expected a Uint8Array \\(bool\\) or a Float32Array \\(additive\\), received an? ${Type.name}`)]]),
    ['mask an Array of booleans', ({ mha }) => mha.forward(query, key, value,
      { keyPaddingMask: { data: Array.from(keyPaddingMask.data, Boolean), shape: [2, 7] } }),
    [/keyPaddingMask\.data: expected a Uint8Array .*received an Array of length 14/]],
    // Getters that change their answer between validation and the copy.
    // In-thread the copy into the heap sees the lie; through the proxy the worker's checks do.
    ['shape getter that grows after validation', ({ mha }) => mha.forward(lyingShape(query, [70000, 2, 16]), key, value),
      [/data: expected 8960000 bytes, received 896|query: expected 2240000 elements for shape \(70000, 2, 16\), received 224/]],
    ['shape getter that turns NaN after validation', ({ mha }) => mha.forward(lyingShape(query, [NaN, 2, 16]), key, value),
      [/shape: .*received \[NaN, 2, 16\]/]],
    ['option getter that detaches the query buffer', ({ mha }) => {
      const q = copy(query);
      // Detaches on its first read (the proxy reads options twice: to check, to send).
      const detach = () => q.data.length && structuredClone(q.data.buffer, { transfer: [q.data.buffer] });
      const options = { get needWeights() { detach(); return true; } };
      return mha.forward(q, key, value, options);
    }, [/data: expected a live ArrayBuffer, received a detached one|data: expected 896 bytes, received 0/]],
    ['option getter that disposes the module', ({ lib }) => {
      const other = lib.createMultiheadAttention(moduleConfig(fixture.config));
      other.loadSafetensors(fixture.bytes, { prefix: 'param.' });
      return other.forward(query, key, value, { get needWeights() { other.dispose(); return true; } });
    }, [/forward: expected a live module, received one that was disposed/]],
    // More than the 4 GiB heap holds.
    ['per-head weights beyond the heap', ({ mha }) => mha.forward(zeros([40000, 2, 16]), zeros([40000, 2, 16]),
      zeros([40000, 2, 16]), { averageAttnWeights: false }), [/forward: out of memory for query \(40000, 2, 16\)/]],
    // Sizes that wrap around 32 bits (size_t in WebAssembly) must not become small buffers.
    ['per-head weights of 2^32 + 9266 floats', ({ mha }) => {
      const L = 46341;   // N * H * L * S = 2 * 46341^2 = 2^32 + 9266
      return mha.forward(zeros([L, 1, 16]), zeros([L, 1, 16]), zeros([L, 1, 16]), { averageAttnWeights: false });
    }, [/forward: out of memory for query \(46341, 1, 16\).*address space/]],
    ['sdpa output of 2^32 + 65536 floats', ({ lib }) =>
      lib.scaledDotProductAttention(zeros([1, 65536, 1]), zeros([1, 1, 1]), zeros([1, 1, 65537])),
    [/scaledDotProductAttention: out of memory for query \(1, 65536, 1\).*address space/]],
    // Keys and values of 3 GiB each: either fits in 32 bits, together they wrap.
    ['cache storage of 2^32 + 2^31 bytes', ({ lib }) =>
      lib.createKVCache({ batchSize: 1, numKVHeads: 1, headDim: 2 ** 14, maxLength: 3 * 2 ** 14 }),
    [/createKVCache: cache: out of memory for batch_size 1 and max_length 49152: .*address space/]],
    // Through the proxy the module is made in the worker: its first call reports it.
    ['parameters beyond the heap', ({ lib }) => lib.createMultiheadAttention({ embedDim: 40000, numHeads: 8 }).loadStateDict({}),
      [/createMultiheadAttention: .*memory/]],
    ['safetensors header length 2^64 - 1', ({ mha }) => {
      const bytes = new Uint8Array(64).fill(0x20);
      bytes.fill(0xff, 0, 8);
      return mha.loadSafetensors(bytes);
    }, [/loadSafetensors: /]],
    ['safetensors truncated', ({ mha }) => mha.loadSafetensors(fixture.bytes.subarray(0, fixture.bytes.length - 3), { prefix: 'param.' }),
      [/loadSafetensors: /]],
  ];

  // Rows (l, n) of an (L, N, E) output that must be NaN, the rest must match
  // PyTorch's output for the unmodified inputs. Checked against PyTorch 1.13.
  function assertNanRows(output, nanRows) {
    const isNanRow = (l, n) => nanRows.some(([rl, rn]) => rl === l && rn === n);
    const rest = { data: output.data.slice(), shape: output.shape };
    const want = { data: expected.output.data.slice(), shape: expected.output.shape };
    for (let l = 0; l < 7; ++l) {
      for (let n = 0; n < 2; ++n) {
        const row = (l * 2 + n) * E;
        const values = output.data.subarray(row, row + E);
        if (isNanRow(l, n)) {
          assert.ok(values.every(Number.isNaN), `row (${l}, ${n}) should be NaN: ${values}`);
          rest.data.fill(0, row, row + E);
          want.data.fill(0, row, row + E);
        }
      }
    }
    assertClose(rest, want, 'rows without NaN');
  }

  const withValue = (t, index, x) => {
    const c = copy(t);
    c.data[index] = x;
    return c;
  };
  const at = (l, n, e) => (l * 2 + n) * E + e;

  // [what, (ctx) => Promise of the result, check(result)]
  const RESULTS = [
    ['NaN in a query row gives that row NaN', ({ mha }) => mha.forward(withValue(query, at(3, 1, 5), NaN), key, value, { keyPaddingMask }),
      (r) => {
        assertNanRows(r.output, [[3, 1]]);
        assert.ok(r.weights.data.subarray((1 * 7 + 3) * 7, (1 * 7 + 4) * 7).every(Number.isNaN), 'weights row NaN');
      }],
    ['Infinity in a query row gives that row NaN', ({ mha }) => mha.forward(withValue(query, at(5, 0, 0), Infinity), key, value, { keyPaddingMask }),
      (r) => assertNanRows(r.output, [[5, 0]])],
    ['Infinity in an attended key gives its batch NaN', ({ mha }) => mha.forward(query, withValue(key, at(0, 0, 0), Infinity), value, { keyPaddingMask }),
      (r) => assertNanRows(r.output, [0, 1, 2, 3, 4, 5, 6].map((l) => [l, 0]))],
    ['Infinity in an attended value gives its batch NaN', ({ mha }) => mha.forward(query, key, withValue(value, at(0, 0, 0), Infinity), { keyPaddingMask }),
      (r) => assertNanRows(r.output, [0, 1, 2, 3, 4, 5, 6].map((l) => [l, 0]))],
    ['+Infinity in a float attnMask gives that query row NaN', ({ mha }) => {
      const attnMask = zeros([7, 7]);
      attnMask.data[2 * 7 + 3] = Infinity;   // key 3 is attended in both batches
      return mha.forward(query, key, value, { keyPaddingMask, attnMask });
    }, (r) => assertNanRows(r.output, [[2, 0], [2, 1]])],
    ['-Infinity float keyPaddingMask equals the bool one', ({ mha }) =>
      mha.forward(query, key, value, { keyPaddingMask: floatMask(keyPaddingMask) }), (r) => assertMatchesFixture(r, fixture)],
    ['views at byte offsets 4, 12 and 3 (mask) of larger buffers', ({ mha }) =>
      mha.forward(inBuffer(query, 4), inBuffer(key, 12), inBuffer(value, 8), { keyPaddingMask: inBuffer(keyPaddingMask, 3) }),
    (r) => assertMatchesFixture(r, fixture)],
    ['SharedArrayBuffer-backed tensors and mask', ({ mha }) =>
      mha.forward(inBuffer(query, 0, SharedArrayBuffer), inBuffer(key, 4, SharedArrayBuffer),
        inBuffer(value, 0, SharedArrayBuffer), { keyPaddingMask: inBuffer(keyPaddingMask, 1, SharedArrayBuffer) }),
    (r) => assertMatchesFixture(r, fixture)],
    ['safetensors from a SharedArrayBuffer view at byte offset 5', async ({ lib }) => {
      const other = lib.createMultiheadAttention(moduleConfig(fixture.config));
      other.loadSafetensors(inBuffer({ data: fixture.bytes, shape: [] }, 5, SharedArrayBuffer).data, { prefix: 'param.' });
      try {
        return await other.forward(query, key, value, { keyPaddingMask });
      } finally {
        other.dispose();
      }
    }, (r) => assertMatchesFixture(r, fixture)],
    ['inputs overwritten and detached once forward() returned', ({ mha }) => {
      const [q, k, v, m] = [query, key, value, keyPaddingMask].map(copy);
      const pending = mha.forward(q, k, v, { keyPaddingMask: m });
      q.data.fill(NaN);
      m.data.fill(1);
      structuredClone(k.data.buffer, { transfer: [k.data.buffer] });
      return pending;
    }, (r) => assertMatchesFixture(r, fixture)],
  ];

  return { errors: ERRORS, results: RESULTS };
}
