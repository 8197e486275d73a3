// The W rows' forward of mha-wasm and onnxruntime, on inputs and model bytes
// already in memory. No Node code: the Node engines (mha_wasm.mjs,
// onnxruntime.mjs) and the browser page (bench/browser/page.js) make the
// same calls; only how they get the package, the files and the bytes differs.

// mha-wasm: loadMHA of the package on `threads` threads, which it must grant.
export async function loadMhaThreads(loadMHA, threads) {
  const lib = await loadMHA({ threads });
  if (lib.info.threads !== threads) {
    throw new Error(`asked for ${threads} threads, got ${JSON.stringify(lib.info)}`);
  }
  return lib;
}

// mha-wasm: the options of issue 22's rows ("models" in workloads.json), as
// createMultiheadAttention takes them.
export const moduleOptions = (w) => ({
  ...(w.window !== undefined ? { window: w.window } : {}),
  ...(w.softcap !== undefined ? { softcap: w.softcap } : {}),
  ...(w.alibi ? { alibi: true } : {}),
  ...(w.sinks ? { sinks: true } : {}),
});

// mha-wasm: a module of workload w's shape (batch first) with the parameters
// of `safetensors` (bytes, or its shards); `config` adds options (the D rows').
export async function createMhaModule(lib, w, safetensors, config = {}) {
  const mha = lib.createMultiheadAttention({ embedDim: w.E, numHeads: w.H, batchFirst: true, ...config });
  await mha.loadSafetensors(safetensors);
  return mha;
}

// mha-wasm: one forward of w on `inputs` ({ query, key, value, keyPaddingMask }).
export function mhaForward(mha, w, inputs) {
  const query = { data: inputs.query, shape: [w.B, w.L, w.E] };
  const key = w.cross ? { data: inputs.key, shape: [w.B, w.S, w.E] } : query;
  const value = w.cross ? { data: inputs.value, shape: [w.B, w.S, w.E] } : query;
  const options = {
    isCausal: w.causal,
    needWeights: w.needWeights,
    averageAttnWeights: true,
    keyPaddingMask: inputs.keyPaddingMask ? { data: inputs.keyPaddingMask, shape: [w.B, w.S] } : undefined,
  };
  return {
    async run() {
      const { output } = await mha.forward(query, key, value, options);
      return output.data;
    },
  };
}

// onnxruntime-web: its WASM backend on `threads` threads, its files under
// `wasmPaths`; returns the session options.
export function ortWebOptions(ort, threads, wasmPaths) {
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.wasmPaths = wasmPaths;
  return { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
}

// onnxruntime: the feed of a W row (the inputs of bench/export_onnx.py's model).
export function ortFeed(ort, w, inputs) {
  const feed = { query: new ort.Tensor('float32', inputs.query, [w.B, w.L, w.E]) };
  if (w.cross) {
    feed.key = new ort.Tensor('float32', inputs.key, [w.B, w.S, w.E]);
    feed.value = new ort.Tensor('float32', inputs.value, [w.B, w.S, w.E]);
  }
  if (inputs.keyPaddingMask) {
    feed.key_padding_mask = new ort.Tensor('bool', inputs.keyPaddingMask, [w.B, w.S]);
  }
  return feed;
}

// onnxruntime: a session over `model` (bytes) that runs `feed`.
export async function ortSession(ort, model, sessionOptions, feed) {
  const session = await ort.InferenceSession.create(model, sessionOptions);
  return {
    async run() {
      const result = await session.run(feed);
      return result.output.data;
    },
  };
}
