#include "src/attention/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace mha {
namespace {

constexpr double kPi = 3.14159265358979323846;

Status Positive(const std::string& name, double value) {
  if (std::isfinite(value) && value > 0.0) return Status::Ok();
  return Status::InvalidArgument(name + ": expected a positive finite number, got " +
                                 std::to_string(value));
}

// A field of rope_scaling: positive and finite; required by the kind unless
// it has a fallback.
Status Field(const RopeScaling& s, const std::optional<double>& value, const char* field,
             std::optional<double> fallback, double* out) {
  const std::string name = std::string("rotary.scaling.") + field;
  if (!value && !fallback) {
    return Status::InvalidArgument(name + ": required by rope_type '" + s.type + "'");
  }
  *out = value.value_or(*fallback);
  return Positive(name, *out);
}

// _compute_llama3_parameters: long wavelengths slowed by factor, short ones
// kept, those between blended.
Status Llama3(const RopeScaling& s, std::vector<double>* inv_freq) {
  double factor, lo, hi, context;
  MHA_RETURN_IF_ERROR(Field(s, s.factor, "factor", std::nullopt, &factor));
  MHA_RETURN_IF_ERROR(Field(s, s.low_freq_factor, "low_freq_factor", std::nullopt, &lo));
  MHA_RETURN_IF_ERROR(Field(s, s.high_freq_factor, "high_freq_factor", std::nullopt, &hi));
  MHA_RETURN_IF_ERROR(Field(s, s.original_max_position_embeddings,
                            "original_max_position_embeddings", std::nullopt, &context));
  if (!(hi > lo)) {
    return Status::InvalidArgument("rotary.scaling.high_freq_factor: expected a number above "
                                   "low_freq_factor, got " + std::to_string(hi));
  }
  const double low_freq_wavelen = context / lo, high_freq_wavelen = context / hi;
  for (double& f : *inv_freq) {
    const double wavelen = 2 * kPi / f;
    const double llama = wavelen > low_freq_wavelen ? f / factor : f;
    const double smooth = (context / wavelen - lo) / (hi - lo);
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? (1 - smooth) * llama / factor + smooth * llama : llama;
  }
  return Status::Ok();
}

// get_mscale of _compute_yarn_parameters.
double Mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// _compute_yarn_parameters: the attention factor, then a ramp over the pairs
// from extrapolated (fast) to interpolated (slow) frequencies.
Status Yarn(const RopeScaling& s, size_t dim, double base, RotaryFrequencies* table) {
  double factor, context, beta_fast, beta_slow;
  MHA_RETURN_IF_ERROR(Field(s, s.factor, "factor", std::nullopt, &factor));
  MHA_RETURN_IF_ERROR(Field(s, s.original_max_position_embeddings,
                            "original_max_position_embeddings", std::nullopt, &context));
  MHA_RETURN_IF_ERROR(Field(s, s.beta_fast, "beta_fast", 32.0, &beta_fast));
  MHA_RETURN_IF_ERROR(Field(s, s.beta_slow, "beta_slow", 1.0, &beta_slow));
  for (const auto& [value, name] : {std::make_pair(&s.mscale, "mscale"),
                                    std::make_pair(&s.mscale_all_dim, "mscale_all_dim")}) {
    if (*value && !std::isfinite(**value)) {
      return Status::InvalidArgument(std::string("rotary.scaling.") + name +
                                     ": expected a finite number, got " +
                                     std::to_string(**value));
    }
  }
  double& a = table->attention_factor;
  if (s.attention_factor) {
    MHA_RETURN_IF_ERROR(Field(s, s.attention_factor, "attention_factor", std::nullopt, &a));
  } else if (s.mscale.value_or(0) != 0 && s.mscale_all_dim.value_or(0) != 0) {
    a = Mscale(factor, *s.mscale) / Mscale(factor, *s.mscale_all_dim);
    if (!(std::isfinite(a) && a > 0)) {
      return Status::InvalidArgument("rotary.scaling.mscale_all_dim: the attention factor "
                                     "mscale and mscale_all_dim give is not a positive finite "
                                     "number, got " + std::to_string(a));
    }
  } else {
    a = Mscale(factor, 1.0);
  }
  const double d = static_cast<double>(dim);
  auto correction_dim = [&](double rotations) {
    return d * std::log(context / (rotations * 2 * kPi)) / (2 * std::log(base));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (!(std::isfinite(low) && std::isfinite(high))) {
    return Status::InvalidArgument("rotary.base: YaRN needs a base other than 1, got " +
                                   std::to_string(base));
  }
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, d - 1);
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
  for (size_t i = 0; i < dim / 2; ++i) {
    const double pos_freq = std::pow(base, 2.0 * static_cast<double>(i) / d);
    const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (factor * pos_freq);
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = 1 - ramp;
    table->inv_freq[i] =
        interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return Status::Ok();
}

}  // namespace

Status RotaryTable(size_t dim, std::optional<double> base, const RopeScaling& scaling,
                   const std::vector<float>& inv_freq, std::optional<double> attention_factor,
                   RotaryFrequencies* out) {
  if (!inv_freq.empty()) {
    for (const auto& [given, name] : {std::make_pair(base.has_value(), "base"),
                                      std::make_pair(scaling.given(), "scaling")}) {
      if (given) {
        return Status::InvalidArgument(std::string("rotary.inv_freq: cannot be combined with "
                                                   "rotary.") + name);
      }
    }
    if (inv_freq.size() != dim / 2 ||
        !std::all_of(inv_freq.begin(), inv_freq.end(), [](float f) { return std::isfinite(f); })) {
      return Status::InvalidArgument("rotary.inv_freq: expected dim / 2 (" +
                                     std::to_string(dim / 2) + ") finite entries, got " +
                                     std::to_string(inv_freq.size()));
    }
  }
  if (base) MHA_RETURN_IF_ERROR(Positive("rotary.base", *base));
  if (attention_factor) {
    if (scaling.given()) {
      return Status::InvalidArgument("rotary.attention_factor: cannot be combined with "
                                     "rotary.scaling (YaRN's is its attention_factor)");
    }
    MHA_RETURN_IF_ERROR(Positive("rotary.attention_factor", *attention_factor));
  }
  RotaryFrequencies table;
  table.attention_factor = attention_factor.value_or(1.0);
  if (!inv_freq.empty()) {
    table.inv_freq.assign(inv_freq.begin(), inv_freq.end());
    *out = std::move(table);
    return Status::Ok();
  }
  // _compute_default_rope_parameters: 1 / base^(2i / dim).
  const double b = base.value_or(10000.0);
  for (size_t i = 0; i < dim / 2; ++i) {
    table.inv_freq.push_back(1.0 / std::pow(b, 2.0 * static_cast<double>(i) /
                                                   static_cast<double>(dim)));
  }
  const std::string& type = scaling.type;
  if (type == "linear") {
    double factor;
    MHA_RETURN_IF_ERROR(Field(scaling, scaling.factor, "factor", std::nullopt, &factor));
    for (double& f : table.inv_freq) f /= factor;
  } else if (type == "llama3") {
    MHA_RETURN_IF_ERROR(Llama3(scaling, &table.inv_freq));
  } else if (type == "yarn") {
    MHA_RETURN_IF_ERROR(Yarn(scaling, dim, b, &table));
  } else if (!type.empty() && type != "default") {
    return Status::InvalidArgument("rotary.scaling: rope_type '" + type + "' is not supported "
                                   "(expected default, linear, llama3 or yarn; any other table: "
                                   "rotary.inv_freq and rotary.attention_factor, as transformers "
                                   "computes them)");
  }
  *out = std::move(table);
  return Status::Ok();
}

}  // namespace mha
