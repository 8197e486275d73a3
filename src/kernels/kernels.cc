// Compiles the -inl.h kernels once per Highway target and dispatches to the
// best one the CPU supports.
#include "src/kernels/kernels.h"

#include <atomic>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernels/kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "src/kernels/decode_attention-inl.h"
#include "src/kernels/flash_attention-inl.h"
#include "src/kernels/float16-inl.h"
#include "src/kernels/gemm-inl.h"
#include "src/kernels/qk_norm-inl.h"
#include "src/kernels/rotary-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {

inline const char* CurrentTargetName() { return hwy::TargetName(HWY_TARGET); }

#if HWY_TARGET == HWY_WASM
// True when the WebAssembly host is x86: its default NaN (inf - inf) has the
// sign bit set, ARM's has not (XNNPACK tells the hosts apart the same way).
inline bool WasmHostIsX86() {
  static const bool x86 = [] {
    volatile float inf = std::numeric_limits<float>::infinity();
    return std::signbit(inf - inf);
  }();
  return x86;
}
#endif

// The GEMM register tile for this target and CPU: the one place that chooses
// it. Accumulators (2 per row), two B vectors and a broadcast must fit the
// registers: 8 rows need 32 (AVX-512, NEON, SVE; 16 accumulators also cover 4
// FMA pipes of latency 4, as on Apple cores); 16-register x86 takes 6 rows
// natively (12 accumulators hide FMA latency 4 x 2 pipes; 8 rows spill).
// V8 on x64 keeps one of the 16 xmm registers as scratch and needs another
// for the product of mul+add (no FMA), so WebAssembly on x86 hosts gets 8
// accumulators: V8 spills more (bench/native/gemm_tiles.cc times them). Of
// the two 8-accumulator tiles, 2x4v (over two panels) rather than 4x2v: V8
// and SpiderMonkey run both at about the same speed, and JavaScriptCore,
// which builds a broadcast from memory at an offset in three instructions,
// runs 2x4v faster (half the broadcasts per multiply-add). There the tiles
// stay below the mul+add peak by about what their loads cost: each k step
// is 16 mul/add and 6 loads, and where vector loads share the FP side's
// issue slots they take their share of it.
inline size_t PreferredGemmTileRows() {
#if HWY_TARGET == HWY_WASM
  return WasmHostIsX86() ? 2 : 8;
#elif HWY_ARCH_X86 && HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL
  return 6;
#else
  return 8;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mha {
namespace kernels {

HWY_EXPORT(GemmPanelWidth);
HWY_EXPORT(PlanGemm);
HWY_EXPORT(GemmKernel);
HWY_EXPORT(PreferredGemmTileRows);
HWY_EXPORT(AttentionScratchSize);
HWY_EXPORT(Attention);
HWY_EXPORT(DecodeStateSize);
HWY_EXPORT(DecodeScratchSize);
HWY_EXPORT(DecodePartial);
HWY_EXPORT(DecodeMerge);
HWY_EXPORT(RotateHeads);
HWY_EXPORT(NormalizeGroups);
HWY_EXPORT(FloatToHalf);
HWY_EXPORT(HalfToFloat);
HWY_EXPORT(FloatToBFloat16);
HWY_EXPORT(BFloat16ToFloat);
HWY_EXPORT(CurrentTargetName);

size_t GemmPanelWidth() { return HWY_DYNAMIC_DISPATCH(GemmPanelWidth)(); }

PanelLayout GemmLayout(WeightType type, size_t k) { return {type, GemmPanelWidth(), k}; }

namespace {
std::atomic<size_t> g_forced_tile_rows{0};
}  // namespace

size_t GemmTileRows() {
  const size_t forced = g_forced_tile_rows.load(std::memory_order_relaxed);
  return forced != 0 ? forced : HWY_DYNAMIC_DISPATCH(PreferredGemmTileRows)();
}

void SetGemmTileRows(size_t tile_rows) {
  g_forced_tile_rows.store(tile_rows, std::memory_order_relaxed);
}

const char* GemmTileName(size_t tile_rows) {
  switch (tile_rows) {
    case 2: return "2x4v";
    case 4: return "4x2v";
    case 6: return "6x2v";
    default: return "8x2v";
  }
}

GemmPlan PlanGemm(const PanelLayout& layout, size_t rows) {
  return HWY_DYNAMIC_DISPATCH(PlanGemm)(layout, rows, GemmTileRows());
}

void GemmTile(const GemmPlan& plan, const float* a, size_t lda, const uint8_t* packed, size_t n,
              float* c, size_t ldc, size_t row_begin, size_t col_begin, size_t col_end,
              float* scratch) {
  const GemmTileFn kernel = HWY_DYNAMIC_DISPATCH(GemmKernel)(plan.layout.type, plan.tile_rows);
  kernel(plan, a, lda, packed, n, c, ldc, row_begin, col_begin, col_end, scratch);
}

size_t AttentionScratchSize(const AttentionHead& head) {
  return HWY_DYNAMIC_DISPATCH(AttentionScratchSize)(head);
}

void Attention(const AttentionHead& head, size_t q_begin, size_t q_end, float* scratch) {
  HWY_DYNAMIC_DISPATCH(Attention)(head, q_begin, q_end, scratch);
}

size_t DecodeStateSize(const DecodeGroup& group) {
  return HWY_DYNAMIC_DISPATCH(DecodeStateSize)(group);
}

size_t DecodeScratchSize(const DecodeGroup& group) {
  return HWY_DYNAMIC_DISPATCH(DecodeScratchSize)(group);
}

void DecodePartial(const DecodeGroup& group, size_t j0, size_t j1, float* state, float* scratch) {
  HWY_DYNAMIC_DISPATCH(DecodePartial)(group, j0, j1, state, scratch);
}

void DecodeMerge(const DecodeGroup& group, const float* states, size_t count, size_t stride) {
  HWY_DYNAMIC_DISPATCH(DecodeMerge)(group, states, count, stride);
}

void RotateHeads(float* x, size_t num_heads, size_t head_stride, size_t dim, bool interleaved,
                 const float* cos, const float* sin) {
  HWY_DYNAMIC_DISPATCH(RotateHeads)(x, num_heads, head_stride, dim, interleaved, cos, sin);
}

void NormalizeGroups(float* x, size_t groups, size_t width, bool layer, float eps,
                     const float* w, const float* b) {
  HWY_DYNAMIC_DISPATCH(NormalizeGroups)(x, groups, width, layer, eps, w, b);
}

void FloatToHalf(const float* src, size_t n, uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(FloatToHalf)(src, n, dst);
}

void HalfToFloat(const uint16_t* src, size_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(HalfToFloat)(src, n, dst);
}

void FloatToBFloat16(const float* src, size_t n, uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(FloatToBFloat16)(src, n, dst);
}

void BFloat16ToFloat(const uint16_t* src, size_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(BFloat16ToFloat)(src, n, dst);
}

const char* TargetName() { return HWY_DYNAMIC_DISPATCH(CurrentTargetName)(); }

}  // namespace kernels
}  // namespace mha
#endif  // HWY_ONCE
