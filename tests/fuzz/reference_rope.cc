#include "tests/fuzz/reference_rope.h"

#include <algorithm>
#include <cmath>

namespace mha_fuzz {
namespace {

constexpr double kTwoPi = 6.283185307179586476925;

// m(f, s) = 0.1 s ln f + 1, 1 for f <= 1.
double M(double f, double s) { return f <= 1 ? 1.0 : 0.1 * s * std::log(f) + 1; }

}  // namespace

std::vector<double> ReferenceInvFreq(const mha::RotaryConfig& r, double* attention) {
  const size_t d = static_cast<size_t>(r.dim);
  *attention = r.attention_factor.value_or(1.0);
  if (!r.inv_freq.empty()) return std::vector<double>(r.inv_freq.begin(), r.inv_freq.end());
  const double b = r.base.value_or(10000.0);
  const mha::RopeScaling& s = r.scaling;
  std::vector<double> inv(d / 2);
  // YaRN's ramp over the pairs: c(n) = d ln(L0 / (2 pi n)) / (2 ln b).
  double low = 0, high = 0;
  if (s.type == "yarn") {
    const double f = *s.factor, context = *s.original_max_position_embeddings;
    auto c = [&](double n) { return d * std::log(context / (kTwoPi * n)) / (2 * std::log(b)); };
    low = c(s.beta_fast.value_or(32));
    high = c(s.beta_slow.value_or(1));
    if (s.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, double(d) - 1);
    if (low == high) high += 0.001;
    *attention = s.attention_factor ? *s.attention_factor
                 : s.mscale.value_or(0) != 0 && s.mscale_all_dim.value_or(0) != 0
                     ? M(f, *s.mscale) / M(f, *s.mscale_all_dim)
                     : M(f, 1);
  }
  for (size_t i = 0; i < d / 2; ++i) {
    const double plain = std::pow(b, -2.0 * double(i) / double(d));
    double& x = inv[i];
    x = plain;
    if (s.type == "linear") x = plain / *s.factor;
    if (s.type == "llama3") {
      const double lo = *s.low_freq_factor, hi = *s.high_freq_factor;
      const double context = *s.original_max_position_embeddings, w = kTwoPi / plain;
      if (w > context / lo) {
        x = plain / *s.factor;
      } else if (w >= context / hi) {
        const double t = (context / w - lo) / (hi - lo);
        x = (1 - t) * plain / *s.factor + t * plain;
      }
    }
    if (s.type == "yarn") {
      const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      x = plain / *s.factor * ramp + plain * (1 - ramp);
    }
  }
  return inv;
}

}  // namespace mha_fuzz
