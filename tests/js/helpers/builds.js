// The WebAssembly builds this Node can run; every JS test that computes runs
// on each. The relaxed-SIMD build needs relaxed SIMD in the engine (Node >= 22,
// or Node 20 with --experimental-wasm-relaxed-simd: scripts/test.sh runs the
// computing suites a second time so).
import { BUILDS as ALL } from '../../../web/src/builds.js';
import * as env from '../../../web/src/env_node.js';
import { checkLoadOptions, loadInThread, relaxedSimdSupported } from '../../../web/src/load.js';

export const BUILDS = Object.keys(ALL).filter((name) => !ALL[name].relaxedSimd || relaxedSimdSupported());

// A library of `build` apart from the one loadMHA({ build }) gives (loadMHA loads once per set of
// resolved options, web/src/load_once.js): loaded as index.js's loadMHA does, without the sharing.
export const separateLibrary = (build) => loadInThread(checkLoadOptions({ build }), env, env.fileUrls());
