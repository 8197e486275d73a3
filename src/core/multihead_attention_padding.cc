// The padding a module's cache remembers (docs/design.md, "Caches an app
// keeps"): a prefill's key padding mask sets each entry's pad slots; later
// calls without a mask get one over them, and with rotary, calls without
// positions count each entry's positions from its first real token.
#include <algorithm>
#include <cmath>

#include "src/core/kv_cache_internal.h"
#include "src/core/multihead_attention_impl.h"

namespace mha {
namespace {

// Leading masked slots of row n of a (N, T) key padding mask: true, or -inf
// in a float mask (PyTorch's additive form).
int64_t LeadingPads(const MaskView& mask, size_t n, size_t T) {
  size_t s = 0;
  if (mask.kind == MaskKind::kBool) {
    while (s < T && mask.bool_data[n * T + s] != 0) ++s;
  } else {
    while (s < T && std::isinf(mask.float_data[n * T + s]) && mask.float_data[n * T + s] < 0) ++s;
  }
  return static_cast<int64_t>(s);
}

bool Prefill(const ForwardPlan& plan, const ForwardOptions& o) {
  return plan.attention.P == 0 && o.key_padding_mask.present();
}

}  // namespace

const ForwardOptions& WithCachePadding(const MultiheadAttentionConfig& c, const ForwardPlan& plan,
                                       const ForwardOptions& options, ForwardOptions* padded) {
  const AttentionPlan& a = plan.attention;
  PadBuffers& s = KVCacheAccess::PadScratch(*options.cache);
  const int64_t* remembered = KVCacheAccess::Padding(*options.cache);
  const size_t N = a.N, L = a.L, T = a.T();
  s.call_padding.resize(N);
  for (size_t n = 0; n < N; ++n) {
    s.call_padding[n] = Prefill(plan, options) ? LeadingPads(options.key_padding_mask, n, T)
                                               : remembered[n];
  }
  const bool add_mask = !options.key_padding_mask.present();
  // Per-entry positions need the key rows to be the query rows, as given ones do.
  const bool add_positions = c.rotary.enabled && options.positions == nullptr &&
                         (a.S == 0 || a.S == L);
  if ((!add_mask && !add_positions) ||
      std::all_of(s.call_padding.begin(), s.call_padding.end(), [](int64_t p) { return p == 0; })) {
    return options;
  }
  *padded = options;
  if (add_mask) {
    // resize grows geometrically; assign may reallocate to the exact size,
    // so at each decoding step (T grows by one).
    s.mask.resize(N * T);
    std::fill(s.mask.begin(), s.mask.end(), uint8_t{0});
    for (size_t n = 0; n < N; ++n) {
      std::fill_n(s.mask.begin() + n * T, std::min<size_t>(s.call_padding[n], T), 1);
    }
    padded->key_padding_mask = MaskView::Bool(
        s.mask.data(), plan.batched ? Shape{int64_t(N), int64_t(T)} : Shape{int64_t(T)});
  }
  if (add_positions) {
    // Hugging Face's position_ids: the real tokens before, pads at 1.
    s.positions.resize(N * L);
    for (size_t n = 0; n < N; ++n) {
      for (size_t i = 0; i < L; ++i) {
        const int64_t slot = static_cast<int64_t>(a.P + i), pads = s.call_padding[n];
        s.positions[n * L + i] = static_cast<int32_t>(slot >= pads ? slot - pads : 1);
      }
    }
    padded->positions = s.positions.data();
    padded->num_positions = N * L;
  }
  return *padded;
}

void RememberPadding(const ForwardPlan& plan, const ForwardOptions& options) {
  if (!Prefill(plan, options)) return;
  const std::vector<int64_t>& pads = KVCacheAccess::PadScratch(*options.cache).call_padding;
  std::copy(pads.begin(), pads.end(), KVCacheAccess::Padding(*options.cache));
}

}  // namespace mha
