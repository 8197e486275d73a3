// The import the relaxed-SIMD build's kernels call for a fused multiply-add
// (src/kernels/mul_add-inl.h). scripts/relax_wasm.mjs replaces it in the
// linked .wasm by f32x4.relaxed_madd; this JS body only runs if that step was
// skipped, and says so.
mergeInto(LibraryManager.library, {
  mha_relaxed_madd: function() {
    throw new Error('mha-wasm: this relaxed-SIMD build was not post-processed by scripts/relax_wasm.mjs');
  },
});
