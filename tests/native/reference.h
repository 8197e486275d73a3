// Plain scalar references the SIMD kernels are checked against.
#ifndef MHA_TESTS_NATIVE_REFERENCE_H_
#define MHA_TESTS_NATIVE_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/kernels/kernels.h"

namespace mha_test {

// n floats uniform in [-1, 1), reproducible from `seed`.
std::vector<float> RandomVector(size_t n, uint32_t seed);

// c (m x n) = a (m x k) * b^T (b is n x k) + bias (n, may be null), in double.
std::vector<float> ReferenceGemm(const std::vector<float>& a, const std::vector<float>& b,
                                 const float* bias, size_t m, size_t n, size_t k);

// softmax(s) in place, in double; NaN everywhere when every entry is -inf.
void ReferenceSoftmax(std::vector<double>* s);

// The attention of one head as the kernel contract describes it, in double:
// out (num_queries x v_dim) and weights (num_queries x num_keys).
void ReferenceAttention(const mha::kernels::AttentionHead& head, std::vector<float>* out,
                        std::vector<float>* weights);

}  // namespace mha_test

#endif  // MHA_TESTS_NATIVE_REFERENCE_H_
