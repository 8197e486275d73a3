// Compiled with `tsc --noEmit` against the packed package (package.test.js):
// the declarations accept the documented API and reject misuse.
import { loadMHA, MHAError } from 'mha-wasm';
import type {
  AttentionModuleInfo, DimsTensor, ForwardResult, KVCache, LoadProgress, MHALibrary, Mask,
  ModuleKVCache, MultiheadAttentionConfig, SdpaKVCache, StreamingOptions, Tensor,
} from 'mha-wasm';

export async function usage(): Promise<number> {
  const lib: MHALibrary = await loadMHA({ threads: 'auto', proxy: 'auto', wasmPaths: '/mha/' });
  const build: 'relaxed-simd-threaded' | 'simd-threaded' | 'simd' = lib.info.build;
  const reason: string | null = lib.info.threadsOffReason;
  const proxied: boolean = lib.info.proxy;
  const simd: true = lib.info.simd;
  const mha = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, batchFirst: true });
  await mha.loadStateDict({ 'out_proj.bias': new Float32Array(8) }, { prefix: '' });
  await mha.loadSafetensors(new Uint8Array(0));
  const shards = [new Uint8Array(0), new ArrayBuffer(0)];
  const [found]: AttentionModuleInfo[] = await lib.listAttentionModules(shards);
  await mha.loadSafetensors(shards, { prefix: found.prefix, layout: found.layout, names: found.names });
  await mha.loadStateDict({}, { names: { qkv: 'qkv', out: 'proj' }, layout: 'qkv-linear' });
  const normOver: 'head' | 'head-per-head' | 'all' | undefined = found.qkNorm?.over;
  const qwen3 = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, numKVHeads: 1,
    qkNorm: { type: 'rms', over: 'head', eps: 1e-6, weightOffset: 1 } });
  await qwen3.loadSafetensors(shards, { layout: 'neox' });
  // Streamed: Responses, Blobs, streams and arrays of them, with progress and cancel.
  const controller = new AbortController();
  const response = await fetch('/model-00001-of-00002.safetensors');
  await mha.loadSafetensors([response, new Blob([]), new File([], 'a.safetensors'), new Blob([]).stream()], {
    prefix: '', signal: controller.signal,
    onProgress: ({ loaded, total }: LoadProgress) => { void (loaded / total); },
  });
  await lib.listAttentionModules(new Blob([]));
  const { inUseBytes } = await lib.heapInfo();
  lib.terminate?.();
  const x: Tensor = { data: new Float32Array(16), shape: [1, 2, 8] };
  const mask: Mask = { data: new Uint8Array(2), shape: [1, 2] };
  const result: ForwardResult = await mha.forward(x, x, x, { keyPaddingMask: mask, isCausal: true });
  // The weights' type follows needWeights: a Tensor by default or for true, null for false.
  const weights: Tensor = (await mha.forward(x, x, x, { isCausal: true })).weights;
  const withWeights: Tensor = (await mha.forward(x, x, x, { needWeights: true })).weights;
  const noWeights: null = (await mha.forward(x, x, x, { needWeights: false })).weights;
  const flag = weights.shape.length > 2;
  const either: Tensor | null = (await mha.forward(x, x, x, { needWeights: flag })).weights;
  const sdpa: Tensor = await lib.scaledDotProductAttention(x, x, x, { scale: 0.5, cache: null });
  await mha.forward(x, x, x, { cache: null });
  // onnxruntime-web's and transformers.js's tensors: {data, dims}.
  const d: DimsTensor = { data: x.data, dims: [1, 2, 8] };
  await mha.forward(d, d, d, { attnMask: { data: new Float32Array(4), dims: [2, 2] } });
  await lib.scaledDotProductAttention(d, d, d);
  await mha.loadStateDict({ 'out_proj.bias': { data: new Float32Array(8), dims: [8] } });
  const gqa = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, numKVHeads: 1,
    rotary: { dim: 4, base: 10000, interleaved: false } });
  const ropeScaling = { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4,
    original_max_position_embeddings: 8192 };
  lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, rotary: { base: 5e5, scaling: ropeScaling } });
  lib.createMultiheadAttention({ embedDim: 8, numHeads: 2,
    rotary: { invFreq: new Float32Array(2), attentionFactor: 1.2 } });
  // config.json's values as they are: Qwen3's sliding_window and rope_scaling are null
  const config = { sliding_window: null as number | null, rope_scaling: null, alibi: false };
  lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, window: config.sliding_window,
    rotary: { base: 1e6, scaling: config.rope_scaling }, alibi: config.alibi });
  const cache: ModuleKVCache = gqa.createKVCache({ batchSize: 1, maxLength: 16, dtype: 'float16' });
  const cacheOnly: Tensor = (await gqa.forward(x, null, null, { cache, isCausal: true })).weights;
  const anyKind: KVCache = cache;
  const held: number = cache.length + cache.maxLength + cache.batchSize + cache.held;
  const windowed = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, window: 4 });
  const rolling: boolean | StreamingOptions = windowed.createKVCache({ batchSize: 1, maxLength: 8, rolling: true }).rolling;
  gqa.createKVCache({ batchSize: 1, maxLength: 8, rolling: false });
  // A config known at run time only may have a window: its module may make rolling caches.
  const fromFile: MultiheadAttentionConfig = { embedDim: 8, numHeads: 2, window: config.sliding_window };
  lib.createMultiheadAttention(fromFile).createKVCache({ batchSize: 1, maxLength: 8, rolling: true });
  const streaming = gqa.createKVCache({ batchSize: 1, maxLength: 8, rolling: { keep: 4 } });
  const pads: number[] = streaming.padding;
  await gqa.forward(x, x, x, { cache, positions: Int32Array.of(3, 4) });
  const c2: SdpaKVCache = lib.createKVCache({ batchSize: 1, numKVHeads: 1, headDim: 4, maxLength: 8,
    dtype: 'bfloat16' });
  const bytes: number = c2.bytes;
  const q8 = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, weightsDtype: 'int8' });
  const weightBytes: number = q8.memory;
  await lib.scaledDotProductAttention(x, x, x, { cache: c2, enableGqa: true });
  await cache.truncate(0);
  await cache.reorder(Int32Array.of(0));
  const saved: Uint8Array = await cache.save();
  const restored: ModuleKVCache = await gqa.loadKVCache(saved);
  const beams: ModuleKVCache = await restored.select(Int32Array.of(0, 0, 0, 0));
  await (await beams.clone()).resize(32);
  const sdpaCopy: SdpaKVCache = await (await lib.loadKVCache(await c2.save())).clone();
  c2.dispose();
  mha.dispose();
  try {
    // @ts-expect-error dtype is 'float32', 'float16' or 'bfloat16'
    gqa.createKVCache({ batchSize: 1, maxLength: 4, dtype: 'float64' });
    // @ts-expect-error bytes is read-only
    c2.bytes = 0;
    // @ts-expect-error reorder takes an Int32Array
    await cache.reorder([0]);
    // @ts-expect-error select takes an Int32Array
    await cache.select([0, 0]);
    // @ts-expect-error loadKVCache takes the bytes of cache.save()
    await gqa.loadKVCache('cache');
    // @ts-expect-error positions is an Int32Array
    await gqa.forward(x, x, x, { positions: [0, 1] });
    // @ts-expect-error weightsDtype is one of the named dtypes
    lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, weightsDtype: 'fp8' });
    // @ts-expect-error embedDim is required
    lib.createMultiheadAttention({ numHeads: 2 });
    // @ts-expect-error data must be a Float32Array
    await mha.forward({ data: [1, 2], shape: [2] }, x, x);
    // @ts-expect-error forward returns a Promise, not a result
    const notAwaited: ForwardResult = mha.forward(x, x, x);
    // @ts-expect-error option names are camelCase
    await mha.forward(x, x, x, { need_weights: false });
    // @ts-expect-error proxy is 'auto' or a boolean
    await loadMHA({ proxy: 'worker' });
    // @ts-expect-error layouts are named
    await mha.loadSafetensors(shards, { layout: 'llama' });
    // @ts-expect-error qkNorm types are 'rms' and 'layer'
    lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, qkNorm: { type: 'l2' } });
    // @ts-expect-error roles are q, k, v, out, qkv
    await mha.loadSafetensors(shards, { names: { query: 'to_q' } });
    // @ts-expect-error weights are null with needWeights: false
    const none: Tensor = (await mha.forward(x, x, x, { needWeights: false })).weights;
    // @ts-expect-error a boolean known at run time may give null
    const maybe: Tensor = (await mha.forward(x, x, x, { needWeights: flag })).weights;
    // @ts-expect-error key and value null need the module's cache
    await mha.forward(x, null, null);
    // @ts-expect-error key and value null need the module's cache
    await mha.forward(x, null, null, { isCausal: true });
    // @ts-expect-error a module takes its own kind of cache, not scaledDotProductAttention's
    await gqa.forward(x, x, x, { cache: c2 });
    // @ts-expect-error scaledDotProductAttention takes lib.createKVCache's caches, not a module's
    await lib.scaledDotProductAttention(x, x, x, { cache });
    // @ts-expect-error a loaded module cache is a module's
    const wrongKind: SdpaKVCache = await gqa.loadKVCache(saved);
    // @ts-expect-error rolling needs a module made with a window
    gqa.createKVCache({ batchSize: 1, maxLength: 8, rolling: true });
    void none, maybe, wrongKind;
    // @ts-expect-error a checkpoint is not named by a URL string: fetch it
    await mha.loadSafetensors('/model.safetensors');
    // @ts-expect-error onProgress is a function
    await mha.loadSafetensors(shards, { onProgress: true });
    void notAwaited;
  } catch (error) {
    if (!(error instanceof MHAError)) throw error;
  }
  lib.dispose();
  return result.output.data.length + (result.weights?.shape.length ?? 0) + sdpa.shape[0] +
    build.length + (reason ?? '').length + Number(proxied) + Number(simd) + inUseBytes +
    found.qSize + held +
    (normOver ?? '').length + bytes + Number(rolling === true) + weights.shape[0] + withWeights.shape[0] +
    Number(noWeights === null) + (either?.shape.length ?? 0) + cacheOnly.shape[0] + anyKind.length +
    sdpaCopy.length + pads.length;
}
