// Both WebAssembly builds; every JS test that computes runs on each.
export const BUILDS = ['simd-threaded', 'simd'];
