// Embind glue between web/src (the JS API) and the core. No computation here:
// JS copies tensors into the WASM heap and passes {ptr, shape} descriptors;
// each call returns a StatusCode and leaves its results (or the error message)
// in a CallResult, which JS copies out once and then deletes.
#include <emscripten/bind.h>
#include <emscripten/val.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "hwy/highway.h"
#include "hwy/targets.h"
#include "src/multihead_attention.h"

namespace mha {
namespace {

using emscripten::val;

// The persistent pool, sized once by Initialize. Under pthreads every worker
// is a preallocated Web Worker: asking for more than MHA_PTHREAD_POOL_SIZE
// would make pthread_create wait for a Worker that the blocked main thread
// can never spawn, so the size is clamped.
#ifndef MHA_PTHREAD_POOL_SIZE
#define MHA_PTHREAD_POOL_SIZE 1
#endif
std::unique_ptr<ThreadPool> g_pool;

int Initialize(int num_threads) {
  if (g_pool) return static_cast<int>(StatusCode::kFailedPrecondition);
  if (num_threads < 1) num_threads = 1;
  if (num_threads > MHA_PTHREAD_POOL_SIZE) num_threads = MHA_PTHREAD_POOL_SIZE;
  g_pool = std::make_unique<ThreadPool>(static_cast<size_t>(num_threads));
  return static_cast<int>(StatusCode::kOk);
}

val Info() {
  val info = val::object();
  info.set("target", std::string(hwy::TargetName(HWY_TARGET)));
  info.set("threads", g_pool ? static_cast<int>(g_pool->num_threads()) : 0);
  return info;
}

// Heap top (sbrk) and bytes in use (malloc): what the leak test watches.
val HeapInfo() {
  struct mallinfo stats = mallinfo();
  val info = val::object();
  info.set("heapTop", static_cast<double>(reinterpret_cast<uintptr_t>(sbrk(0))));
  // mallinfo counts in int: read the bits as unsigned past 2 GiB.
  info.set("inUseBytes", static_cast<double>(static_cast<unsigned>(stats.uordblks)));
  return info;
}

// JS checks that every dim is a positive safe integer before calling.
int64_t Dim(const val& number) { return static_cast<int64_t>(number.as<double>()); }

Shape ShapeFrom(const val& dims) {
  Shape shape;
  const int length = dims["length"].as<int>();
  for (int i = 0; i < length; ++i) shape.push_back(Dim(dims[i]));
  return shape;
}

val ShapeToJS(const Shape& shape) {
  val dims = val::array();
  for (int64_t dim : shape) dims.call<void>("push", static_cast<double>(dim));
  return dims;
}

val SpecsToJS(const std::vector<ParameterSpec>& specs) {
  val list = val::array();
  for (const ParameterSpec& spec : specs) {
    val entry = val::object();
    entry.set("name", spec.name);
    entry.set("shape", ShapeToJS(spec.shape));
    list.call<void>("push", entry);
  }
  return list;
}

// {ptr, shape}
TensorView TensorFrom(const val& tensor) {
  return TensorView{reinterpret_cast<const float*>(tensor["ptr"].as<uintptr_t>()),
                    ShapeFrom(tensor["shape"])};
}

// undefined, or {bool: true|false, ptr, shape}
MaskView MaskFrom(const val& mask) {
  if (mask.isUndefined() || mask.isNull()) return MaskView();
  const uintptr_t ptr = mask["ptr"].as<uintptr_t>();
  if (mask["bool"].as<bool>()) {
    return MaskView::Bool(reinterpret_cast<const uint8_t*>(ptr), ShapeFrom(mask["shape"]));
  }
  return MaskView::Float(reinterpret_cast<const float*>(ptr), ShapeFrom(mask["shape"]));
}

// What one call left behind for JS.
class CallResult {
 public:
  int Record(const Status& status) {
    message_ = status.message();
    return static_cast<int>(status.code());
  }
  std::string message() const { return message_; }
  uintptr_t outputPtr() const { return reinterpret_cast<uintptr_t>(output.data.data()); }
  val outputShape() const { return ShapeToJS(output.shape); }
  uintptr_t weightsPtr() const { return reinterpret_cast<uintptr_t>(weights.data.data()); }
  val weightsShape() const { return ShapeToJS(weights.shape); }
  Tensor output;
  Tensor weights;

 private:
  std::string message_;
};

class MultiheadAttentionBinding {
 public:
  // config: the core's field names; JS fills defaults and checks types.
  int create(const val& config, CallResult& result) {
    MultiheadAttentionConfig c;
    c.embed_dim = Dim(config["embed_dim"]);
    c.num_heads = Dim(config["num_heads"]);
    c.bias = config["bias"].as<bool>();
    c.add_bias_kv = config["add_bias_kv"].as<bool>();
    c.add_zero_attn = config["add_zero_attn"].as<bool>();
    c.kdim = Dim(config["kdim"]);
    c.vdim = Dim(config["vdim"]);
    c.batch_first = config["batch_first"].as<bool>();
    c.qk_head_dim = Dim(config["qk_head_dim"]);
    c.v_head_dim = Dim(config["v_head_dim"]);
    c.dropout = config["dropout"].as<float>();
    return result.Record(MultiheadAttention::Create(c, &module_));
  }

  // [{name, shape}] in state_dict order.
  val parameters() const { return SpecsToJS(module_->Parameters()); }

  // entries: [{name, ptr, shape}], names with `prefix`.
  int loadStateDict(const val& entries, const std::string& prefix, CallResult& result) {
    std::map<std::string, TensorView> tensors;
    const int length = entries["length"].as<int>();
    for (int i = 0; i < length; ++i) {
      tensors[entries[i]["name"].as<std::string>()] = TensorFrom(entries[i]);
    }
    return result.Record(module_->LoadStateDict(tensors, {prefix}));
  }

  int loadSafetensors(uintptr_t bytes, size_t size, const std::string& prefix,
                      CallResult& result) {
    return result.Record(
        module_->LoadSafetensors(reinterpret_cast<const uint8_t*>(bytes), size, {prefix}));
  }

  // options: {key_padding_mask, attn_mask, need_weights, average_attn_weights, is_causal}
  int forward(const val& query, const val& key, const val& value, const val& options,
              CallResult& result) {
    ForwardOptions o;
    o.key_padding_mask = MaskFrom(options["key_padding_mask"]);
    o.attn_mask = MaskFrom(options["attn_mask"]);
    o.need_weights = options["need_weights"].as<bool>();
    o.average_attn_weights = options["average_attn_weights"].as<bool>();
    o.is_causal = options["is_causal"].as<bool>();
    ForwardResult out;
    const Status status = module_->Forward(TensorFrom(query), TensorFrom(key),
                                           TensorFrom(value), o, &out, g_pool.get());
    result.output = std::move(out.output);
    result.weights = std::move(out.weights);
    return result.Record(status);
  }

 private:
  std::unique_ptr<MultiheadAttention> module_;
};

// options: {attn_mask, is_causal, scale}
int ScaledDotProductAttentionBinding(const val& query, const val& key, const val& value,
                                     const val& options, CallResult& result) {
  SdpaOptions o;
  o.attn_mask = MaskFrom(options["attn_mask"]);
  o.is_causal = options["is_causal"].as<bool>();
  o.scale = options["scale"].as<float>();
  return result.Record(ScaledDotProductAttention(TensorFrom(query), TensorFrom(key),
                                                 TensorFrom(value), o, &result.output,
                                                 g_pool.get()));
}

uintptr_t Allocate(size_t bytes) { return reinterpret_cast<uintptr_t>(malloc(bytes)); }
void Free(uintptr_t ptr) { free(reinterpret_cast<void*>(ptr)); }

EMSCRIPTEN_BINDINGS(mha) {
  emscripten::function("initialize", &Initialize);
  emscripten::function("info", &Info);
  emscripten::function("heapInfo", &HeapInfo);
  emscripten::function("allocate", &Allocate);
  emscripten::function("free", &Free);
  emscripten::function("scaledDotProductAttention", &ScaledDotProductAttentionBinding);
  emscripten::class_<CallResult>("CallResult")
      .constructor<>()
      .function("message", &CallResult::message)
      .function("outputPtr", &CallResult::outputPtr)
      .function("outputShape", &CallResult::outputShape)
      .function("weightsPtr", &CallResult::weightsPtr)
      .function("weightsShape", &CallResult::weightsShape);
  emscripten::class_<MultiheadAttentionBinding>("MultiheadAttention")
      .constructor<>()
      .function("create", &MultiheadAttentionBinding::create)
      .function("parameters", &MultiheadAttentionBinding::parameters)
      .function("loadStateDict", &MultiheadAttentionBinding::loadStateDict)
      .function("loadSafetensors", &MultiheadAttentionBinding::loadSafetensors)
      .function("forward", &MultiheadAttentionBinding::forward);
}

}  // namespace
}  // namespace mha
