// mha-wasm: multi-head attention with PyTorch nn.MultiheadAttention semantics
// in WebAssembly. See README.md and DESIGN.md ("JavaScript API").
export { loadMHA } from './load.js';
export { MHAError } from './errors.js';
