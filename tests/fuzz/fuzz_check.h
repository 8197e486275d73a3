// Helpers of the forward fuzz case: fuzzed shapes and buffers, and comparing
// a result with the reference.
#ifndef MHA_TESTS_FUZZ_FUZZ_CHECK_H_
#define MHA_TESTS_FUZZ_FUZZ_CHECK_H_

#include <string>
#include <vector>

#include "src/multihead_attention.h"
#include "src/tensor.h"
#include "tests/fuzz/fuzz_input.h"

namespace mha_fuzz {

// `shape`, or now and then a wrong one: a dim replaced (possibly negative),
// a dim dropped or one added.
mha::Shape MaybeBreak(FuzzInput& in, mha::Shape shape);

// Elements a buffer for `shape` needs (negative dims count as 0).
size_t BufferSize(const mha::Shape& shape);

// A fuzzed float tensor of `shape`; `values` keeps the data alive.
mha::TensorView FuzzTensor(FuzzInput& in, const mha::Shape& shape, bool specials,
                           std::vector<float>* values);

// q/k norms now and then (a quarter of the draws): RMS or Layer, over each
// head or the whole projection, Gemma 3's weight offset 1 or none.
void FuzzQkNorm(FuzzInput& in, mha::QkNormConfig* norm);

// A fuzzed mask of `kind` 0 (none), 1 (bool) or 2 (float); `bytes`/`floats` keep its data.
mha::MaskView FuzzMask(FuzzInput& in, int kind, const mha::Shape& shape, bool specials,
                       std::vector<uint8_t>* bytes, std::vector<float>* floats);

// True when every value is finite and of moderate size (float masks may
// also hold -inf): the reference is then comparable to float32 math.
bool Tame(const std::vector<float>& values, bool allow_neg_inf = false);

// "" when `actual` has `expected`'s shape, NaN exactly where it has, and
// |a - e| <= slack * (1e-4 * scale + 1e-3 * |e|) elsewhere (scale: max(1, max |e|)).
std::string Compare(const mha::Tensor& actual, const mha::Tensor& expected, const std::string& what,
                    double slack = 1.0);

}  // namespace mha_fuzz

#endif  // MHA_TESTS_FUZZ_FUZZ_CHECK_H_
