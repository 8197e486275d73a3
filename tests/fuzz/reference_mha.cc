#include "tests/fuzz/reference_mha.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/fuzz/reference_rope.h"

namespace mha_fuzz {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Element `i` of a mask as an additive score term; `masked_if` is the bool
// value that masks (true for MHA, false for SDPA).
double MaskTerm(const mha::MaskView& m, size_t i, bool masked_if) {
  if (m.kind == mha::MaskKind::kFloat) return m.float_data[i];
  return (m.bool_data[i] != 0) == masked_if ? kNegInf : 0.0;
}

// softmax over `s` in place; a row of only -inf becomes NaN, as in PyTorch.
// A sink logit joins the denominator (it does not rescue such a row).
void Softmax(std::vector<double>* s, double sink = kNegInf) {
  double max = kNegInf;
  for (double x : *s) max = x > max ? x : max;
  double sum = max == kNegInf ? 0.0 : std::exp(sink - max);
  for (double& x : *s) sum += (x = std::exp(x - max));
  for (double& x : *s) x /= sum;
}

// The score options of today's models on score s of query position `pos` and
// key j, after the scale (docs/design.md's order: softcap, then ALiBi; the window
// is a mask: Hidden, with the others).
double SoftcapAlibi(double s, double softcap, double slope, bool symmetric, size_t pos, size_t j) {
  if (softcap != 0.0) s = softcap * std::tanh(s / softcap);
  const double rel = double(j) - double(pos);
  return s + (symmetric ? -slope * std::abs(rel) : slope * rel);
}

// Whether causality or the window hides key j from the query at `pos`.
bool Hidden(bool causal, const mha::WindowConfig& w, size_t pos, size_t j) {
  const double rel = double(j) - double(pos);
  return (causal && rel > 0) || (w.left >= 0 && rel < -double(w.left)) ||
         (w.right >= 0 && rel > double(w.right));
}

// Rows of x (row-major, `in` features) times W^T (out x in) + b.
std::vector<double> Project(const std::vector<double>& x, size_t rows, size_t in,
                            const float* w, const float* b, size_t out) {
  std::vector<double> y(rows * out);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t o = 0; o < out; ++o) {
      double acc = b != nullptr ? b[o] : 0.0;
      for (size_t e = 0; e < in; ++e) acc += double(w[o * in + e]) * x[r * in + e];
      y[r * out + o] = acc;
    }
  }
  return y;
}

// Input (seq, N, F) / (N, seq, F) / (seq, F) gathered as rows n * seq + t.
std::vector<double> Gather(const mha::TensorView& t, size_t seq, size_t n_batch, size_t f,
                           bool batch_first) {
  std::vector<double> rows(n_batch * seq * f);
  for (size_t n = 0; n < n_batch; ++n) {
    for (size_t s = 0; s < seq; ++s) {
      const size_t src = batch_first ? n * seq + s : s * n_batch + n;
      for (size_t e = 0; e < f; ++e) rows[(n * seq + s) * f + e] = t.data[src * f + e];
    }
  }
  return rows;
}

// Turns the first rotary.dim features of each `heads`-head row of x (rows
// n * seq + t at position first + t, or positions[n * seq + t] when given)
// by position * inv_i, cos and sin times the attention factor
// (reference_rope.cc).
void Rotate(const mha::RotaryConfig& r, size_t seq, size_t first, const int32_t* positions,
            size_t heads, size_t head_dim, std::vector<double>* x) {
  if (!r.enabled) return;
  double attention;
  const std::vector<double> inv = ReferenceInvFreq(r, &attention);
  const size_t half = inv.size(), width = heads * head_dim;
  for (size_t row = 0; row < x->size() / width; ++row) {
    const double position = positions != nullptr ? double(positions[row]) : double(first + row % seq);
    for (size_t h = 0; h < heads; ++h) {
      double* v = x->data() + row * width + h * head_dim;
      for (size_t i = 0; i < half; ++i) {
        const double cos = std::cos(position * inv[i]) * attention;
        const double sin = std::sin(position * inv[i]) * attention;
        double& a = v[r.interleaved ? 2 * i : i];
        double& b = v[r.interleaved ? 2 * i + 1 : i + half];
        const double a0 = a, b0 = b;
        a = a0 * cos - b0 * sin;
        b = b0 * cos + a0 * sin;
      }
    }
  }
}

// q/k norms (docs/design.md, step 2) of rows of heads * head_dim features: each
// head (or the whole row, over all) by its own statistics, then times the
// weight + weight_offset, plus the bias; a weight shorter than the row (one
// head's, shared) repeats.
void Normalize(const mha::QkNormConfig& n, size_t heads, size_t head_dim,
               const std::vector<float>& w, const std::vector<float>* b, std::vector<double>* x) {
  if (!n.enabled) return;
  const size_t width = heads * head_dim;
  const size_t group = n.over == mha::QkNormOver::kAll ? width : head_dim;
  for (size_t at = 0; at + group <= x->size(); at += group) {
    double* v = x->data() + at;
    double mean = 0.0, squares = 0.0;
    if (n.type == mha::QkNormType::kLayer) {
      for (size_t i = 0; i < group; ++i) mean += v[i] / double(group);
    }
    for (size_t i = 0; i < group; ++i) squares += (v[i] - mean) * (v[i] - mean);
    const double r = 1.0 / std::sqrt(squares / double(group) + double(n.eps));
    for (size_t i = 0; i < group; ++i) {
      const size_t f = (at + i) % width;
      v[i] = (v[i] - mean) * r * (double(w[f % w.size()]) + double(n.weight_offset)) +
             (b != nullptr ? double((*b)[f % b->size()]) : 0.0);
    }
  }
}

// x rounded to the nearest half (ties to even), through float as stored.
double RoundToHalf(double x) {
  const double f = static_cast<float>(x);
  if (f == 0.0 || !std::isfinite(f)) return f;
  int exponent;
  std::frexp(f, &exponent);
  // 11 significant bits; below 2^-14 the half subnormals' fixed step 2^-24.
  const double ulp = std::ldexp(1.0, std::max(exponent - 11, -24));
  return std::nearbyint(f / ulp) * ulp;
}

const float* Param(const std::map<std::string, std::vector<float>>& p, const std::string& name) {
  auto it = p.find(name);
  return it == p.end() ? nullptr : it->second.data();
}

}  // namespace

void ReferenceMha(const mha::MultiheadAttentionConfig& c,
                  const std::map<std::string, std::vector<float>>& p,
                  const mha::TensorView& query, const mha::TensorView& key,
                  const mha::TensorView& value, const mha::ForwardOptions& o,
                  mha::ForwardResult* result, size_t first_query, bool half_keys,
                  const int32_t* key_positions) {
  const bool batched = query.shape.size() == 3;
  const bool bf = batched && c.batch_first;
  const size_t L = query.shape[bf ? 1 : 0], S = key.shape[bf ? 1 : 0];
  const size_t N = batched ? query.shape[bf ? 0 : 1] : 1;
  const size_t E = c.embed_dim, H = c.num_heads, dq = c.qk_head_dim, dv = c.v_head_dim;
  const size_t QK = H * dq, VV = H * dv, Hkv = c.num_kv_heads, KK = Hkv * dq, KV = Hkv * dv;
  const size_t group = H / Hkv;  // query heads per key/value head

  const float* wq = Param(p, "in_proj_weight");
  const float *wk, *wv;
  if (wq != nullptr) {
    wk = wq + QK * E;
    wv = wk + KK * E;
  } else {
    wq = Param(p, "q_proj_weight");
    wk = Param(p, "k_proj_weight");
    wv = Param(p, "v_proj_weight");
  }
  const float* in_bias = Param(p, "in_proj_bias");
  std::vector<double> q = Project(Gather(query, L, N, E, bf), N * L, E, wq, in_bias, QK);
  std::vector<double> k =
      Project(Gather(key, S, N, c.kdim, bf), N * S, c.kdim, wk, in_bias ? in_bias + QK : nullptr, KK);
  std::vector<double> v = Project(Gather(value, S, N, c.vdim, bf), N * S, c.vdim, wv,
                                  in_bias ? in_bias + QK + KK : nullptr, KV);
  if (c.qk_norm.enabled) {
    auto bias = [&](const char* name) {
      auto it = p.find(name);
      return it == p.end() ? nullptr : &it->second;
    };
    Normalize(c.qk_norm, H, dq, p.at("q_norm.weight"), bias("q_norm.bias"), &q);
    Normalize(c.qk_norm, Hkv, dq, p.at("k_norm.weight"), bias("k_norm.bias"), &k);
  }
  Rotate(c.rotary, L, first_query, o.positions, H, dq, &q);
  Rotate(c.rotary, S, 0, key_positions, Hkv, dq, &k);
  if (half_keys) {
    for (double& x : k) x = RoundToHalf(x);
    for (double& x : v) x = RoundToHalf(x);
  }
  const float* bias_k = Param(p, "bias_k");
  const float* bias_v = Param(p, "bias_v");
  const size_t keys = S + (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0);
  const double scale = c.scale != 0.0f ? double(c.scale) : 1.0 / std::sqrt(double(dq));
  const float* sinks = Param(p, "sinks");

  std::vector<double> heads_out(N * L * VV);
  std::vector<double> weights(N * H * L * keys);
  std::vector<double> s(keys);
  for (size_t n = 0; n < N; ++n) {
    for (size_t h = 0; h < H; ++h) {
      for (size_t i = 0; i < L; ++i) {
        const double* qi = &q[(n * L + i) * QK + h * dq];
        for (size_t j = 0; j < keys; ++j) {
          double dot = 0.0;
          for (size_t d = 0; d < dq; ++d) {
            double kd = 0.0;  // the zero-attention key
            if (j < S) kd = k[(n * S + j) * KK + (h / group) * dq + d];
            if (j == S && c.add_bias_kv) kd = bias_k[(h / group) * dq + d];
            dot += qi[d] * kd;
          }
          s[j] = dot * scale;
          if (j >= S) {  // bias_k and zero keys are never masked
            if (c.softcap != 0.0f) s[j] = c.softcap * std::tanh(s[j] / c.softcap);
            continue;
          }
          const double slope = c.alibi.enabled ? c.alibi.slopes[h] : 0.0;
          s[j] = SoftcapAlibi(s[j], c.softcap, slope, c.alibi.symmetric, first_query + i, j);
          const mha::MaskView& am = o.attn_mask;
          if (am.present()) {
            const size_t plane = am.shape.size() == 3 ? (n * H + h) : 0;
            s[j] += MaskTerm(am, (plane * L + i) * S + j, true);
          }
          if (o.key_padding_mask.present()) s[j] += MaskTerm(o.key_padding_mask, n * S + j, true);
          if (Hidden(o.is_causal, c.window, first_query + i, j)) s[j] = kNegInf;
        }
        Softmax(&s, sinks != nullptr ? sinks[h] : kNegInf);
        for (size_t j = 0; j < keys; ++j) weights[((n * H + h) * L + i) * keys + j] = s[j];
        for (size_t d = 0; d < dv; ++d) {
          double acc = 0.0;
          for (size_t j = 0; j < keys; ++j) {
            double vd = 0.0;
            if (j < S) vd = v[(n * S + j) * KV + (h / group) * dv + d];
            if (j == S && c.add_bias_kv) vd = bias_v[(h / group) * dv + d];
            acc += s[j] * vd;
          }
          heads_out[(n * L + i) * VV + h * dv + d] = acc;
        }
      }
    }
  }

  const std::vector<double> y =
      Project(heads_out, N * L, VV, Param(p, "out_proj.weight"), Param(p, "out_proj.bias"), E);
  result->output.shape = query.shape;
  result->output.data.assign(N * L * E, 0.0f);
  for (size_t n = 0; n < N; ++n) {
    for (size_t i = 0; i < L; ++i) {
      const size_t dst = bf || !batched ? n * L + i : i * N + n;
      for (size_t e = 0; e < E; ++e) result->output.data[dst * E + e] = float(y[(n * L + i) * E + e]);
    }
  }

  result->weights = mha::Tensor();
  if (!o.need_weights) return;
  const int64_t L64 = L, K64 = keys, N64 = N, H64 = H;
  if (o.average_attn_weights) {
    result->weights.shape = batched ? mha::Shape{N64, L64, K64} : mha::Shape{L64, K64};
    result->weights.data.assign(N * L * keys, 0.0f);
    for (size_t n = 0; n < N; ++n) {
      for (size_t x = 0; x < L * keys; ++x) {
        double sum = 0.0;
        for (size_t h = 0; h < H; ++h) sum += weights[(n * H + h) * L * keys + x];
        result->weights.data[n * L * keys + x] = float(sum / H);
      }
    }
  } else {
    result->weights.shape = batched ? mha::Shape{N64, H64, L64, K64} : mha::Shape{H64, L64, K64};
    result->weights.data.assign(weights.begin(), weights.end());
  }
}

void ReferenceSdpa(const mha::TensorView& query, const mha::TensorView& key,
                   const mha::TensorView& value, const mha::SdpaOptions& o, mha::Tensor* output) {
  const size_t rank = query.shape.size();
  const size_t B = query.shape[0], H = rank == 4 ? query.shape[1] : 1;
  const size_t L = query.shape[rank - 2], E = query.shape[rank - 1];
  const size_t S = key.shape[rank - 2], Ev = value.shape[rank - 1];
  const double scale = o.scale != 0.0f ? double(o.scale) : 1.0 / std::sqrt(double(E));
  output->shape = query.shape;
  output->shape[rank - 1] = Ev;
  output->data.assign(B * H * L * Ev, 0.0f);

  // The mask's element for (b, h, i, j), its dims right-aligned to (B, H, L, S)
  // ((B, L, S) for rank 3), size-1 dims broadcasting.
  const mha::MaskView& m = o.attn_mask;
  auto mask_index = [&](size_t b, size_t h, size_t i, size_t j) {
    const std::vector<size_t> coords =
        rank == 4 ? std::vector<size_t>{b, h, i, j} : std::vector<size_t>{b, i, j};
    const size_t offset = rank - m.shape.size();
    size_t index = 0;
    for (size_t d = 0; d < m.shape.size(); ++d) {
      index = index * m.shape[d] + (m.shape[d] == 1 ? 0 : coords[d + offset]);
    }
    return index;
  };

  std::vector<double> s(S);
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < H; ++h) {
      const size_t bh = b * H + h;
      for (size_t i = 0; i < L; ++i) {
        for (size_t j = 0; j < S; ++j) {
          double dot = 0.0;
          for (size_t e = 0; e < E; ++e) {
            dot += double(query.data[(bh * L + i) * E + e]) * key.data[(bh * S + j) * E + e];
          }
          const double slope = o.alibi_slopes.data != nullptr ? o.alibi_slopes.data[h] : 0.0;
          s[j] = SoftcapAlibi(dot * scale, o.softcap, slope, false, i, j);
          if (m.present()) s[j] += MaskTerm(m, mask_index(b, h, i, j), false);
          if (Hidden(o.is_causal, o.window, i, j)) s[j] = kNegInf;
        }
        Softmax(&s, o.sinks.data != nullptr ? o.sinks.data[h] : kNegInf);
        for (size_t d = 0; d < Ev; ++d) {
          double acc = 0.0;
          for (size_t j = 0; j < S; ++j) acc += s[j] * value.data[(bh * S + j) * Ev + d];
          output->data[(bh * L + i) * Ev + d] = float(acc);
        }
      }
    }
  }
}

}  // namespace mha_fuzz
