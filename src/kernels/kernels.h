// The dispatched SIMD kernels: the one place that names them. Each call runs
// the best Highway target the CPU supports (natively) or HWY_WASM (WASM).
// Policy (validation, tiling across threads, buffers) lives in the callers.
#ifndef MHA_SRC_KERNELS_KERNELS_H_
#define MHA_SRC_KERNELS_KERNELS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "src/kernels/weight_panel.h"

namespace mha {
namespace kernels {

// ---- GEMM: C = A * B^T + bias, B row-major (n x k) as PyTorch's weights. ----

// Columns per packed panel of B on the current target.
size_t GemmPanelWidth();

// The layout of packed B (weight_panel.h: PackRows, PackBias) with weights
// of `type` and k inputs on the current target.
PanelLayout GemmLayout(WeightType type, size_t k);

// The int8 GEMV (one or two rows) multiplies the weights by the rows
// quantized to int16, per block of this many inputs (scale: the block's
// max |x| / 32767), in int32 sums that cannot overflow within a block
// (256 * 127 * 32767 < 2^31), converted to float at its end.
constexpr size_t kInt8ActivationBlock = 256;

// How GemmTile computes a block of `rows` rows of A with weights of
// `layout`, and the scratch that takes: decided once (PlanGemm), so that the
// scratch a caller sizes from the plan is the scratch the kernel uses.
struct GemmPlan {
  PanelLayout layout;
  size_t rows = 0;       // rows of A in the block
  size_t tile_rows = 0;  // the register tile's rows, one of kGemmTileRows
  // The last gemv_rows rows (0, 1 or 2: a decoding step's tokens, a tail)
  // run the GEMV kernels; the rows before them the register tiles (a tail of
  // three or four rows the 4-row tile, which computes no rows that are
  // thrown away).
  size_t gemv_rows = 0;
  // Floats of scratch: at 0, 16-bit and int8 panels widened to float32 for
  // the tiles (k * width for each panel a tile reads, none without tiles or
  // for float32 weights); at quantized_offset, int8's GEMV rows quantized to
  // int16 (gemv-inl.h's QuantizeRow), quantized_size floats each.
  size_t quantized_offset = 0;
  size_t quantized_size = 0;
  size_t scratch = 0;

  size_t tiled_rows() const { return rows - gemv_rows; }
};

// The plan for `rows` rows of A with weights of `layout` (from GemmLayout on
// the same target) under the tile GemmTileRows() says.
GemmPlan PlanGemm(const PanelLayout& layout, size_t rows);

// Computes rows [row_begin, row_begin + plan.rows) and columns [col_begin,
// col_end) of C (row stride ldc) = A (row stride lda) * B^T + bias, B
// (n x plan.layout.k) packed with plan.layout. col_begin must be a multiple
// of the layout's width. Weights are converted in registers (16-bit:
// exactly, so the results are those of their float32 values bit for bit;
// int8: times their column's scale; the GEMV's rows quantized, above);
// `scratch` has plan.scratch floats (may be null when that is 0).
void GemmTile(const GemmPlan& plan, const float* a, size_t lda, const uint8_t* packed, size_t n,
              float* c, size_t ldc, size_t row_begin, size_t col_begin, size_t col_end,
              float* scratch);

// A typed micro-kernel with GemmTile's arguments (gemm-inl.h's GemmKernel).
using GemmTileFn = void (*)(const GemmPlan& plan, const float* a, size_t lda,
                            const uint8_t* packed, size_t n, float* c, size_t ldc,
                            size_t row_begin, size_t col_begin, size_t col_end, float* scratch);

// The GEMM register tiles every target compiles, by rows of A: f32_gemm_2x4v
// (over two adjacent packed panels), 4x2v, 6x2v, 8x2v (over one): rows of A
// x vectors of columns.
constexpr size_t kGemmTileRows[] = {2, 4, 6, 8};

// Rows of the tile PlanGemm plans: the one chosen for this CPU and target
// (kernels.cc), unless SetGemmTileRows forced another.
size_t GemmTileRows();

// Forces PlanGemm to the tile of tile_rows rows (one of kGemmTileRows), or
// with 0 back to the chosen one. For tests and benchmarks; takes effect for
// the plans made after it.
void SetGemmTileRows(size_t tile_rows);

// "2x4v", "4x2v", "6x2v" or "8x2v" for one of kGemmTileRows.
const char* GemmTileName(size_t tile_rows);

// ---- Attention for one (batch, head): softmax(Q K^T * scale + masks) V. ----

// A side of a sliding window without bound.
constexpr size_t kNoWindow = SIZE_MAX;

// Keys [begin, end).
struct KeyRange {
  size_t begin = 0, end = 0;
};

// Key padding's ends, for ScoreRule::live_from and live_to (keys + 1 entries
// each, x <= keys): from[x] is the first key j >= x that key_bias leaves
// (key_bias[j] > -inf), else keys; to[x] is one past the last such key
// j < x, else 0.
inline void LiveKeys(const float* key_bias, size_t keys, size_t* from, size_t* to) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  to[0] = 0;
  for (size_t x = 0; x < keys; ++x) to[x + 1] = key_bias[x] == neg_inf ? to[x] : x + 1;
  from[keys] = keys;
  for (size_t x = keys; x-- > 0;) from[x] = key_bias[x] == neg_inf ? from[x + 1] : x;
}

// Whether key_bias adds anything to the keys between its live ends, [from[0],
// to[keys]) of its LiveKeys. Where it holds only 0 there (key padding at the
// ends alone, as a bool mask makes it), live_from and live_to say all it
// does: a score plus 0 is the score (but for the sign of a -0 score, which no
// exponential or max of the softmax tells apart), so the rule may leave the
// bias out and the kernels skip its add per key.
inline bool BiasBetweenLiveKeys(const float* key_bias, const size_t* from, const size_t* to,
                                size_t keys) {
  for (size_t j = from[0]; j < to[keys]; ++j) {
    if (key_bias[j] != 0.0f) return true;
  }
  return false;
}

// Which keys a query may see, and with what additive bias: the one rule the
// flash kernel's score tiles, its weights path and the decode kernel all
// apply (ApplyScoreRule, score_rule-inl.h). It covers the first masked_keys
// keys of a head; extra keys (bias_k, zero attention) are never masked.
struct ScoreRule {
  // Optional additive masks, -inf masks out: key_bias has one float per key,
  // shared by every query; query i's row of mask starts at mask + i * mask_stride.
  const float* key_bias = nullptr;
  const float* mask = nullptr;
  size_t mask_stride = 0;
  // Causal: query i sits at position i + causal_offset (after a cache of
  // causal_offset keys) and may not see keys after it.
  bool causal = false;
  size_t causal_offset = 0;
  // Soft-capping (Gemma 2): each score s (scale included) becomes
  // softcap * tanh(s / softcap) before any bias or mask; 0: off. It covers
  // every key, the extra ones too.
  float softcap = 0.0f;
  // Sliding window: query i sees keys Position(i) - window_left <= j <=
  // Position(i) + window_right (kNoWindow: no bound on that side).
  size_t window_left = kNoWindow, window_right = kNoWindow;
  // A sink (gpt-oss): the logit e^sink joins the softmax's denominator, so
  // the weights sum to less than 1; -inf: none. A row with no key to attend
  // stays NaN.
  float sink = -std::numeric_limits<float>::infinity();
  // ALiBi: each score gains alibi_slope * (j - Position(i)), or with
  // alibi_symmetric -alibi_slope * |j - Position(i)| (jina-bert-v2); 0: none.
  float alibi_slope = 0.0f;
  bool alibi_symmetric = false;

  // With key padding, its LiveKeys: a query never reads the padded keys at
  // either end of the keys it may see; those between are masked as usual
  // (key_bias; left out where BiasBetweenLiveKeys says it adds nothing).
  const size_t* live_from = nullptr;
  const size_t* live_to = nullptr;

  size_t Position(size_t i) const { return i + causal_offset; }
  // Query i may see keys [Start(i), Horizon(i)) at most (Horizon SIZE_MAX:
  // every key from Start(i) on). Both grow by one from a query to the next.
  size_t Start(size_t i) const {
    return window_left == kNoWindow || Position(i) < window_left ? 0 : Position(i) - window_left;
  }
  size_t Horizon(size_t i) const {
    const size_t causal_end = causal ? Position(i) + 1 : SIZE_MAX;
    if (window_right == kNoWindow) return causal_end;
    const size_t window_end = Position(i) + window_right + 1;
    return window_end < causal_end ? window_end : causal_end;
  }
  // The keys of the first `keys` (the head's masked_keys) that query i
  // reads: [Start(i), Horizon(i)) without the key padding at either end.
  // The one answer every path (the flash kernel, its weights path, the
  // decode kernel and its split) follows, so that a NaN outside it never
  // reaches the row and one inside it does (docs/design.md, "Semantics (the
  // contract)"). Empty: begin == end. Both ends grow with i.
  KeyRange Keys(size_t i, size_t keys) const {
    size_t begin = std::min(Start(i), keys), end = std::min(Horizon(i), keys);
    if (live_from != nullptr) {
      begin = live_from[begin];
      end = live_to[end];
    }
    return {std::min(begin, end), end};
  }
  // The rule of query i alone, as query 0 (the decode kernel's rows).
  ScoreRule Row(size_t i) const {
    ScoreRule r = *this;
    if (mask != nullptr) r.mask = mask + i * mask_stride;
    r.causal_offset += i;
    return r;
  }
};

// The row of key j in a ring of `ring` rows (a rolling cache's); 0: row j.
inline size_t RingRow(size_t j, size_t ring) { return ring == 0 ? j : j % ring; }

// Whether keys [j0, j0 + count) are consecutive rows (they do not cross the
// ring's end).
inline bool RingRun(size_t j0, size_t count, size_t ring) {
  return ring == 0 || j0 % ring + count <= ring;
}
// How keys and values are stored: floats, or 16-bit IEEE half or bfloat16
// (the upper half of a float32) that the kernels widen as they read them.
enum class Storage : uint8_t { kFloat32, kFloat16, kBFloat16 };

struct AttentionHead {
  const float* q = nullptr;  // num_queries rows of qk_dim, row stride q_stride
  size_t q_stride = 0;
  const float* k = nullptr;  // masked_keys rows of qk_dim
  size_t k_stride = 0;
  const float* v = nullptr;  // masked_keys rows of v_dim
  size_t v_stride = 0;
  // Keys after the first masked_keys (bias_k, zero attention): contiguous
  // rows, never masked.
  const float* extra_k = nullptr;
  const float* extra_v = nullptr;
  size_t num_extra = 0;
  float* out = nullptr;      // num_queries rows of v_dim
  size_t out_stride = 0;
  size_t num_queries = 0;
  size_t masked_keys = 0;
  size_t qk_dim = 0;
  size_t v_dim = 0;
  float scale = 1.0f;
  ScoreRule rule;  // over the first masked_keys keys
  // When set, the softmax probabilities (num_queries x num_keys()) are written
  // here and the L x S scores are materialised; otherwise flash-style.
  float* weights = nullptr;
  size_t weights_stride = 0;

  // Instead of k and v when storage is not kFloat32: 16-bit rows (strides
  // in elements), a float16 or bfloat16 KV cache's. The decode kernel
  // converts each sub-block and Attention each key tile as it reads them.
  Storage storage = Storage::kFloat32;
  const uint16_t* k16 = nullptr;
  const uint16_t* v16 = nullptr;
  // Key (and value) j of the masked ones is row RingRow(j, ring) (a rolling
  // cache keeps the last keys in a ring; the rule still counts positions).
  size_t ring = 0;

  size_t num_keys() const { return masked_keys + num_extra; }
};

// Floats of per-thread scratch that Attention needs for this head.
size_t AttentionScratchSize(const AttentionHead& head);

// Computes output rows [q_begin, q_end) (and their weights). A query with no
// unmasked key gets NaN output (and NaN weights), as softmax over -inf does.
void Attention(const AttentionHead& head, size_t q_begin, size_t q_end, float* scratch);

// ---- Decoding: few query rows against many keys (decode_attention-inl.h). ----

// Rows one decode group holds: query rows times the query heads that share
// one key/value head (e.g. 1 token x 4 heads of a group).
constexpr size_t kMaxDecodeRows = 16;

// Query rows that read the same keys and values.
struct DecodeGroup {
  size_t num_rows = 0;
  const float* q[kMaxDecodeRows];      // qk_dim floats each
  float* out[kMaxDecodeRows];          // v_dim floats each
  ScoreRule rule[kMaxDecodeRows];      // each row's, as its query 0 (ScoreRule::Row)
  const void* k = nullptr;             // num_keys rows, k_stride elements apart
  const void* v = nullptr;             // num_keys rows, v_stride elements apart
  size_t k_stride = 0, v_stride = 0;
  Storage storage = Storage::kFloat32;  // of k and v: float, else uint16_t
  size_t ring = 0;                     // key j is row RingRow(j, ring)
  size_t num_keys = 0, qk_dim = 0, v_dim = 0;
  size_t first_key = 0;  // no row sees a key before it (a window's left side)
  float scale = 1.0f;
};

// Floats of one range's state (per row: the output accumulator, v_dim padded
// to whole vectors, then the running max and sum) and of per-thread scratch.
size_t DecodeStateSize(const DecodeGroup& group);
size_t DecodeScratchSize(const DecodeGroup& group);

// The partial softmax state of the group's rows over keys [j0, j1).
void DecodePartial(const DecodeGroup& group, size_t j0, size_t j1, float* state, float* scratch);

// Combines `count` states (stride floats apart) of ranges that cover the
// keys and writes each row's output; NaN for a row that attended nothing.
void DecodeMerge(const DecodeGroup& group, const float* states, size_t count, size_t stride);

// ---- Rotary positions (rotary-inl.h). ----

// Rotates the first `dim` (even, <= head_stride) features of each of
// num_heads heads (head_stride floats apart) of one row, in place: pair i,
// features (i, i + dim/2) or, interleaved, (2i, 2i+1), turns by the angle
// whose cosine and sine are cos[i] and sin[i] (dim/2 floats each).
void RotateHeads(float* x, size_t num_heads, size_t head_stride, size_t dim, bool interleaved,
                 const float* cos, const float* sin);

// ---- q/k norms (qk_norm-inl.h). ----

// Normalizes each of `groups` groups of `width` floats of row x in place by
// its own statistics (layer: LayerNorm, (x - mean) / sqrt(var + eps); else
// RMSNorm, x / sqrt(mean(x^2) + eps)), then multiplies feature f by w[f] and,
// when b is not null, adds b[f] (w, b: groups * width floats).
void NormalizeGroups(float* x, size_t groups, size_t width, bool layer, float eps,
                     const float* w, const float* b);

// ---- 16-bit storage: IEEE float16 and bfloat16 (float16-inl.h). ----

// dst[i] = half(src[i]), i < n: nearest even, IEEE infinities and NaN.
void FloatToHalf(const float* src, size_t n, uint16_t* dst);
// dst[i] = float(src[i]), i < n, exact.
void HalfToFloat(const uint16_t* src, size_t n, float* dst);
// The same for bfloat16.
void FloatToBFloat16(const float* src, size_t n, uint16_t* dst);
void BFloat16ToFloat(const uint16_t* src, size_t n, float* dst);

// Name of the target the kernels run on now (e.g. "AVX3", "WASM").
const char* TargetName();

}  // namespace kernels
}  // namespace mha

#endif  // MHA_SRC_KERNELS_KERNELS_H_
