// Type declarations for mha-wasm, written by hand (Embind 3.1.6 cannot emit
// them). Kept in step with web/src/ and DESIGN.md ("JavaScript API").

/** A row-major, contiguous float32 tensor. */
export interface Tensor {
  data: Float32Array;
  shape: number[];
}

/**
 * A mask: Uint8Array is bool (for MultiheadAttention 1 = may not attend; for
 * scaledDotProductAttention 1 = may attend), Float32Array is added to the scores.
 */
export interface Mask {
  data: Uint8Array | Float32Array;
  shape: number[];
}

export type BuildName = 'relaxed-simd-threaded' | 'simd-threaded' | 'simd';

export interface LoadOptions {
  /** 'auto' (default) = min(hardware concurrency, 4); capped at the build's worker pool (8). */
  threads?: 'auto' | number;
  /** Default: 'simd-threaded' where SharedArrayBuffer is usable (Node, cross-origin-isolated pages). */
  build?: BuildName;
  /**
   * 'auto' (default): on a page's main thread the engine runs in a Worker of the package's own;
   * in Node and inside workers, in the calling thread. true needs Web Workers (not Node).
   */
  proxy?: 'auto' | boolean;
  /**
   * Browsers: the base URL where the files of the package's dist/ are served, for tools that copy
   * no assets (esbuild, Rollup without an asset plugin) and CDNs. Ignored in Node.
   */
  wasmPaths?: string | URL;
}

export interface LibraryInfo {
  version: string;
  build: BuildName;
  /** Threads the pool runs, counting the calling thread. */
  threads: number;
  simd: boolean;
  /** Highway's target name: 'WASM'. */
  target: string;
  /** Whether the engine runs in the package's own Worker. */
  proxy: boolean;
  /** null with threads; else why the single-thread build runs. */
  threadsOffReason: string | null;
}

export interface MultiheadAttentionConfig {
  embedDim: number;
  numHeads: number;
  bias?: boolean;
  addBiasKV?: boolean;
  addZeroAttn?: boolean;
  kdim?: number;
  vdim?: number;
  batchFirst?: boolean;
  /** Per-head query/key dim; default embedDim / numHeads. */
  qkHeadDim?: number;
  /** Per-head value dim; default embedDim / numHeads. */
  vHeadDim?: number;
  /** Accepted and ignored: inference runs in eval mode. */
  dropout?: number;
}

export interface ParameterSpec {
  name: string;
  shape: number[];
}

/** PyTorch state_dict names, e.g. in_proj_weight, out_proj.weight. */
export type StateDict = Record<string, Float32Array | Tensor>;

export interface PrefixOptions {
  /** Only keys starting with the prefix are loaded, with it removed (e.g. 'attn.'). */
  prefix?: string;
}

export interface ForwardOptions {
  /** (N, S) or (S) unbatched; bool or additive. */
  keyPaddingMask?: Mask;
  /** (L, S) or (N * numHeads, L, S); bool or additive. */
  attnMask?: Mask;
  needWeights?: boolean;
  averageAttnWeights?: boolean;
  isCausal?: boolean;
}

export interface ForwardResult {
  output: Tensor;
  /** null unless needWeights. */
  weights: Tensor | null;
}

export interface MultiheadAttention {
  /**
   * The state_dict entries this configuration has. Through the proxy, known once the worker has
   * made the module (after any awaited call on it); before that, reading it throws MHAError.
   */
  readonly parameters: ParameterSpec[];
  /** Resolves once loaded (await it); bad input JS can see throws, core errors reject. */
  loadStateDict(stateDict: StateDict, options?: PrefixOptions): Promise<void>;
  /** The bytes of a .safetensors file with F32, F16 or BF16 tensors. */
  loadSafetensors(bytes: Uint8Array | ArrayBuffer, options?: PrefixOptions): Promise<void>;
  forward(query: Tensor, key: Tensor, value: Tensor, options?: ForwardOptions):
    Promise<ForwardResult>;
  /** Frees the module's WASM memory; later calls throw MHAError. */
  dispose(): void;
}

export interface SdpaOptions {
  /** Broadcasts to (B, H, L, S); bool true = may attend (PyTorch 2.x). */
  attnMask?: Mask;
  isCausal?: boolean;
  /** Default 1 / sqrt(E). */
  scale?: number;
}

export interface HeapInfo {
  heapTop: number;
  inUseBytes: number;
  memoryBytes: number;
}

export interface MHALibrary {
  readonly info: Readonly<LibraryInfo>;
  createMultiheadAttention(config: MultiheadAttentionConfig): MultiheadAttention;
  scaledDotProductAttention(query: Tensor, key: Tensor, value: Tensor, options?: SdpaOptions):
    Promise<Tensor>;
  /** Diagnostics: the WASM heap's top, bytes in use, memory size. */
  heapInfo(): Promise<HeapInfo>;
  /**
   * Only when info.proxy: ends the engine's worker now, even mid-forward. Pending calls reject
   * with MHAError, modules made there are gone, the library's next call starts a new worker.
   */
  terminate?(): void;
}

export function loadMHA(options?: LoadOptions): Promise<MHALibrary>;

/** Thrown for bad input; the message names the argument, the expected and the received. */
export class MHAError extends Error {
  name: 'MHAError';
}
