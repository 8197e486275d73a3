// Weights packed into GEMM panels, in the precision they are kept in.
//
// A panel holds `width` (GemmPanelWidth()) columns of B (n x k, PyTorch's
// weight: n output channels of k inputs): k rows of `width` weights of the
// stored type, k-major, padded to 4 bytes; then `width` float32 biases; for
// int8 then `width` float32 scales (one per output channel: the weight is
// q * scale). Columns past n are zero. int8 rows go in pairs (inputs 2p and
// 2p + 1, an odd k padded with a zero row), each column's two weights side
// by side (Int8Offset), so that the GEMV multiplies a pair of weights by a
// pair of activations in one integer dot product (gemv-inl.h). bfloat16
// rows interleave their two halves (BFloat16Slot), so that one 32-bit lane
// holds column i and column width/2 + i: a vector load gives both halves'
// floats by an and and a shift. The kernels (gemm-inl.h, gemv-inl.h)
// read weights of any type in registers; packing and moving columns between
// panels (another width, another matrix's rows) is plain code, here.
#ifndef MHA_SRC_KERNELS_WEIGHT_PANEL_H_
#define MHA_SRC_KERNELS_WEIGHT_PANEL_H_

#include <cstddef>
#include <cstdint>

namespace mha {
namespace kernels {

// How weights are kept: float16 is IEEE half, bfloat16 the top half of a
// float32, int8 symmetric per output channel (q in [-127, 127]).
enum class WeightType : uint8_t { kFloat32, kFloat16, kBFloat16, kInt8 };

size_t WeightTypeBytes(WeightType type);

// Where int8 weight (kk, c) sits in its panel of `width` columns, in bytes.
inline size_t Int8Offset(size_t width, size_t kk, size_t c) {
  return kk / 2 * 2 * width + 2 * c + kk % 2;
}

// Where bfloat16 column c of a row of `width` sits in the row, in elements.
inline size_t BFloat16Slot(size_t width, size_t c) {
  return 2 * (c % (width / 2)) + c / (width / 2);
}

struct PanelLayout {
  WeightType type = WeightType::kFloat32;
  size_t width = 0;  // columns per panel
  size_t k = 0;      // inputs: rows of a panel

  size_t WeightBytes() const;  // the k rows, padded
  size_t BiasOffset() const { return WeightBytes(); }
  size_t ScaleOffset() const { return BiasOffset() + width * sizeof(float); }
  size_t PanelBytes() const;   // a multiple of 4
  size_t Bytes(size_t n) const { return (n + width - 1) / width * PanelBytes(); }
};

// Writes rows [row0, row0 + rows) of B (row r of k floats at b + r * ldb)
// into `packed` (Bytes(n) bytes, n >= row0 + rows), converted to the layout's
// type: float16 and bfloat16 round to nearest even (Inf and NaN kept); int8
// quantizes each row with scale max|w| / 127 (0 for a zero row). Weights
// must be finite for int8.
void PackRows(const PanelLayout& layout, const float* b, size_t ldb, size_t row0, size_t rows,
              uint8_t* packed);

// Writes biases of columns [col0, col0 + count) (null: zeros).
void PackBias(const PanelLayout& layout, const float* bias, size_t col0, size_t count,
              uint8_t* packed);

// Copies columns [src_col, src_col + cols) of one packed B (weights, bias,
// scale: exactly) to columns from dst_col of another of the same type and k,
// whatever the widths.
void CopyColumns(const PanelLayout& from, const uint8_t* src, size_t src_col,
                 const PanelLayout& to, uint8_t* dst, size_t dst_col, size_t cols);

}  // namespace kernels
}  // namespace mha

#endif  // MHA_SRC_KERNELS_WEIGHT_PANEL_H_
