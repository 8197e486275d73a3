// Type declarations for mha-wasm, written by hand (Embind 3.1.6 cannot emit
// them). Kept in step with web/src/ and docs/design.md ("JavaScript API").

/** A row-major, contiguous float32 tensor. */
export interface Tensor {
  /** The values, row-major; its length is the product of `shape`. */
  data: Float32Array;
  /** The size of each dimension, outermost first. */
  shape: number[];
}

/**
 * A mask: Uint8Array is bool (for MultiheadAttention 1 = may not attend; for
 * scaledDotProductAttention 1 = may attend), Float32Array is added to the scores.
 */
export interface Mask {
  /** Uint8Array: bool (0 or 1); Float32Array: added to the scores (-Infinity masks). */
  data: Uint8Array | Float32Array;
  /** The size of each dimension, outermost first. */
  shape: number[];
}

/**
 * Dims named `dims`, as onnxruntime-web's and transformers.js's Tensor have them: accepted
 * wherever a Tensor or a Mask is (their `data` is typed as any of their dtypes' arrays: narrow it,
 * e.g. `tensor as DimsTensor`, when it is float32 or bool).
 */
export interface DimsTensor<Data = Float32Array> {
  /** The values, row-major. */
  readonly data: Data;
  /** The size of each dimension, outermost first (a Tensor's `shape`). */
  readonly dims: readonly number[];
}

/** An input tensor: {data, shape} or {data, dims}. */
export type TensorInput = Tensor | DimsTensor;
/** An input mask: {data, shape} or {data, dims}. */
export type MaskInput = Mask | DimsTensor<Uint8Array | Float32Array>;

/**
 * The WebAssembly builds: 'relaxed-simd-threaded' (threads and relaxed SIMD's fused multiply-adds),
 * 'simd-threaded' (threads, SIMD128), 'simd' (one thread, for pages without SharedArrayBuffer).
 */
export type BuildName = 'relaxed-simd-threaded' | 'simd-threaded' | 'simd';

/** What {@link loadMHA} loads and where it runs. */
export interface LoadOptions {
  /**
   * 'auto' (default) = min(hardware concurrency, 4); at most 8. The threaded builds start one
   * Worker per thread beside the calling one, and dispose() ends them.
   */
  threads?: 'auto' | number;
  /**
   * Default, where SharedArrayBuffer is usable (Node, cross-origin-isolated pages):
   * 'relaxed-simd-threaded' when the engine has relaxed SIMD, else 'simd-threaded'; elsewhere 'simd'.
   */
  build?: BuildName;
  /**
   * 'auto' (default): on a page's main thread the engine runs in a Worker of the package's own;
   * in Node and inside workers, in the calling thread. true: in the package's own Worker
   * anywhere (a worker_threads worker in Node), so that the calling thread runs on during a call.
   */
  proxy?: 'auto' | boolean;
  /**
   * Browsers: the base URL where the files of the package's dist/ are served, for tools that copy
   * no assets (esbuild, Rollup without an asset plugin) and CDNs; a relative one is resolved
   * against the page's base URL. Ignored in Node.
   */
  wasmPaths?: string | URL;
}

/** What a loaded library runs: {@link MHALibrary.info}. */
export interface LibraryInfo {
  /** The package's version. */
  version: string;
  /** The build loaded. */
  build: BuildName;
  /** Threads the pool runs, counting the calling thread. */
  threads: number;
  /** Always true: every build runs WebAssembly SIMD128 (Highway's WASM target). */
  simd: true;
  /**
   * Whether the engine has relaxed SIMD (WebAssembly.validate probe); the threaded build then uses
   * it ('relaxed-simd-threaded'). The single-thread build does not.
   */
  relaxedSimd: boolean;
  /** Highway's target name: 'WASM'. */
  target: string;
  /** The GEMM register tile chosen for this host at load: '2x4v' (x86), '8x2v' (ARM). */
  gemmTile: string;
  /** Whether the engine runs in the package's own Worker. */
  proxy: boolean;
  /** null with threads; else why the single-thread build runs. */
  threadsOffReason: string | null;
}

/**
 * A module's configuration: nn.MultiheadAttention's arguments (camelCase), and the options of
 * today's models (docs/models.md).
 */
export interface MultiheadAttentionConfig {
  /** Query (and output) features. */
  embedDim: number;
  /** Query heads; embedDim / numHeads is the default per-head dim. */
  numHeads: number;
  /** Biases on the input and output projections; default true. */
  bias?: boolean;
  /** Learned bias_k and bias_v rows appended to the keys and values; default false. */
  addBiasKV?: boolean;
  /** A row of zeros appended to the keys and values; default false. */
  addZeroAttn?: boolean;
  /** Key features; default embedDim. */
  kdim?: number;
  /** Value features; default embedDim. */
  vdim?: number;
  /** Tensors are (N, L, E) rather than (L, N, E); default false. */
  batchFirst?: boolean;
  /** Per-head query/key dim; default embedDim / numHeads. */
  qkHeadDim?: number;
  /** Per-head value dim; default embedDim / numHeads. */
  vHeadDim?: number;
  /** In [0, 1), as PyTorch's; accepted and ignored: inference runs in eval mode. */
  dropout?: number;
  /** Key/value heads (grouped-query; 1 = multi-query); must divide numHeads. Default numHeads. */
  numKVHeads?: number;
  /** Rotary positions (RoPE) on queries and keys, after projection and bias. */
  rotary?: RotaryConfig;
  /** Softmax scale: s = scale * q . k. Default 1 / sqrt(qkHeadDim) (Gemma: query_pre_attn_scalar ** -0.5). */
  scale?: number;
  /** Soft-capping: s = softcap * tanh(s / softcap) before masks (Gemma 2's attn_logit_softcapping). */
  softcap?: number;
  /**
   * Sliding window over positions (query i at cache.length + i, key j at j): a number W sees the
   * query's key and the W - 1 before it (Hugging Face's sliding_window, with isCausal);
   * [left, right] sees i - left <= j <= i + right (FlashAttention's window_size). Not with
   * addBiasKV / addZeroAttn. null: none (config.json's sliding_window of Mistral v0.2+).
   */
  window?: Window | null;
  /**
   * A learned logit per query head in the softmax's denominator (gpt-oss): the parameter `sinks`
   * (numHeads) is then loaded with the rest; weights sum to less than 1.
   */
  sinks?: boolean;
  /**
   * ALiBi biases m_h * (j - i) (BLOOM, MPT, Falcon-RW): true takes the ALiBi paper's slopes for
   * numHeads; { slopes } any others; { symmetric: true } uses -m_h * |j - i| (jina-bert-v2). Not
   * with addBiasKV / addZeroAttn. false or null: none (Falcon's config.json alibi: false).
   */
  alibi?: boolean | null | {
    /** One slope per query head (numHeads); default the ALiBi paper's. */
    slopes?: Float32Array;
    /** -m_h * |j - i| rather than m_h * (j - i); default false. */
    symmetric?: boolean;
  };
  /**
   * q/k norms in float32 after projection and bias, before rotary (Qwen3, Gemma 3, OLMo 2, Cohere,
   * Chameleon): the parameters `q_norm.weight`, `k_norm.weight` (and, for 'layer', optional
   * `.bias`) load with the rest.
   */
  qkNorm?: QkNormConfig;
  /**
   * How the projection weights are kept (docs/precision.md): 'auto' (default) as the checkpoint
   * stores them (F16/BF16 safetensors stay 16-bit; a state_dict of Float32Arrays is float32);
   * 'float16' / 'bfloat16' convert at load, with results bit-identical to widening them then;
   * 'int8' quantizes at load (symmetric, a float32 scale per output channel): approximate.
   */
  weightsDtype?: WeightsDtype;
}

/** Normalization of queries and keys per row ({@link MultiheadAttentionConfig.qkNorm}). */
export interface QkNormConfig {
  /** 'rms': x / sqrt(mean(x^2) + eps) * (w + weightOffset); 'layer': (x - mean) / sqrt(var + eps) * w (+ b). Default 'rms'. */
  type?: 'rms' | 'layer';
  /**
   * 'head' (default): each head's qkHeadDim features, weight (qkHeadDim) shared or (heads, qkHeadDim);
   * 'all': a row's whole projection, weight (numHeads * qkHeadDim) for q, (numKVHeads * qkHeadDim) for k (OLMo 2).
   */
  over?: 'head' | 'all';
  /** Default 1e-6 (config.json's rms_norm_eps or layer_norm_eps). */
  eps?: number;
  /** Added to the stored weight; default 0 (Gemma 3 stores w - 1: 1). */
  weightOffset?: number;
}

/** How projection weights are kept ({@link MultiheadAttentionConfig.weightsDtype}). */
export type WeightsDtype = 'auto' | 'float32' | 'float16' | 'bfloat16' | 'int8';

/**
 * A sliding window: W sees the query's key and the W - 1 before it; [left, right] sees keys
 * i - left through i + right.
 */
export type Window = number | [number, number];

/** Rotary position embedding (RoPE) of queries and keys ({@link MultiheadAttentionConfig.rotary}). */
export interface RotaryConfig {
  /** Features rotated per head: even, <= qkHeadDim. Default 2 * invFreq.length, else qkHeadDim. */
  dim?: number;
  /** Positive and finite; default 10000. Not with invFreq. */
  base?: number;
  /** true: pairs (2i, 2i+1) (GPT-J); false (default): (i, i + dim/2) (GPT-NeoX, Llama). */
  interleaved?: boolean;
  /**
   * Hugging Face's rope_scaling dict as config.json has it (null: none): 'linear', 'llama3' or
   * 'yarn' (rope_type or type); other kinds (dynamic, longrope) are an MHAError. Not with invFreq.
   */
  scaling?: RopeScaling | null;
  /** The inverse frequencies themselves (transformers' inv_freq buffer): dim / 2 of them. */
  invFreq?: Float32Array;
  /** cos and sin times this (positive; not with scaling, whose YaRN has its own). Default 1. */
  attentionFactor?: number;
}

/** Hugging Face's rope_scaling (docs/design.md, "The attention of today's models", step 3). */
export interface RopeScaling {
  /** The kind of scaling; 'default' is none. */
  rope_type?: 'default' | 'linear' | 'llama3' | 'yarn' | string;
  /** Older configs' name for rope_type. */
  type?: 'default' | 'linear' | 'llama3' | 'yarn' | string;
  /** How many times the trained context length the positions stretch to. */
  factor?: number | null;
  /** llama3: wavelengths above original_max_position_embeddings / low_freq_factor are scaled. */
  low_freq_factor?: number | null;
  /** llama3: wavelengths below original_max_position_embeddings / high_freq_factor are kept. */
  high_freq_factor?: number | null;
  /** llama3 and yarn: the context length the model was trained with. */
  original_max_position_embeddings?: number | null;
  /** yarn: the rotations where the correction range starts; default 32. */
  beta_fast?: number | null;
  /** yarn: the rotations where the correction range ends; default 1. */
  beta_slow?: number | null;
  /** yarn: floor/ceil the correction range (default true) */
  truncate?: boolean | null;
  /** yarn: the factor on cos and sin; default from mscale / mscale_all_dim, else 0.1 ln(factor) + 1 */
  attention_factor?: number | null;
  /** yarn (DeepSeek): the numerator of attention_factor's ratio. */
  mscale?: number | null;
  /** yarn (DeepSeek): the denominator of attention_factor's ratio. */
  mscale_all_dim?: number | null;
}

/** How a cache keeps keys and values ({@link KVCacheOptions.dtype}). */
export type KVCacheDtype = 'float32' | 'float16' | 'bfloat16';

/** A module's cache: {@link MultiheadAttention.createKVCache}. */
export interface KVCacheOptions {
  /** Batch entries (N); 1 for unbatched calls. */
  batchSize: number;
  /** Keys it can hold; all its memory is allocated at creation. */
  maxLength: number;
  /**
   * Default 'float32'; 'float16' and 'bfloat16' halve memory and bandwidth (about 1e-3 and 8e-3
   * relative: 11 and 8 significant bits).
   */
  dtype?: KVCacheDtype;
  /**
   * A ring of maxLength slots for attention with a finite left window (a module's `window`, or
   * each scaledDotProductAttention call's): appending past maxLength drops the oldest keys,
   * which no later query sees; results are identical to a cache that keeps every key. Each call
   * needs maxLength >= left window + the rows it appends (else MHAError naming the three
   * numbers). A module without a finite left window throws MHAError (and, made without a
   * `window`, does not type-check: {@link WindowlessCacheOptions}).
   *
   * `{ keep }` (a module's cache only, any module): a StreamingLLM cache, Hugging Face's
   * SinkCache. A call that would pass maxLength first drops the oldest keys after the first
   * `keep` (the sinks, 0 <= keep < maxLength) and moves the others down, re-rotating them to
   * their new slots; queries and new keys turn at their positions within the cache, and
   * `length` counts the keys held. Such a call appends at most maxLength - keep rows.
   */
  rolling?: boolean | StreamingOptions;
}

/** A StreamingLLM cache ({@link KVCacheOptions.rolling}). */
export interface StreamingOptions {
  /** The first keys kept as sinks, 0 <= keep < maxLength. */
  keep: number;
}

/**
 * The cache options of a module made without a `window`: no `rolling: true`, which needs one;
 * a StreamingLLM cache (`{ keep }`) needs none.
 */
export interface WindowlessCacheOptions extends KVCacheOptions {
  /** false, or `{ keep }`: a rolling ring needs a module with a finite left window. */
  rolling?: false | StreamingOptions;
}

/** A cache for scaledDotProductAttention: {@link MHALibrary.createKVCache}. */
export interface SdpaKVCacheOptions extends Omit<KVCacheOptions, 'rolling'> {
  /** A ring for each call's finite left window ({@link KVCacheOptions.rolling}); no `{ keep }`. */
  rolling?: boolean;
  /** Key/value heads (Hkv). */
  numKVHeads: number;
  /** Key features per head (E). */
  headDim: number;
  /** Default headDim. */
  vHeadDim?: number;
}

/**
 * Type-only: what tells a module's cache from scaledDotProductAttention's. Not exported (the
 * package has no such value; `export {}` at the end keeps a declaration file's others from
 * exporting it).
 * @hidden
 */
declare const cacheKind: unique symbol;

/**
 * Keys and values kept across calls for decoding. maxLength, batchSize and dtype are known at
 * once in both modes; a disposed cache's getters throw MHAError. Of two kinds, which do not mix:
 * {@link ModuleKVCache} and {@link SdpaKVCache}.
 */
export interface KVCache {
  /**
   * Positions appended per batch entry (what masks and weights span; a rolling cache keeps
   * counting). Through the proxy, as of the last call on it that has settled (await the calls
   * that use the cache before reading it).
   */
  readonly length: number;
  /** Keys in memory per batch entry: length, or at most maxLength when rolling; as length. */
  readonly held: number;
  /**
   * Per batch entry, the pad slots it remembers: the leading masked slots of the
   * keyPaddingMask given at its prefill (the first call after creation or a truncate to 0).
   * Later calls without a mask keep them masked and, with rotary, without positions count
   * each entry's positions from its first real token. As length through the proxy.
   */
  readonly padding: number[];
  /** Whether it is a ring, or `{ keep }` for a StreamingLLM cache ({@link KVCacheOptions.rolling}). */
  readonly rolling: boolean | StreamingOptions;
  /** Keys it can hold per batch entry. */
  readonly maxLength: number;
  /** Batch entries. */
  readonly batchSize: number;
  /** How it keeps keys and values. */
  readonly dtype: KVCacheDtype;
  /** Bytes its keys and values take, all allocated at creation. */
  readonly bytes: number;
  /**
   * Keeps the first n keys; resolves once done (calls run in order, so after the calls sent
   * before it). n not an integer >= 0, n > length and, on a rolling cache, an n whose keys
   * n - left .. n - 1 are no longer held reject with MHAError.
   */
  truncate(n: number): Promise<void>;
  /** truncate(0). */
  reset(): Promise<void>;
  /**
   * Beam search (Hugging Face's reorder_cache, index_select(0, beam_idx)): batch entry b becomes
   * the old entry indices[b]; entries may repeat and others be dropped. In place, without
   * allocating; resolves once done, in order with the other calls. Not an Int32Array of
   * batchSize entries, or an index outside [0, batchSize), rejects with MHAError, the cache left
   * as it was.
   */
  reorder(indices: Int32Array): Promise<void>;
  /**
   * Its config, length and held keys and values as bytes (docs/kv-cache-format.md), for
   * mha.loadKVCache / lib.loadKVCache (e.g. after a page reload, from IndexedDB). Through the
   * proxy, the bytes come back transferred.
   */
  save(): Promise<Uint8Array>;
  /**
   * A new cache whose entry b holds this cache's entry indices[b], of any batch size (one
   * prompt prefilled once, to four beams: Int32Array.of(0, 0, 0, 0)). An index outside
   * [0, batchSize) rejects with MHAError.
   */
  select(indices: Int32Array): Promise<this>;
  /** A new cache with the same keys, values and length (fork a conversation). */
  clone(): Promise<this>;
  /**
   * Makes maxLength `maxLength`, in place (new storage, the held keys copied); in order with
   * the other calls. Below `held` rejects with MHAError, the cache left as it was.
   */
  resize(maxLength: number): Promise<void>;
  /** Frees the cache's WASM memory; later getters throw MHAError, later calls reject with one. */
  dispose(): void;
}

/** A module's cache ({@link MultiheadAttention.createKVCache}), for that module's forward. */
export interface ModuleKVCache extends KVCache {
  /** Type-only: a module's cache. @hidden */
  readonly [cacheKind]: 'module';
}

/** A cache for {@link MHALibrary.scaledDotProductAttention} ({@link MHALibrary.createKVCache}). */
export interface SdpaKVCache extends KVCache {
  /** Type-only: scaledDotProductAttention's cache. @hidden */
  readonly [cacheKind]: 'sdpa';
}

/** One state_dict entry a module has ({@link MultiheadAttention.parameters}). */
export interface ParameterSpec {
  /** Its nn.MultiheadAttention name ('in_proj_weight', 'out_proj.bias', ...). */
  name: string;
  /** Its shape. */
  shape: number[];
}

/**
 * A state_dict: tensor names as saved (nn.MultiheadAttention's, or any layout of WeightLayout).
 * A bare Float32Array has its parameter's shape for nn.MultiheadAttention's names, else is 1-D.
 */
export type StateDict = Record<string, Float32Array | TensorInput>;

/**
 * How a checkpoint names one attention module's projections (docs/models.md, "From PyTorch and
 * Hugging Face"): 'torch' (nn.MultiheadAttention), 'qkv-linear' (one nn.Linear per projection: q/k/v +
 * out_proj, W_q/W_k/W_v + W_o or W, query/key/value + fc_out, BERT, ViT, Llama, Whisper, T5's
 * q/k/v + o, or Phi-3's fused qkv_proj + o_proj), 'gpt2' (fused Conv1D c_attn + c_proj), 'neox'
 * (query_key_value fused and grouped per key/value head + dense: GPT-NeoX, Pythia, BLOOM, Falcon).
 * 'auto' detects it from the names under the prefix.
 */
export type WeightLayout = 'auto' | 'torch' | 'qkv-linear' | 'gpt2' | 'neox';

/** Roles of a module's projections; qkv is a fused one. */
export type ProjectionRole = 'q' | 'k' | 'v' | 'out' | 'qkv';

/** Where a module's tensors are in a checkpoint and how they are named. */
export interface WeightOptions {
  /** The module's prefix, e.g. 'model.layers.3.self_attn.'; names are matched after it. */
  prefix?: string;
  /** Default 'auto': detected from the names under the prefix. */
  layout?: WeightLayout;
  /**
   * For names no layout knows: role -> module name under the prefix ('to_q', 'to_out.0'), whose
   * tensors are '<name>.weight' and optionally '<name>.bias'. Roles left out are detected. The
   * layout is then 'qkv-linear' (qkv: one nn.Linear) unless `layout` is 'gpt2' (Conv1D).
   */
  names?: Partial<Record<ProjectionRole, string>>;
}

/** One attention module found in a checkpoint by lib.listAttentionModules. */
export interface AttentionModuleInfo {
  /** Pass it as `prefix` to loadSafetensors. */
  prefix: string;
  /** How its projections are named. */
  layout: Exclude<WeightLayout, 'auto'>;
  /** Its projections' module names under the prefix (none for 'torch'). */
  names: Partial<Record<ProjectionRole, string>>;
  /** Query (and output) features. */
  embedDim: number;
  /** Key features. */
  kdim: number;
  /** Value features. */
  vdim: number;
  /**
   * Output features of the q, k and v projections: numHeads * qkHeadDim,
   * numKVHeads * qkHeadDim, numKVHeads * vHeadDim. The number of heads is not in the checkpoint:
   * take it from the model's config (num_attention_heads).
   */
  qSize: number;
  /** Output features of the k projection. */
  kSize: number;
  /** Output features of the v projection. */
  vSize: number;
  /** Whether the checkpoint holds projection biases (absent ones load as zero). */
  bias: boolean;
  /** Whether it holds bias_k and bias_v (addBiasKV). */
  biasKV: boolean;
  /** The checkpoint holds `sinks` under the prefix (create the module with sinks: true). */
  sinks: boolean;
  /**
   * The checkpoint's q/k norms (create the module with qkNorm): q_norm.weight of one head's
   * features ('head'), one row per head ('head-per-head'; qkNorm over 'head' too) or the whole
   * projection ('all'); bias: it holds q_norm.bias (type 'layer'). null: none.
   */
  qkNorm: {
    /** What q_norm.weight spans. */
    over: 'head' | 'head-per-head' | 'all';
    /** Whether it holds q_norm.bias. */
    bias: boolean;
  } | null;
}

/**
 * Where one .safetensors file comes from: its bytes, a Blob or File, a Response (from fetch,
 * its body not yet read; a status other than 2xx rejects) or a ReadableStream of Uint8Arrays.
 * Only the header and the tensors used are read: a Blob is sliced, a stream is read up to the
 * last tensor used and then cancelled.
 */
export type SafetensorsSource = Uint8Array | ArrayBuffer | Blob | Response | ReadableStream<Uint8Array>;

/** One .safetensors file, or the shards of one checkpoint (sources of any kinds). */
export type SafetensorsBytes = SafetensorsSource | SafetensorsSource[];

/** Bytes read so far by a load, and all it will read (headers and the tensors used). */
export interface LoadProgress {
  /** Bytes read so far: grows with each call. */
  loaded: number;
  /** Bytes the load reads in all; the last call's `loaded`. */
  total: number;
}

/** {@link MultiheadAttention.loadSafetensors}'s options. */
export interface SafetensorsLoadOptions extends WeightOptions {
  /**
   * Called as bytes arrive, once every header is read (so `total` is known): `loaded` grows to
   * `total`. An error it throws rejects the load.
   */
  onProgress?: (progress: LoadProgress) => void;
  /**
   * Cancels the load: it rejects with an MHAError whose name is 'AbortError' (its cause: the
   * signal's reason), its sources cancelled, the module unchanged.
   */
  signal?: AbortSignal;
}

/** The options of {@link MultiheadAttention.forward}, nn.MultiheadAttention's (camelCase) and more. */
export interface ForwardOptions {
  /** (N, S) or (S) unbatched; bool or additive. */
  keyPaddingMask?: MaskInput;
  /** (L, S) or (N * numHeads, L, S); bool or additive. */
  attnMask?: MaskInput;
  /** Return the attention weights too; default true, as PyTorch's (false saves their memory). */
  needWeights?: boolean;
  /** Weights averaged over heads (N, L, S) rather than per head (N, numHeads, L, S); default true. */
  averageAttnWeights?: boolean;
  /** With a cache: query i may attend keys j <= cache.length + i (bottom-right). */
  isCausal?: boolean;
  /**
   * This module's cache: key/value hold only the new rows (or are both null to attend the
   * cache only), appended at positions cache.length..; masks and weights span all keys held.
   */
  cache?: ModuleKVCache | null;
  /**
   * Rotary position of each query row and of the key row appended with it: N * L entries,
   * batch-major (n * L + i) whatever batchFirst (L unbatched); default cache.length + i.
   * Hugging Face's position_ids for padded batches. Masks, window and ALiBi still use slots.
   * Rejects (MHAError) on a module without rotary, a length other than N * L, and key rows
   * other than the query rows (key and value may be null with a cache).
   */
  positions?: Int32Array;
}

/**
 * What {@link MultiheadAttention.forward} resolves to; `Weights` as needWeights says: Tensor for
 * true or none (the default), null for false, either for a boolean only known at run time.
 */
export interface ForwardResult<Weights extends Tensor | null = Tensor | null> {
  /** (L, N, E), (N, L, E) with batchFirst, or (L, E) unbatched. */
  output: Tensor;
  /** (N, L, S) averaged, (N, numHeads, L, S) per head; null with needWeights: false. */
  weights: Weights;
}

/**
 * forward's arguments after the query for options of type O: key and value, or both null to
 * attend the cache's keys only (then options must hold this module's cache).
 */
export type ForwardArgs<O extends ForwardOptions> =
  | [key: TensorInput, value: TensorInput, options?: O]
  | [key: null, value: null, options: O & WithModuleCache];

/** Forward options with a cache, as key and value null need. */
export interface WithModuleCache {
  /** This module's cache: the query attends the keys it holds. */
  cache: ModuleKVCache;
}

/**
 * A module made by {@link MHALibrary.createMultiheadAttention}: nn.MultiheadAttention in eval
 * mode. `Windowed`: whether it was made with a `window` (its caches may then be rolling).
 */
export interface MultiheadAttention<Windowed extends boolean = boolean> {
  /**
   * The state_dict entries this configuration has, known at once in both modes (a function of
   * the config); a disposed module's throws MHAError.
   */
  readonly parameters: ParameterSpec[];
  /**
   * Bytes its weights take in their dtype (0 before a load), as of the last load that has settled,
   * in both modes: a pending load (from bytes or streamed) shows once its Promise settles.
   */
  readonly memory: number;
  /**
   * Loads the module under options.prefix, in any layout. Resolves once loaded (await it); bad
   * input and the core's errors (no module, an ambiguous layout, a shape that does not fit the
   * configuration) reject with MHAError; a failed load changes nothing.
   */
  loadStateDict(stateDict: StateDict, options?: WeightOptions): Promise<void>;
  /**
   * The same from a .safetensors file or its shards: only the tensors used are read (F32, F16 or
   * BF16); tensors of other dtypes elsewhere never stop a load. Each tensor streams into the
   * new weights as it arrives: the WebAssembly heap peaks at the weights plus one tensor (its
   * float32 form for F16/BF16), never the whole file. Errors name the shard and the tensor; a
   * failed or aborted load changes nothing.
   */
  loadSafetensors(bytes: SafetensorsBytes, options?: SafetensorsLoadOptions): Promise<void>;
  /**
   * Bad input and the core's errors (shapes, the cache) reject with MHAError. With needWeights
   * true or unset (the default), the weights are a Tensor.
   */
  forward(query: TensorInput, ...args: ForwardArgs<ForwardOptions & { needWeights?: true }>):
    Promise<ForwardResult<Tensor>>;
  /** With needWeights: false, the weights are null. */
  forward(query: TensorInput, ...args: ForwardArgs<ForwardOptions & { needWeights: false }>):
    Promise<ForwardResult<null>>;
  /** needWeights a boolean known at run time: the weights are a Tensor or null. */
  forward(query: TensorInput, ...args: ForwardArgs<ForwardOptions>): Promise<ForwardResult>;
  /** A cache of this module's key/value heads for decoding. */
  createKVCache(options: Windowed extends true ? KVCacheOptions : WindowlessCacheOptions):
    ModuleKVCache;
  /**
   * A cache of this module from cache.save()'s bytes, continuing bit for bit where the saved one
   * was. Bytes of other key/value heads or head dims, another format version, truncated or
   * corrupted (a checksum) reject with MHAError naming what differs; nothing is allocated.
   */
  loadKVCache(bytes: Uint8Array | ArrayBuffer): Promise<ModuleKVCache>;
  /** Frees the module's WASM memory; later getters throw MHAError, later calls reject with one. */
  dispose(): void;
}

/** The options of {@link MHALibrary.scaledDotProductAttention}, PyTorch's (camelCase) and more. */
export interface SdpaOptions {
  /** Broadcasts to (B, H, L, S); bool true = may attend (PyTorch 2.x). */
  attnMask?: MaskInput;
  /** Query i may attend keys j <= i (with a cache, j <= cache.length + i). */
  isCausal?: boolean;
  /** Default 1 / sqrt(E). */
  scale?: number;
  /** s = softcap * tanh(s / softcap) after the scale, before the mask. */
  softcap?: number;
  /** As the module's window; query i at cache.length + i. */
  window?: Window | null;
  /** One logit per query head (length H) in the softmax's denominator. */
  sinks?: Float32Array;
  /** ALiBi slopes, one per query head (length H): scores gain m_h * (j - i). */
  alibiSlopes?: Float32Array;
  /** key/value may have fewer heads, dividing the query's (PyTorch 2.5). */
  enableGqa?: boolean;
  /** A cache from lib.createKVCache: key/value (B, Hkv, S_new, E) are appended, or both null. */
  cache?: SdpaKVCache | null;
}

/** What {@link MHALibrary.heapInfo} resolves to. */
export interface HeapInfo {
  /** The end of the heap's used region (bytes). */
  heapTop: number;
  /** Bytes allocated and not freed. */
  inUseBytes: number;
  /** The WebAssembly memory's size (bytes). */
  memoryBytes: number;
}

/**
 * The same contract in the calling thread and through the proxy, the Web platform's: a method that
 * returns a Promise never throws; every error of it (bad input included: types, shapes, options,
 * disposed objects, and what only the core sees: shapes against the module, a cache's length,
 * memory) rejects with MHAError, so one `.catch()` or `try { await ... }` sees them all. The
 * synchronous ones (createMultiheadAttention, createKVCache, getters) throw MHAError.
 */
export interface MHALibrary {
  /** What this library runs: build, threads, proxy. */
  readonly info: Readonly<LibraryInfo>;
  /**
   * Throws MHAError for any config the core refuses. Through the proxy, a module the worker
   * cannot make (out of memory there) rejects its calls, and its getters throw, with that error.
   */
  createMultiheadAttention(config: MultiheadAttentionConfig & { window: Window }):
    MultiheadAttention<true>;
  /** Made without a window (or with null): its caches are not rings (StreamingLLM caches may be). */
  createMultiheadAttention(config: MultiheadAttentionConfig & { window?: null }):
    MultiheadAttention<false>;
  /** A config whose window is known at run time only (a variable of this type). */
  createMultiheadAttention(config: MultiheadAttentionConfig): MultiheadAttention;
  /**
   * PyTorch's torch.nn.functional.scaled_dot_product_attention: query (B, H, L, E), key
   * (B, Hkv, S, E), value (B, Hkv, S, Ev), or without the batch dimension; resolves to
   * (B, H, L, Ev). Bad input and the core's errors reject with MHAError.
   */
  scaledDotProductAttention(query: TensorInput, key: TensorInput | null, value: TensorInput | null,
    options?: SdpaOptions): Promise<Tensor>;
  /** A cache for scaledDotProductAttention. */
  createKVCache(options: SdpaKVCacheOptions): SdpaKVCache;
  /** A cache for scaledDotProductAttention from cache.save()'s bytes (as mha.loadKVCache). */
  loadKVCache(bytes: Uint8Array | ArrayBuffer): Promise<SdpaKVCache>;
  /** The attention modules a checkpoint holds, read from its headers. */
  listAttentionModules(bytes: SafetensorsBytes): Promise<AttentionModuleInfo[]>;
  /** Diagnostics: the WASM heap's top, bytes in use, memory size. */
  heapInfo(): Promise<HeapInfo>;
  /**
   * Only when info.proxy: ends the engine's worker now, even mid-forward. Pending calls reject
   * with MHAError, modules made there are gone, the library's next call starts a new worker.
   */
  terminate?(): void;
  /**
   * Frees the library: the modules and caches made from it are disposed, its Workers (thread
   * pool; the proxy's worker) end, its memory goes. Its calls then fail with MHAError; loadMHA()
   * loads afresh. A second call does nothing.
   */
  dispose(): void;
}

/**
 * Loads the engine (the WebAssembly build options.build, or the best this platform runs) and
 * resolves to the library; a platform that cannot run the build asked for rejects with MHAError.
 * Loads once per set of options: calls whose options come to the same build, threads and proxy
 * (while it loads and after) get the same library, so a server may call it per request and React
 * StrictMode's second effect starts nothing more. After lib.dispose() the next call loads afresh.
 */
export function loadMHA(options?: LoadOptions): Promise<MHALibrary>;

/**
 * Bad input or a failure: thrown by synchronous methods and getters, the rejection of Promise
 * ones. The message names the argument, the expected and the received.
 */
export class MHAError extends Error {
  /** Always 'MHAError'. */
  name: 'MHAError';
}

// Only the declarations marked `export` are the package's (cacheKind is not).
export {};
