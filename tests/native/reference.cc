#include "tests/native/reference.h"

#include <cmath>
#include <limits>
#include <random>

namespace mha_test {

std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> ReferenceGemm(const std::vector<float>& a, const std::vector<float>& b,
                                 const float* bias, size_t m, size_t n, size_t k) {
  std::vector<float> c(m * n);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double sum = bias != nullptr ? bias[j] : 0.0;
      for (size_t kk = 0; kk < k; ++kk) sum += double(a[i * k + kk]) * b[j * k + kk];
      c[i * n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

void ReferenceSoftmax(std::vector<double>* s) {
  double max = -std::numeric_limits<double>::infinity();
  for (double x : *s) max = x > max ? x : max;
  double sum = 0.0;
  for (double& x : *s) sum += (x = std::exp(x - max));
  for (double& x : *s) x = max == -std::numeric_limits<double>::infinity() ? std::nan("") : x / sum;
}

void ReferenceAttention(const mha::kernels::AttentionHead& h, std::vector<float>* out,
                        std::vector<float>* weights) {
  const size_t keys = h.num_keys();
  const double neg_inf = -std::numeric_limits<double>::infinity();
  out->assign(h.num_queries * h.v_dim, 0.0f);
  weights->assign(h.num_queries * keys, 0.0f);
  std::vector<double> s(keys);
  for (size_t i = 0; i < h.num_queries; ++i) {
    for (size_t j = 0; j < keys; ++j) {
      const float* k = j < h.masked_keys ? h.k + j * h.k_stride
                                         : h.extra_k + (j - h.masked_keys) * h.qk_dim;
      double dot = 0.0;
      for (size_t d = 0; d < h.qk_dim; ++d) dot += double(h.q[i * h.q_stride + d]) * k[d];
      s[j] = dot * h.scale;
      if (j < h.masked_keys) {
        const mha::kernels::ScoreRule& r = h.rule;
        if (r.mask != nullptr) s[j] += r.mask[i * r.mask_stride + j];
        if (r.key_bias != nullptr) s[j] += r.key_bias[j];
        if (r.causal && j > i + r.causal_offset) s[j] = neg_inf;
      }
    }
    ReferenceSoftmax(&s);
    for (size_t j = 0; j < keys; ++j) {
      const double p = s[j];
      (*weights)[i * keys + j] = static_cast<float>(p);
      const float* v = j < h.masked_keys ? h.v + j * h.v_stride
                                         : h.extra_v + (j - h.masked_keys) * h.v_dim;
      for (size_t e = 0; e < h.v_dim; ++e) (*out)[i * h.v_dim + e] += static_cast<float>(p * v[e]);
    }
  }
}

}  // namespace mha_test
