// MultiheadAttention::Forward: the checks that build the call's plan, then
// the forward pass (Impl::Run, multihead_attention_run.cc).
#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "src/attention/rotary.h"
#include "src/core/kv_cache_internal.h"
#include "src/core/multihead_attention_impl.h"
#include "src/multihead_attention.h"

namespace mha {
namespace {

// The call's dims as the checks find them.
struct Dims {
  bool batched = false;
  int64_t L = 0, S = 0, N = 1;  // S: new keys (the key argument's rows)
  int64_t P = 0;                // keys in the cache before the call
  int64_t T() const { return P + S; }
};


std::string Expected(const Shape& shape, const std::string& names) {
  return ShapeString(shape) + " " + names;
}

// Checks one of query/key/value against its expected (seq, batch, features).
Status CheckInput(const char* arg, const char* seq_name, const TensorView& t, const Dims& dims,
                  int64_t seq, int64_t features, bool batch_first) {
  MHA_RETURN_IF_ERROR(CheckDimsAndData(arg, t.shape, t.data));
  const Shape expected = !dims.batched ? Shape{seq, features}
                         : batch_first ? Shape{dims.N, seq, features}
                                       : Shape{seq, dims.N, features};
  if (t.shape == expected) return Status::Ok();
  const std::string names =
      !dims.batched ? std::string("(") + seq_name + ", features)"
      : batch_first ? std::string("(N, ") + seq_name + ", features) with batch_first"
                    : std::string("(") + seq_name + ", N, features)";
  return Status::InvalidArgument(std::string(arg) + ": expected shape " +
                                 Expected(expected, names) + ", got " + ShapeString(t.shape));
}

Status CheckMask(const char* arg, const MaskView& mask, const std::vector<Shape>& allowed,
                 const std::string& names) {
  if (!mask.present()) return Status::Ok();
  MHA_RETURN_IF_ERROR(CheckDimsAndData(arg, mask.shape, mask.data()));
  for (const Shape& shape : allowed) {
    if (mask.shape == shape) return Status::Ok();
  }
  std::string expected;
  for (const Shape& shape : allowed) expected += (expected.empty() ? "" : " or ") + ShapeString(shape);
  return Status::InvalidArgument(std::string(arg) + ": expected shape " + expected + " " + names +
                                 ", got " + ShapeString(mask.shape));
}

// A cache must be this module's, fit the batch and the new keys.
Status CheckCache(const MultiheadAttentionConfig& c, uint64_t module_id, const KVCache& cache,
                  const Dims& dims) {
  if (c.add_bias_kv || c.add_zero_attn) {
    return Status::InvalidArgument("cache: add_bias_kv and add_zero_attn cannot be used with a "
                                   "cache");
  }
  const uint64_t owner = KVCacheAccess::Owner(cache);
  if (owner != module_id) {
    return Status::InvalidArgument(
        KVCacheAccess::Describe(cache) +
        (owner == 0 ? " was made by createKVCache for scaled_dot_product_attention"
                    : " belongs to another module") +
        "; use this module's createKVCache");
  }
  if (cache.config().batch_size != dims.N) {
    return Status::InvalidArgument(KVCacheAccess::Describe(cache) + " holds batch size " +
                                   std::to_string(cache.config().batch_size) +
                                   ", but query has batch size " + std::to_string(dims.N));
  }
  return KVCacheAccess::CheckAppend(cache, dims.S, c.window.left);
}

// query, key, value and the cache, which give the dims.
Status CheckInputs(const MultiheadAttentionConfig& c, uint64_t module_id, const TensorView& query,
                   const TensorView& key, const TensorView& value, const ForwardOptions& o,
                   Dims* dims) {
  const size_t rank = query.shape.size();
  if (rank != 2 && rank != 3) {
    return Status::InvalidArgument("query: expected a 3-D (L, N, E) / (N, L, E) or 2-D (L, E) "
                                   "tensor, got shape " + ShapeString(query.shape));
  }
  const bool no_keys = key.absent() && value.absent();
  if (no_keys && o.cache == nullptr) {
    return Status::InvalidArgument("key, value: required without a cache");
  }
  if (!no_keys && (key.shape.size() != rank || value.shape.size() != rank)) {
    return Status::InvalidArgument("key, value: expected " + std::to_string(rank) +
                                   "-D tensors like query " + ShapeString(query.shape) +
                                   (o.cache != nullptr ? " (or both absent with a cache)" : "") +
                                   ", got key " + ShapeString(key.shape) + " and value " +
                                   ShapeString(value.shape));
  }
  dims->batched = rank == 3;
  const bool bf = c.batch_first && dims->batched;
  dims->L = query.shape[bf ? 1 : 0];
  dims->S = no_keys ? 0 : key.shape[bf ? 1 : 0];
  if (dims->batched) dims->N = query.shape[bf ? 0 : 1];
  MHA_RETURN_IF_ERROR(CheckInput("query", "L", query, *dims, dims->L, c.embed_dim, bf));
  if (!no_keys) {
    MHA_RETURN_IF_ERROR(CheckInput("key", "S", key, *dims, dims->S, c.kdim, bf));
    MHA_RETURN_IF_ERROR(CheckInput("value", "S", value, *dims, dims->S, c.vdim, bf));
  }
  if (o.cache != nullptr) {
    MHA_RETURN_IF_ERROR(CheckCache(c, module_id, *o.cache, *dims));
    dims->P = KVCacheAccess::KeysBefore(*o.cache, dims->S);
  }
  // Keys attended: the cache's and the new ones.
  if (dims->T() == 0 && !c.add_bias_kv && !c.add_zero_attn) {
    return Status::InvalidArgument(o.cache != nullptr
        ? "key: expected at least one key; the cache is empty and key is absent"
        : "key: expected at least one key (S >= 1), got shape " + ShapeString(key.shape));
  }
  return Status::Ok();
}

// The masks, when given (their messages are built here, not on every decoding step).
Status CheckMasks(const MultiheadAttentionConfig& c, const ForwardOptions& o, const Dims* dims) {
  const int64_t N = dims->N, L = dims->L, T = dims->T(), H = c.num_heads;
  const std::string keys = o.cache != nullptr ? "T" : "S";
  const std::string cached = o.cache != nullptr
      ? " (T = " + std::to_string(T) + ": the cache's " + std::to_string(dims->P) + " keys and " +
            std::to_string(dims->S) + " new)"
      : "";
  if (dims->batched) {
    MHA_RETURN_IF_ERROR(CheckMask("key_padding_mask", o.key_padding_mask, {{N, T}},
                                  "(N, " + keys + ")" + cached));
    MHA_RETURN_IF_ERROR(CheckMask("attn_mask", o.attn_mask, {{L, T}, {N * H, L, T}},
                                  "(L, " + keys + ") or (N*num_heads, L, " + keys + ")" + cached));
  } else {
    MHA_RETURN_IF_ERROR(CheckMask("key_padding_mask", o.key_padding_mask, {{T}},
                                  "(" + keys + ") for unbatched input" + cached));
    MHA_RETURN_IF_ERROR(CheckMask("attn_mask", o.attn_mask, {{L, T}, {H, L, T}},
                                  "(L, " + keys + ") or (num_heads, L, " + keys +
                                      ") for unbatched input" + cached));
  }
  return Status::Ok();
}

// positions: one per query row (N * L), rotary on, and key rows (when given)
// the query rows they rotate with.
Status CheckPositions(const MultiheadAttentionConfig& c, const ForwardOptions& o,
                      const Dims& dims) {
  if (!c.rotary.enabled) {
    return Status::InvalidArgument("positions: given to a module without rotary; positions only "
                                   "turn rotary queries and keys (masks, window and ALiBi use "
                                   "cache slots)");
  }
  const int64_t expected = dims.N * dims.L;
  if (o.num_positions != static_cast<uint64_t>(expected)) {
    return Status::InvalidArgument("positions: expected " + std::to_string(expected) +
                                   " entries (N * L = " + std::to_string(dims.N) + " * " +
                                   std::to_string(dims.L) + ", batch-major), got " +
                                   std::to_string(o.num_positions));
  }
  if (dims.S != 0 && dims.S != dims.L) {
    return Status::InvalidArgument("positions: key has " + std::to_string(dims.S) +
                                   " rows and query " + std::to_string(dims.L) +
                                   "; positions need the key rows to be the query rows (or "
                                   "key and value absent with a cache)");
  }
  return Status::Ok();
}

// The call's plan (MakePlan decides its kernel, once).
ForwardPlan Plan(const MultiheadAttentionConfig& c, const Dims& dims, const ForwardOptions& o) {
  ForwardPlan plan;
  plan.batched = dims.batched;
  plan.batch_first = c.batch_first && dims.batched;
  const size_t num_extra = (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0);
  plan.attention = MakePlan({dims.N, c.num_heads, c.num_kv_heads, dims.L, dims.S, dims.P,
                             c.qk_head_dim, c.v_head_dim},
                            num_extra, o.need_weights, o.is_causal,
                            {c.scale, c.softcap, c.window});
  return plan;
}

Status CheckForward(const MultiheadAttentionConfig& c, uint64_t module_id,
                    const TensorView& query, const TensorView& key, const TensorView& value,
                    const ForwardOptions& o, ForwardPlan* plan) {
  Dims dims;
  MHA_RETURN_IF_ERROR(CheckInputs(c, module_id, query, key, value, o, &dims));
  if (o.key_padding_mask.present() || o.attn_mask.present()) {
    MHA_RETURN_IF_ERROR(CheckMasks(c, o, &dims));
  }
  if (o.positions != nullptr) MHA_RETURN_IF_ERROR(CheckPositions(c, o, dims));
  const int64_t N = dims.N, L = dims.L, T = dims.T(), H = c.num_heads;
  // The largest buffers (projections, per-head weights, a converted 3-D mask)
  // must be addressable, or their sizes and offsets would wrap around.
  const int64_t num_extra = (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0);
  const double all_keys = static_cast<double>(T + num_extra);
  const double projections = static_cast<double>(N) * std::max({L, dims.S, T}) *
      (3.0 * std::max({c.embed_dim, c.kdim, c.vdim}) + 3.0 * H * std::max(c.qk_head_dim, c.v_head_dim));
  const double weights = o.need_weights ? static_cast<double>(N) * H * L * all_keys : 0.0;
  if (!Addressable(std::max({projections, weights, ElementCount(o.attn_mask.shape)}))) {
    return Status::OutOfMemory("forward: out of memory for query " + ShapeString(query.shape) +
                               " and key " + ShapeString(key.shape) +
                               ": its buffers would exceed the address space");
  }
  *plan = Plan(c, dims, o);
  return Status::Ok();
}

}  // namespace

Status MultiheadAttention::Forward(const TensorView& query, const TensorView& key,
                                   const TensorView& value, const ForwardOptions& options,
                                   ForwardResult* result, ThreadPool* pool) {
  // Cache before module: the order every caller locks them in.
  std::unique_lock<std::mutex> cache_lock;
  if (options.cache != nullptr) cache_lock = KVCacheAccess::Lock(*options.cache);
  Impl& m = *impl_;
  try {  // the checks allocate too (shapes, names)
    ForwardPlan plan;
    MHA_RETURN_IF_ERROR(CheckForward(config_, m.id, query, key, value, options, &plan));
    std::lock_guard<std::mutex> lock(m.mutex);
    if (!m.complete) {
      const std::vector<std::string> missing = MissingParameters(m.loaded);
      if (!missing.empty()) {
        return Status::FailedPrecondition("parameters not loaded: " + JoinNames(missing));
      }
      m.complete = true;
    }
    KVCache* cache = options.cache;
    if (cache != nullptr) {
      KVCacheAccess::SaveOverwritten(*cache, plan.attention.S);
      const Rotation rotation = m.KeyRotation(config_);
      KVCacheAccess::MakeRoom(*cache, plan.attention.S,
                              config_.rotary.enabled ? &rotation : nullptr);
    }
    try {
      // After MakeRoom, which may drop pads.
      ForwardOptions padded;
      const ForwardOptions& o =
          cache != nullptr ? WithCachePadding(config_, plan, options, &padded) : options;
      m.Run(config_, plan, query, key, value, o, result, pool);
    } catch (...) {
      if (cache != nullptr) {
        KVCacheAccess::Abandon(*cache, plan.attention.S);
        KVCacheAccess::UndoMakeRoom(*cache);
      }
      throw;
    }
    if (cache != nullptr) RememberPadding(plan, options);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("forward: out of memory for query " + ShapeString(query.shape) +
                               " and key " + ShapeString(key.shape));
  } catch (const std::exception& e) {
    return Status::OutOfMemory(std::string("forward: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace mha
