// mha::MultiheadAttention: PyTorch 1.13 nn.MultiheadAttention.forward in eval
// mode, plus separate query/key and value head dims.
//
// Semantics (see docs/design.md):
// - Inputs are (L, N, E) or, with batch_first, (N, L, E); unbatched inputs are
//   (L, E). key/value are (S, N, kdim) / (S, N, vdim) likewise.
// - key_padding_mask: (N, S), or (S) for unbatched input. attn_mask: (L, S) or
//   (N * num_heads, L, S) indexed n * num_heads + h ((num_heads, L, S) for
//   unbatched input). Bool masks: true = may not attend. Float masks are added
//   to the scores. Both given: they combine (a float key_padding_mask is added,
//   as PyTorch documents; 1.13's fused path treats it as bool, we do not).
// - is_causal: query i may attend key j only if j <= i (top-left aligned, also
//   when L != S). It combines with the other masks.
// - A bias_k / add_zero_attn key is never masked.
// - Fully masked rows: when every key of query i is masked (and no bias_k or
//   zero-attention key rescues it), softmax over -inf gives NaN, as in PyTorch
//   1.13: that query's whole output row (all embed_dim features, since the
//   output projection mixes the heads) is NaN, and so are its weights (for
//   averaged weights, the average over heads is NaN if any head is).
// - Outputs: attn_output of the query's layout with embed_dim features;
//   weights (N, L, S') averaged, or (N, num_heads, L, S') per head, (L, S') /
//   (num_heads, L, S') unbatched, where S' counts bias_k and zero-attention keys.
// - NaN inputs: a NaN score makes its query's row NaN, as in PyTorch. One
//   difference: keys that the masks remove in whole blocks (causal tiles and
//   blocks along the diagonal; key padding at the end of a 64-key tile, or,
//   without weights, at the end of a batch entry) are never read, so a NaN in
//   such a masked key or value does not reach the output, where PyTorch's
//   dense 0 * NaN would spread it.
// - dropout is accepted and ignored: this is inference (eval mode).
//
// Decoding (docs/design.md, "Decoding: KV cache, grouped-query heads, rotary
// positions"):
// - num_kv_heads (Hkv, dividing num_heads H): keys and values project to Hkv
//   heads and query head h reads key/value head h / (H / Hkv). Parameters are
//   then q_proj_weight (H*qk_head_dim, E), k_proj_weight (Hkv*qk_head_dim,
//   kdim), v_proj_weight (Hkv*v_head_dim, vdim), in_proj_bias (q, k, v),
//   bias_k (1, 1, Hkv*qk_head_dim), bias_v (1, 1, Hkv*v_head_dim).
// - rotary: after projection and bias, the first rotary.dim features of every
//   query and key head turn by position * inv_freq_i for pair i (base^(-2i/dim)
//   unless scaled or given; cos and sin times the attention factor); pairs
//   are (i, i + dim/2) or, interleaved, (2i, 2i+1). Positions start at 0, or
//   at the cache's length P with a cache, unless options.positions gives
//   them. bias_k and zero-attention keys are not rotated.
// - options.cache (from CreateKVCache): key/value hold only the S_new new
//   rows (or are both empty TensorView{}: nothing is appended); they are
//   projected, rotated and appended at positions P.., and the queries attend
//   to all T = P + S_new keys the cache then holds. Query i has position P+i;
//   is_causal lets it attend keys j <= P + i. Masks and weights span the T
//   keys: key_padding_mask (N, T), attn_mask (L, T) or (N*H, L, T), weights
//   (N, L, T) or (N, H, L, T). add_bias_kv / add_zero_attn exclude a cache.
//   On any error the cache is left as it was.
//
// Thread safety: Forward on one module is serialised internally; distinct
// modules may run concurrently (sharing a pool serialises their ParallelFor).
#ifndef MHA_SRC_MULTIHEAD_ATTENTION_H_
#define MHA_SRC_MULTIHEAD_ATTENTION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/kv_cache.h"
#include "src/rope_scaling.h"
#include "src/scaled_dot_product_attention.h"
#include "src/status.h"
#include "src/tensor.h"
#include "src/thread_pool.h"
#include "src/weight_options.h"

namespace mha {

// A parsed .safetensors checkpoint and its dtypes (src/io/safetensors.h, which
// parses one).
struct SafetensorsFile;
enum class DType;

// Rotary position embedding (RoPE) on queries and keys (docs/design.md, "The
// attention of today's models", step 3).
struct RotaryConfig {
  bool enabled = false;
  // Features rotated per head: even, <= qk_head_dim; 0: 2 * inv_freq.size(),
  // or qk_head_dim without inv_freq.
  int64_t dim = 0;
  std::optional<double> base;  // > 0; absent: 10000
  bool interleaved = false; // pairs (2i, 2i+1) (GPT-J); else (i, i + dim/2) (GPT-NeoX, Llama)
  // Hugging Face's rope_scaling (linear, llama3, yarn); type empty: none.
  RopeScaling scaling;
  // The table itself (transformers' inv_freq buffer): dim / 2 entries; not
  // with base or scaling. Empty: from base and scaling.
  std::vector<float> inv_freq;
  // cos and sin times this (> 0; not with scaling); absent: 1, or YaRN's.
  std::optional<double> attention_factor;
};

// ALiBi biases (docs/design.md): score (i, j) gains m_h * (j - p_i), or with
// symmetric -m_h * |j - p_i| (jina-bert-v2).
struct AlibiConfig {
  bool enabled = false;
  bool symmetric = false;
  std::vector<float> slopes;  // num_heads; empty: the ALiBi paper's for num_heads
};

// q/k norms (docs/design.md, step 2): after the projections and their biases,
// before rotary, q and k are normalized in float32, each head's qk_head_dim
// features (kHead) or a row's whole projection (kAll), by RMSNorm
// x / sqrt(mean(x^2) + eps) * (w + weight_offset) or LayerNorm
// (x - mean) / sqrt(var + eps) * (w + weight_offset) (+ b). Parameters q_norm.weight and
// k_norm.weight: kHead (qk_head_dim), shared by the heads, or per head
// (num_heads, qk_head_dim) / (num_kv_heads, qk_head_dim); kAll
// (num_heads * qk_head_dim) / (num_kv_heads * qk_head_dim); kLayer also takes
// q_norm.bias / k_norm.bias of the same shapes (zero when absent).
enum class QkNormType { kRms, kLayer };
enum class QkNormOver { kHead, kAll };
struct QkNormConfig {
  bool enabled = false;
  QkNormType type = QkNormType::kRms;
  QkNormOver over = QkNormOver::kHead;
  float eps = 1e-6f;           // > 0
  float weight_offset = 0.0f;  // added to the weights (Gemma 3 stores w - 1: 1); finite
};

// The ALiBi paper's slopes for num_heads heads (BLOOM's build_alibi_tensor).
std::vector<float> AlibiSlopes(int64_t num_heads);

// How the projection weights are kept (docs/design.md, "Precision: weights and
// caches in fewer bytes"). kAuto keeps each projection in its checkpoint's
// precision: float16 or bfloat16 when every tensor of it is stored so (a
// .safetensors F16 or BF16), else float32 (a state_dict of floats). 16-bit
// weights are converted in registers: results are bit-identical to widening
// them at load. kInt8 quantizes at load, symmetric with one float32 scale per
// output channel (max |w| / 127): approximate, see docs/precision.md.
enum class WeightsDtype { kAuto, kFloat32, kFloat16, kBFloat16, kInt8 };

struct MultiheadAttentionConfig {
  int64_t embed_dim = 0;   // required, > 0
  int64_t num_heads = 0;   // required, > 0
  bool bias = true;
  bool add_bias_kv = false;
  bool add_zero_attn = false;
  int64_t kdim = 0;        // 0: embed_dim
  int64_t vdim = 0;        // 0: embed_dim
  bool batch_first = false;
  int64_t qk_head_dim = 0; // 0: embed_dim / num_heads (which must then divide)
  int64_t v_head_dim = 0;  // 0: embed_dim / num_heads
  float dropout = 0.0f;    // ignored (eval)
  int64_t num_kv_heads = 0;  // 0: num_heads; else must divide num_heads
  RotaryConfig rotary;       // off unless rotary.enabled
  // The attention of today's models (docs/design.md): s = scale * q . k, then
  // s = softcap * tanh(s / softcap) before masks and biases.
  float scale = 0.0f;        // 0: 1 / sqrt(qk_head_dim) (Gemma: query_pre_attn_scalar ** -0.5)
  float softcap = 0.0f;      // 0: off (Gemma 2: attn_logit_softcapping)
  // A sliding window over positions (query i at P + i, key j at j), with the
  // masks; not with add_bias_kv or add_zero_attn (their keys have no position).
  WindowConfig window;
  // A learned logit per query head in the softmax's denominator (gpt-oss): the
  // parameter "sinks" (num_heads); the returned weights sum to less than 1.
  bool sinks = false;
  // Not with add_bias_kv or add_zero_attn (their keys have no position).
  AlibiConfig alibi;
  QkNormConfig qk_norm;  // off unless qk_norm.enabled
  WeightsDtype weights_dtype = WeightsDtype::kAuto;
};

struct ForwardOptions {
  MaskView key_padding_mask;
  MaskView attn_mask;
  bool need_weights = true;
  bool average_attn_weights = true;
  bool is_causal = false;
  // Optional: a cache made by this module's CreateKVCache.
  KVCache* cache = nullptr;
  // Optional, with rotary only (docs/design.md, "Generation"): the rotary position
  // of each query row and of the key row appended with it, num_positions =
  // N * L entries batch-major (n * L + i) whatever batch_first (L unbatched);
  // key rows, when given, must equal query rows. Hugging Face's position_ids
  // for left-padded batches. Masks, window and ALiBi keep using slots (P + i).
  // Null: P + i.
  const int32_t* positions = nullptr;
  size_t num_positions = 0;
};

struct ForwardResult {
  Tensor output;
  Tensor weights;  // empty (no shape) unless need_weights
};

// One named parameter as PyTorch's state_dict holds it.
struct ParameterSpec {
  std::string name;
  Shape shape;
};

class MultiheadAttention {
 public:
  // Validates `config`; on success `*out` holds a module whose parameters are
  // all zero until loaded.
  static Status Create(const MultiheadAttentionConfig& config,
                       std::unique_ptr<MultiheadAttention>* out);

  const MultiheadAttentionConfig& config() const { return config_; }

  // The state_dict entries this configuration has, with their shapes.
  std::vector<ParameterSpec> Parameters() const;

  // Copies one parameter; `name` is a PyTorch state_dict key and `shape` must
  // match Parameters() exactly. When kdim == vdim == embed_dim, in_proj_weight
  // and q/k/v_proj_weight are interchangeable (the same rows).
  Status LoadParameter(const std::string& name, const float* data, const Shape& shape);

  // Loads every parameter from the tensors of one attention module, all or
  // nothing: an error (OutOfMemory too) loads nothing, and outputs and
  // memory() stay as they were. New weights are allocated before the old
  // ones are freed unless they have the same types. The module is found under
  // options.prefix in any layout of weight_layouts.h (detected, or forced
  // with options.layout / options.names); tensors it does not use are
  // ignored. In the torch layout, nn.MultiheadAttention names that this
  // configuration does not have, wrong shapes and missing parameters are
  // errors. In the others, projection biases absent from the checkpoint are
  // zero, and a bias present with bias = false is an error. Errors name the
  // checkpoint's tensor, the expected and the received shape.
  Status LoadStateDict(const std::map<std::string, TensorView>& tensors,
                       const WeightOptions& options = WeightOptions());

  // The same from parsed .safetensors shards (ParseSafetensorsShards): only
  // the tensors used are read, converted once from F32, F16 or BF16, one at a
  // time (StartLoad below), into new weights swapped in at the end; tensors
  // of other dtypes elsewhere never stop a load.
  Status LoadSafetensors(const SafetensorsFile& file, const WeightOptions& options = WeightOptions());

  // The same from the bytes of one .safetensors file.
  Status LoadSafetensors(const uint8_t* bytes, size_t size,
                         const WeightOptions& options = WeightOptions());

  // A .safetensors load fed one tensor at a time, so that a caller streaming
  // the file holds one tensor besides the weights (docs/design.md, "Loading
  // large checkpoints in a page"). StartLoad plans it from the shards'
  // headers (their data may be null), allocates the new weights and names
  // the tensors to feed; FeedLoad takes one of them, its bytes as stored
  // (read during the call only), converts it and stores the parameters it
  // completes into the new weights; FinishLoad, once every one is fed, swaps
  // them in and ends the load. All or nothing: the module is unchanged until
  // FinishLoad succeeds; after an error, drop the load. Feeding or finishing
  // a load this module did not start, or one that has ended, is an error.
  class StreamedLoad {
   public:
    StreamedLoad();
    ~StreamedLoad();

   private:
    friend class MultiheadAttention;
    struct State;
    std::unique_ptr<State> state_;
  };
  Status StartLoad(const SafetensorsFile& file, const WeightOptions& options, StreamedLoad* out,
                   std::vector<std::string>* names) const;
  Status FeedLoad(StreamedLoad* load, const std::string& name, const uint8_t* data) const;
  Status FinishLoad(StreamedLoad* load);

  // A cache of this module's key/value heads and head dims for batches of
  // batch_size, holding up to max_length keys; all its memory is allocated
  // here. It may outlive the module. `rolling` (KVCacheConfig::rolling)
  // needs a module with a finite left window.
  Status CreateKVCache(int64_t batch_size, int64_t max_length, KVCacheDtype dtype, bool rolling,
                       std::unique_ptr<KVCache>* out) const;
  Status CreateKVCache(int64_t batch_size, int64_t max_length, KVCacheDtype dtype,
                       std::unique_ptr<KVCache>* out) const {
    return CreateKVCache(batch_size, max_length, dtype, false, out);
  }

  // A StreamingLLM cache (KVCacheConfig::keep; docs/design.md, "Caches an
  // app keeps"): the first `keep` keys kept as sinks, the others rolling,
  // re-rotated as they move; any module (no window needed).
  Status CreateStreamingKVCache(int64_t batch_size, int64_t max_length, KVCacheDtype dtype,
                                int64_t keep, std::unique_ptr<KVCache>* out) const;

  // A cache of this module from KVCache::Save's bytes (of a cache of this
  // module or one of the same key/value heads and head dims), continuing
  // exactly where the saved one was; errors name what differs, nothing
  // allocated (docs/design.md, "Caches an app keeps: save, restore, fork, grow, stream").
  Status LoadKVCache(const uint8_t* bytes, size_t size, std::unique_ptr<KVCache>* out) const;

  // `pool` may be null (runs on the calling thread). key and value may both
  // be empty (TensorView{}) only with options.cache.
  Status Forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const ForwardOptions& options, ForwardResult* result,
                 ThreadPool* pool = nullptr);

  // Bytes the weights take in their dtype (packed, with biases and int8
  // scales); 0 before anything is loaded.
  size_t memory() const;

  ~MultiheadAttention();

 private:
  explicit MultiheadAttention(const MultiheadAttentionConfig& config);

  // Parameters() plus the equivalent in_proj_weight / q,k,v_proj_weight form.
  std::vector<ParameterSpec> AcceptedParameters() const;

  // Parameters() not covered by the names in `have`.
  std::vector<std::string> MissingParameters(const std::set<std::string>& have) const;

  // Whether LoadParameter would accept this name, shape and data (with
  // weights_dtype int8: finite projection weights).
  Status CheckParameter(const std::string& name, const float* data, const Shape& shape) const;

  struct Impl;
  struct Recipes;
  Status Plan(const ShapeMap& tensors, const WeightOptions& options, Recipes* out) const;
  // With int8 weights: an error naming the first non-finite element of a
  // projection weight (int8 cannot hold it). Biases stay float32.
  Status CheckQuantizable(const std::string& name, const float* data, int64_t size) const;
  // LoadStateDict's load of float32 `sources` once planned.
  Status LoadPlanned(const Recipes& recipes, const ShapeMap& shapes,
                     const std::map<std::string, const float*>& sources);
  MultiheadAttentionConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mha

#endif  // MHA_SRC_MULTIHEAD_ATTENTION_H_
