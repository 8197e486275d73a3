// ScaledDotProductAttention: F.scaled_dot_product_attention (PyTorch 2.x)
// over (B, H, L, E) or (B, L, E) tensors, on the same attention kernel.
#include <algorithm>
#include <cmath>
#include <exception>
#include <new>

#include "src/attention.h"
#include "src/multihead_attention.h"

namespace mha {
namespace {

// Right-aligns the mask's dims against (B, H, L, S) (or (B, L, S)) and
// returns each dim's stride in the mask, 0 where it broadcasts.
Status MaskStrides(const MaskView& mask, const Shape& target, std::vector<size_t>* strides) {
  const Shape& shape = mask.shape;
  const std::string expected = "a shape broadcastable to " + ShapeString(target) +
                               " with the last dim equal to S";
  if (shape.size() < 2 || shape.size() > target.size() || shape.back() != target.back()) {
    return Status::InvalidArgument("attn_mask: expected " + expected + ", got " +
                                   ShapeString(shape));
  }
  strides->assign(target.size(), 0);
  size_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t dim = shape.size() - 1 - i;
    const size_t t = target.size() - 1 - i;
    if (shape[dim] != target[t] && shape[dim] != 1) {
      return Status::InvalidArgument("attn_mask: expected " + expected + ", got " +
                                     ShapeString(shape));
    }
    (*strides)[t] = shape[dim] == 1 && target[t] != 1 ? 0 : stride;
    stride *= shape[dim];
  }
  return Status::Ok();
}

Status CheckTensor(const char* arg, const TensorView& t) {
  if (t.shape.size() != 3 && t.shape.size() != 4) {
    return Status::InvalidArgument(std::string(arg) +
                                   ": expected a 4-D (B, H, seq, dim) or 3-D (B, seq, dim) tensor, "
                                   "got shape " + ShapeString(t.shape));
  }
  return CheckDimsAndData(arg, t.shape, t.data);
}

}  // namespace

Status ScaledDotProductAttention(const TensorView& query, const TensorView& key,
                                 const TensorView& value, const SdpaOptions& options,
                                 Tensor* output, ThreadPool* pool) {
  MHA_RETURN_IF_ERROR(CheckTensor("query", query));
  MHA_RETURN_IF_ERROR(CheckTensor("key", key));
  MHA_RETURN_IF_ERROR(CheckTensor("value", value));
  const size_t rank = query.shape.size();
  if (key.shape.size() != rank || value.shape.size() != rank) {
    return Status::InvalidArgument("key, value: expected " + std::to_string(rank) +
                                   "-D tensors like query " + ShapeString(query.shape) +
                                   ", got key " + ShapeString(key.shape) + " and value " +
                                   ShapeString(value.shape));
  }
  // Leading (batch, heads) dims, then sequence and feature dims.
  const int64_t B = query.shape[0], H = rank == 4 ? query.shape[1] : 1;
  const int64_t L = query.shape[rank - 2], E = query.shape[rank - 1];
  const int64_t S = key.shape[rank - 2], Ev = value.shape[rank - 1];
  Shape k_expected = query.shape, v_expected = query.shape;
  k_expected[rank - 2] = S;
  v_expected[rank - 2] = S;
  v_expected[rank - 1] = Ev;
  if (key.shape != k_expected) {
    return Status::InvalidArgument("key: expected shape " + ShapeString(k_expected) +
                                   " (query's batch dims and E), got " + ShapeString(key.shape));
  }
  if (value.shape != v_expected) {
    return Status::InvalidArgument("value: expected shape " + ShapeString(v_expected) +
                                   " (key's batch dims and S), got " + ShapeString(value.shape));
  }
  if (E == 0 || S == 0) {
    return Status::InvalidArgument("key: expected S >= 1 and E >= 1, got shape " + ShapeString(key.shape));
  }
  if (options.is_causal && options.attn_mask.present()) {
    return Status::InvalidArgument("attn_mask: must not be given together with is_causal");
  }
  const Shape target = rank == 4 ? Shape{B, H, L, S} : Shape{B, L, S};
  std::vector<size_t> strides;
  if (options.attn_mask.present()) {
    MHA_RETURN_IF_ERROR(MaskStrides(options.attn_mask, target, &strides));
    MHA_RETURN_IF_ERROR(
        CheckDimsAndData("attn_mask", options.attn_mask.shape, options.attn_mask.data()));
  }
  // The output and a converted bool mask must be addressable, or their sizes
  // and offsets would wrap around (size_t is 32 bits in WebAssembly).
  Shape out_shape = query.shape;
  out_shape[rank - 1] = Ev;
  if (!Addressable(std::max(ElementCount(out_shape), ElementCount(options.attn_mask.shape)))) {
    return Status::OutOfMemory("out of memory for query " +
                               ShapeString(query.shape) + " and value " + ShapeString(value.shape) +
                               ": the output would exceed the address space");
  }
  try {
    std::vector<float> mask_storage;
    const float* mask = AdditiveMask(options.attn_mask, 0, &mask_storage);
    output->shape = out_shape;
    output->data.assign(static_cast<size_t>(NumElements(out_shape)), 0.0f);
    const float scale = options.scale != 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(E));
    std::vector<kernels::AttentionHead> heads;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        const size_t bh = b * H + h;
        kernels::AttentionHead head;
        head.q = query.data + bh * L * E;
        head.q_stride = E;
        head.k = key.data + bh * S * E;
        head.k_stride = E;
        head.v = value.data + bh * S * Ev;
        head.v_stride = Ev;
        head.out = output->data.data() + bh * L * Ev;
        head.out_stride = Ev;
        head.num_queries = L;
        head.masked_keys = S;
        head.qk_dim = E;
        head.v_dim = Ev;
        head.scale = scale;
        head.causal = options.is_causal;
        if (mask != nullptr) {
          const size_t batch_offset = b * strides[0] + (rank == 4 ? h * strides[1] : 0);
          head.mask = mask + batch_offset;
          head.mask_stride = strides[rank - 2];
        }
        if (L > 0 && Ev > 0) heads.push_back(head);
      }
    }
    // One grow-only scratch per calling thread: no allocation per call.
    thread_local AlignedBuffer scratch;
    RunAttentionHeads(heads, pool, &scratch);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of memory for query " +
                               ShapeString(query.shape) + " and key " + ShapeString(key.shape));
  } catch (const std::exception& e) {
    return Status::OutOfMemory(std::string("scaled_dot_product_attention: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace mha
