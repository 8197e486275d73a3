// The WebAssembly builds, the one table of them: scripts/build_wasm.sh builds each from it, the
// loaders find their files in dist/ by it. Per build: the base name of its files, whether it runs
// a thread pool (and so has a pthread worker script and needs SharedArrayBuffer), and whether
// its kernels use relaxed SIMD (and so need an engine that has it).
export const BUILDS = {
  'relaxed-simd-threaded': { file: 'mha-relaxed-simd-threaded', threads: true, relaxedSimd: true },
  'simd-threaded': { file: 'mha-simd-threaded', threads: true, relaxedSimd: false },
  simd: { file: 'mha-simd', threads: false, relaxedSimd: false },
};

export const BUILD_NAMES = Object.keys(BUILDS);

// { [build]: { js, wasm, worker? } }: each build's files, at(name) giving a file's location.
export function buildFiles(at) {
  return Object.fromEntries(Object.entries(BUILDS).map(([name, { file, threads }]) => [name, {
    js: at(`${file}.mjs`), wasm: at(`${file}.wasm`), ...(threads ? { worker: at(`${file}.worker.js`) } : {}),
  }]));
}
