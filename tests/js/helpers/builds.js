// The WebAssembly builds this Node can run; every JS test that computes runs
// on each. The relaxed-SIMD build needs relaxed SIMD in the engine (Node >= 22,
// or Node 20 with --experimental-wasm-relaxed-simd: scripts/test.sh runs the
// computing suites a second time so).
import { BUILDS as ALL } from '../../../web/src/builds.js';
import { relaxedSimdSupported } from '../../../web/src/load.js';

export const BUILDS = Object.keys(ALL).filter((name) => !ALL[name].relaxedSimd || relaxedSimdSupported());
