// Embind glue between web/src (the JS API) and the core. No computation here:
// JS copies tensors into the WASM heap and passes their addresses and shapes;
// each call returns a StatusCode and leaves its results (or the error
// message) in a CallResult. Forward and scaledDotProductAttention, which
// decoding calls once per token, take a call frame instead of JS objects (see
// bindings/call_frame.h): reading JS objects through Embind's val costs about a
// microsecond per property, which made a small step's glue cost ten times its
// computation.
#include <emscripten/bind.h>
#include <emscripten/val.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hwy/highway.h"
#include "hwy/targets.h"
#include "src/core/option_rules.h"
#include "src/kernels/kernels.h"
#include "bindings/call_frame.h"
#include "bindings/rotary_from_js.h"
#include "src/multihead_attention.h"
#include "src/io/safetensors.h"
#include "src/io/weight_layouts.h"

namespace mha {
namespace {

using emscripten::val;

// The persistent pool, sized once by Initialize. Under pthreads every worker
// is a Web Worker the loader preallocates (num_threads - 1 of them, see
// web/src/load.js): one more would make pthread_create wait for a Worker that
// the blocked main thread can never spawn.
std::unique_ptr<ThreadPool> g_pool;

int Initialize(int num_threads) {
  if (g_pool) return static_cast<int>(StatusCode::kFailedPrecondition);
  if (num_threads < 1) num_threads = 1;
  g_pool = std::make_unique<ThreadPool>(static_cast<size_t>(num_threads));
  return static_cast<int>(StatusCode::kOk);
}

val Info() {
  val info = val::object();
  info.set("target", std::string(hwy::TargetName(HWY_TARGET)));
  info.set("gemmTile", std::string(kernels::GemmTileName(kernels::GemmTileRows())));
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

// The core's option rules (src/core/option_rules.h), which
// scripts/option_rules.mjs writes into web/src/option_rules.js for the JS
// checks, and the core's check by one of them (tests/js/option_rules.test.js
// holds the JS checks to it); "" when the value is allowed.
const std::vector<const OptionRule*>& AllOptionRules() {
  static const std::vector<const OptionRule*> rules = {
      &kModuleScoreRules.scale, &kModuleScoreRules.softcap, &kSdpaScoreRules.scale,
      &kSdpaScoreRules.softcap, &kModuleRules.dropout, &kModuleRules.qk_norm_eps,
      &kModuleRules.qk_norm_weight_offset};
  return rules;
}

val OptionRulesBinding() {
  val rules = val::array();
  for (const OptionRule* rule : AllOptionRules()) {
    val row = val::object();
    row.set("call", std::string(rule->call));
    row.set("name", std::string(rule->name));
    row.set("min", rule->min);
    row.set("minExcluded", rule->min_excluded);
    row.set("max", rule->max);
    row.set("expected", std::string(rule->expected));
    rules.call<void>("push", row);
  }
  return rules;
}

// The sizes the core refuses (src/core/option_rules.h; SIZE_MAX: a cache's
// storage must be below it), for the same file.
val SizeLimitsBinding() {
  val limits = val::object();
  limits.set("maxDim", static_cast<double>(kMaxDim));
  limits.set("maxCacheLength", static_cast<double>(kMaxCacheLength));
  limits.set("addressSpace", static_cast<double>(SIZE_MAX));
  return limits;
}

std::string CheckOptionBinding(const std::string& call, const std::string& name, float value) {
  for (const OptionRule* rule : AllOptionRules()) {
    if (call == rule->call && name == rule->name) return CheckOption(*rule, value).message();
  }
  return "no rule for " + call + " " + name;
}

// JS checks that every dim is a positive safe integer before calling.
int64_t Dim(const val& number) { return static_cast<int64_t>(number.as<double>()); }

Shape ShapeFrom(const val& dims) {
  Shape shape;
  const int length = dims["length"].as<int>();
  for (int i = 0; i < length; ++i) shape.push_back(Dim(dims[i]));
  return shape;
}

// A state_dict entry's {ptr, shape}.
TensorView TensorFrom(const val& tensor) {
  return TensorView{reinterpret_cast<const float*>(tensor["ptr"].as<uintptr_t>()),
                    ShapeFrom(tensor["shape"])};
}

// JS checks the name first (web/src/config.js, the same message).
Status WeightsDtypeFrom(const std::string& name, WeightsDtype* out) {
  const std::pair<const char*, WeightsDtype> names[] = {
      {"auto", WeightsDtype::kAuto}, {"float32", WeightsDtype::kFloat32},
      {"float16", WeightsDtype::kFloat16}, {"bfloat16", WeightsDtype::kBFloat16},
      {"int8", WeightsDtype::kInt8}};
  for (const auto& [known, dtype] : names) {
    if (name == known) {
      *out = dtype;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("weightsDtype: expected 'auto', 'float32', 'float16', "
                                 "'bfloat16' or 'int8', received the string '" + name + "'");
}

// JS checked that it is one of KVCacheDtypeName's names.
KVCacheDtype DtypeFrom(const val& dtype) {
  const std::string name = dtype.as<std::string>();
  if (name == "float16") return KVCacheDtype::kFloat16;
  return name == "bfloat16" ? KVCacheDtype::kBFloat16 : KVCacheDtype::kFloat32;
}

// What one call left behind for JS: the error message, a plain JS value, or
// the output tensors of a frame call (JS copies them out, then clears them).
class CallResult {
 public:
  int Record(const Status& status) {
    message_ = status.message();
    return static_cast<int>(status.code());
  }
  std::string message() const { return message_; }
  val getValue() const { return value; }
  void clear() {
    output = Tensor();
    weights = Tensor();
    std::vector<uint8_t>().swap(bytes);
  }
  Tensor output;
  Tensor weights;
  std::vector<uint8_t> bytes;  // a saved cache's, until JS copied them
  val value = val::undefined();  // a call's plain JS result, if any

 private:
  std::string message_;
};

// options: {prefix, layout: 'auto' | 'torch' | ..., names: {role: module}};
// JS checked the types.
Status WeightOptionsFrom(const val& options, WeightOptions* out) {
  out->prefix = options["prefix"].as<std::string>();
  MHA_RETURN_IF_ERROR(ParseLayout(options["layout"].as<std::string>(), &out->layout));
  const val names = options["names"];
  const val roles = val::global("Object").call<val>("keys", names);
  const int length = roles["length"].as<int>();
  for (int i = 0; i < length; ++i) {
    const std::string role = roles[i].as<std::string>();
    out->names[role] = names[role].as<std::string>();
  }
  return Status::Ok();
}

// shards: [{ptr, size, fileSize}]: the first `size` bytes of each file (at
// least its header), copied into the heap.
Status ParseShards(const val& shards, SafetensorsFile* out) {
  std::vector<SafetensorsShard> list;
  const int length = shards["length"].as<int>();
  for (int i = 0; i < length; ++i) {
    list.push_back({reinterpret_cast<const uint8_t*>(shards[i]["ptr"].as<uintptr_t>()),
                    shards[i]["size"].as<size_t>(),
                    static_cast<uint64_t>(shards[i]["fileSize"].as<double>())});
  }
  return ParseSafetensorsShards(list, out);
}

val ModuleNamesToJS(const AttentionModule& m) {
  val names = val::object();
  for (const auto& [role, module] : {std::make_pair("q", &m.q), std::make_pair("k", &m.k),
                                     std::make_pair("v", &m.v), std::make_pair("qkv", &m.qkv),
                                     std::make_pair("out", &m.out)}) {
    if (!module->empty()) names.set(role, module->substr(m.prefix.size()));
  }
  return names;
}

// [{prefix, layout, names, embedDim, kdim, vdim, qSize, kSize, vSize, bias, biasKV, sinks,
//   qkNorm}]
int ListAttentionModulesBinding(const val& shards, CallResult& result) {
  SafetensorsFile file;
  const Status status = ParseShards(shards, &file);
  if (!status.ok()) return result.Record(status);
  result.value = val::array();
  for (const AttentionModuleInfo& info : ListAttentionModules(TensorShapes(file))) {
    val entry = val::object();
    entry.set("prefix", info.module.prefix);
    entry.set("layout", std::string(LayoutName(info.module.layout)));
    entry.set("names", ModuleNamesToJS(info.module));
    for (const auto& [key, dim] : {std::make_pair("embedDim", info.embed_dim),
                                   std::make_pair("kdim", info.kdim),
                                   std::make_pair("vdim", info.vdim),
                                   std::make_pair("qSize", info.q_size),
                                   std::make_pair("kSize", info.k_size),
                                   std::make_pair("vSize", info.v_size)}) {
      entry.set(key, static_cast<double>(dim));
    }
    entry.set("bias", info.bias);
    entry.set("biasKV", info.bias_kv);
    entry.set("sinks", info.sinks);
    val norm = val::null();
    if (!info.qk_norm.empty()) {
      norm = val::object();
      norm.set("over", info.qk_norm);
      norm.set("bias", info.qk_norm_bias);
    }
    entry.set("qkNorm", norm);
    result.value.call<void>("push", entry);
  }
  return result.Record(status);
}

// A KVCache for JS: made by MultiheadAttentionBinding::createKVCache or
// createFree (the functional form's).
class KVCacheBinding {
 public:
  // config: {batch_size, num_kv_heads, head_dim, v_head_dim, max_length, dtype, rolling}
  int createFree(const val& config, CallResult& result) {
    KVCacheConfig c;
    c.batch_size = Dim(config["batch_size"]);
    c.num_kv_heads = Dim(config["num_kv_heads"]);
    c.head_dim = Dim(config["head_dim"]);
    c.v_head_dim = Dim(config["v_head_dim"]);
    c.max_length = Dim(config["max_length"]);
    c.dtype = DtypeFrom(config["dtype"]);
    c.rolling = config["rolling"].as<bool>();
    return result.Record(KVCache::Create(c, &cache_));
  }
  double length() const { return static_cast<double>(cache_->length()); }
  double bytes() const { return static_cast<double>(cache_->bytes()); }
  double held() const { return static_cast<double>(cache_->held()); }
  // Per batch entry, the pad slots it remembers: an array of numbers.
  val padding() const {
    val out = val::array();
    for (int64_t pads : cache_->padding()) out.call<void>("push", static_cast<double>(pads));
    return out;
  }
  int truncate(double length, CallResult& result) {
    return result.Record(cache_->Truncate(static_cast<int64_t>(length)));
  }
  // `indices`: the address of `count` int32 in the heap.
  int reorder(uintptr_t indices, double count, CallResult& result) {
    return result.Record(cache_->Reorder(reinterpret_cast<const int32_t*>(indices),
                                         static_cast<size_t>(count)));
  }
  int resize(double max_length, CallResult& result) {
    return result.Record(cache_->Resize(static_cast<int64_t>(max_length)));
  }
  // {batchSize, maxLength, dtype, rolling, numKVHeads, headDim, vHeadDim}: what
  // JS answers from, for a cache it did not configure (loaded, selected).
  val config() const {
    const KVCacheConfig& c = cache_->config();
    val out = val::object();
    out.set("batchSize", static_cast<double>(c.batch_size));
    out.set("maxLength", static_cast<double>(c.max_length));
    out.set("dtype", std::string(KVCacheDtypeName(c.dtype)));
    if (c.keep >= 0) {
      val rolling = val::object();
      rolling.set("keep", static_cast<double>(c.keep));
      out.set("rolling", rolling);
    } else {
      out.set("rolling", c.rolling);
    }
    out.set("numKVHeads", static_cast<double>(c.num_kv_heads));
    out.set("headDim", static_cast<double>(c.head_dim));
    out.set("vHeadDim", static_cast<double>(c.v_head_dim));
    return out;
  }
  // The saved bytes in result.bytes; their {ptr, size} as its value.
  int save(CallResult& result) {
    const Status status = cache_->Save(&result.bytes);
    if (status.ok()) {
      result.value = val::object();
      const uintptr_t ptr = reinterpret_cast<uintptr_t>(result.bytes.data());
      result.value.set("ptr", static_cast<double>(ptr));
      result.value.set("size", static_cast<double>(result.bytes.size()));
    }
    return result.Record(status);
  }
  // `bytes`: the address of `size` bytes in the heap.
  int loadFree(uintptr_t bytes, double size, CallResult& result) {
    return result.Record(KVCache::Load(reinterpret_cast<const uint8_t*>(bytes),
                                       static_cast<size_t>(size), &cache_));
  }
  // `out` becomes the new cache; `indices`: the address of `count` int32.
  int select(KVCacheBinding& out, uintptr_t indices, double count, CallResult& result) const {
    return result.Record(cache_->Select(reinterpret_cast<const int32_t*>(indices),
                                        static_cast<size_t>(count), &out.cache_));
  }
  int clone(KVCacheBinding& out, CallResult& result) const {
    return result.Record(cache_->Clone(&out.cache_));
  }

  std::unique_ptr<KVCache> cache_;
};

// A frame call's cache: a KVCacheBinding or null.
KVCache* CacheFrom(KVCacheBinding* cache) { return cache ? cache->cache_.get() : nullptr; }

// A streamed .safetensors load, held by JS between its steps.
struct SafetensorsLoadBinding {
  MultiheadAttention::StreamedLoad load;
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
    c.num_kv_heads = Dim(config["num_kv_heads"]);
    c.scale = config["scale"].as<float>();
    c.softcap = config["softcap"].as<float>();
    c.window.left = Dim(config["window"]["left"]);
    c.window.right = Dim(config["window"]["right"]);
    c.sinks = config["sinks"].as<bool>();
    const val alibi = config["alibi"];
    if (!alibi.isUndefined()) {
      c.alibi.enabled = true;
      c.alibi.symmetric = alibi["symmetric"].as<bool>();
      if (!alibi["slopes"].isUndefined()) {
        c.alibi.slopes = emscripten::convertJSArrayToNumberVector<float>(alibi["slopes"]);
      }
    }
    const val norm = config["qk_norm"];
    if (!norm.isUndefined()) {
      c.qk_norm.enabled = true;
      c.qk_norm.type = norm["type"].as<std::string>() == "layer" ? QkNormType::kLayer
                                                                 : QkNormType::kRms;
      c.qk_norm.over = norm["over"].as<std::string>() == "all" ? QkNormOver::kAll
                                                               : QkNormOver::kHead;
      c.qk_norm.eps = norm["eps"].as<float>();
      c.qk_norm.weight_offset = norm["weight_offset"].as<float>();
    }
    if (!config["rotary"].isUndefined()) c.rotary = RotaryFromJS(config["rotary"]);
    const Status dtype = WeightsDtypeFrom(config["weights_dtype"].as<std::string>(), &c.weights_dtype);
    if (!dtype.ok()) return result.Record(dtype);
    return result.Record(MultiheadAttention::Create(c, &module_));
  }

  // keep >= 0: a StreamingLLM cache (rolling: { keep }).
  int createKVCache(KVCacheBinding& out, double batch_size, double max_length,
                    const val& dtype, bool rolling, double keep, CallResult& result) {
    const int64_t n = static_cast<int64_t>(batch_size), max = static_cast<int64_t>(max_length);
    return result.Record(
        keep >= 0 ? module_->CreateStreamingKVCache(n, max, DtypeFrom(dtype),
                                                    static_cast<int64_t>(keep), &out.cache_)
                  : module_->CreateKVCache(n, max, DtypeFrom(dtype), rolling, &out.cache_));
  }

  // `bytes`: the address of `size` bytes in the heap (KVCache::Save's).
  int loadKVCache(KVCacheBinding& out, uintptr_t bytes, double size, CallResult& result) {
    return result.Record(module_->LoadKVCache(reinterpret_cast<const uint8_t*>(bytes),
                                              static_cast<size_t>(size), &out.cache_));
  }

  double memory() const { return static_cast<double>(module_->memory()); }

  // entries: [{name, ptr, shape}]; ptr 0 for tensors JS did not copy (those
  // outside the prefix, named for error messages only).
  int loadStateDict(const val& entries, const val& options, CallResult& result) {
    WeightOptions o;
    const Status parsed = WeightOptionsFrom(options, &o);
    if (!parsed.ok()) return result.Record(parsed);
    std::map<std::string, TensorView> tensors;
    const int length = entries["length"].as<int>();
    for (int i = 0; i < length; ++i) {
      tensors[entries[i]["name"].as<std::string>()] = TensorFrom(entries[i]);
    }
    return result.Record(module_->LoadStateDict(tensors, o));
  }

  // A .safetensors load, streamed (MultiheadAttention::StartLoad): from the
  // shards' headers, the tensors it reads, [{name, shard, begin, end}] (byte
  // offsets in that file), after every check on names and shapes; the new
  // weights are allocated. The headers may be freed afterwards.
  int startLoad(SafetensorsLoadBinding& load, const val& shards, const val& options,
                CallResult& result) const {
    SafetensorsFile file;
    WeightOptions o;
    std::vector<std::string> names;
    Status status = ParseShards(shards, &file);
    if (status.ok()) status = WeightOptionsFrom(options, &o);
    if (status.ok()) status = module_->StartLoad(file, o, &load.load, &names);
    if (!status.ok()) return result.Record(status);
    result.value = val::array();
    for (const std::string& name : names) {
      const SafetensorsEntry& entry = file.tensors.at(name);
      val source = val::object();
      source.set("name", name);
      source.set("shard", static_cast<double>(entry.shard));
      source.set("begin", static_cast<double>(entry.offset));
      source.set("end", static_cast<double>(entry.offset + entry.size));
      result.value.call<void>("push", source);
    }
    return result.Record(status);
  }

  // Then each of those tensors: its bytes at `ptr` (read during the call only).
  int feedLoad(SafetensorsLoadBinding& load, const std::string& name, uintptr_t ptr,
               CallResult& result) const {
    return result.Record(
        module_->FeedLoad(&load.load, name, reinterpret_cast<const uint8_t*>(ptr)));
  }

  // Once every one is fed: the new weights replace the module's.
  int finishLoad(SafetensorsLoadBinding& load, CallResult& result) {
    return result.Record(module_->FinishLoad(&load.load));
  }

  // A frame of query, key, value (absent: attend the cache only),
  // key_padding_mask, attn_mask, positions (absent: P + i) and the flags;
  // `cache` may be null.
  int forward(uintptr_t frame_address, KVCacheBinding* cache, CallResult& result) {
    Frame frame(frame_address);
    ForwardOptions o;
    o.key_padding_mask = frame.Mask(Frame::kKeyPaddingMask);
    o.attn_mask = frame.Mask(Frame::kAttnMask);
    o.need_weights = frame.flag(Frame::kNeedWeights);
    o.average_attn_weights = frame.flag(Frame::kAverageAttnWeights);
    o.is_causal = frame.flag(Frame::kIsCausal);
    o.cache = CacheFrom(cache);
    o.positions = frame.Integers(Frame::kPositions, &o.num_positions);
    ForwardResult out;
    const Status status = module_->Forward(frame.Tensor(Frame::kQuery), frame.Tensor(Frame::kKey),
                                           frame.Tensor(Frame::kValue), o, &out, g_pool.get());
    result.output = std::move(out.output);
    result.weights = std::move(out.weights);
    frame.SetResults(result.output, result.weights);
    return result.Record(status);
  }

 private:
  std::unique_ptr<MultiheadAttention> module_;
};

// A frame of query, key, value (absent: attend the cache only), attn_mask,
// is_causal, enable_gqa, scale (0: the default), softcap (0: off), the
// window's sides (-1: no bound) and sinks (absent: none); `cache` may be null.
int ScaledDotProductAttentionBinding(uintptr_t frame_address, KVCacheBinding* cache,
                                     CallResult& result) {
  Frame frame(frame_address);
  SdpaOptions o;
  o.attn_mask = frame.Mask(Frame::kAttnMask);
  o.is_causal = frame.flag(Frame::kIsCausal);
  o.scale = frame.number(Frame::kScale);
  o.softcap = frame.number(Frame::kSoftcap);
  o.window.left = frame.integer(Frame::kWindowLeft);
  o.window.right = frame.integer(Frame::kWindowRight);
  o.sinks = frame.Tensor(Frame::kSinks);
  o.alibi_slopes = frame.Tensor(Frame::kAlibiSlopes);
  o.enable_gqa = frame.flag(Frame::kEnableGqa);
  o.cache = CacheFrom(cache);
  result.weights = Tensor();
  const Status status = ScaledDotProductAttention(frame.Tensor(Frame::kQuery),
                                                  frame.Tensor(Frame::kKey),
                                                  frame.Tensor(Frame::kValue), o, &result.output,
                                                  g_pool.get());
  frame.SetResults(result.output, result.weights);
  return result.Record(status);
}

uintptr_t Allocate(size_t bytes) { return reinterpret_cast<uintptr_t>(malloc(bytes)); }
void Free(uintptr_t ptr) { free(reinterpret_cast<void*>(ptr)); }

EMSCRIPTEN_BINDINGS(mha) {
  emscripten::function("initialize", &Initialize);
  emscripten::function("info", &Info);
  emscripten::function("heapInfo", &HeapInfo);
  emscripten::function("optionRules", &OptionRulesBinding);
  emscripten::function("checkOption", &CheckOptionBinding);
  emscripten::function("sizeLimits", &SizeLimitsBinding);
  emscripten::function("allocate", &Allocate);
  emscripten::function("free", &Free);
  emscripten::function("scaledDotProductAttention", &ScaledDotProductAttentionBinding,
                       emscripten::allow_raw_pointers());
  emscripten::function("listAttentionModules", &ListAttentionModulesBinding);
  emscripten::function("frameLayout", &Frame::Layout);
  emscripten::class_<CallResult>("CallResult")
      .constructor<>()
      .function("message", &CallResult::message)
      .function("value", &CallResult::getValue)
      .function("clear", &CallResult::clear);
  emscripten::class_<MultiheadAttentionBinding>("MultiheadAttention")
      .constructor<>()
      .function("create", &MultiheadAttentionBinding::create)
      .function("memory", &MultiheadAttentionBinding::memory)
      .function("loadStateDict", &MultiheadAttentionBinding::loadStateDict)
      .function("startLoad", &MultiheadAttentionBinding::startLoad)
      .function("feedLoad", &MultiheadAttentionBinding::feedLoad)
      .function("finishLoad", &MultiheadAttentionBinding::finishLoad)
      .function("createKVCache", &MultiheadAttentionBinding::createKVCache)
      .function("loadKVCache", &MultiheadAttentionBinding::loadKVCache)
      .function("forward", &MultiheadAttentionBinding::forward, emscripten::allow_raw_pointers());
  emscripten::class_<SafetensorsLoadBinding>("SafetensorsLoad").constructor<>();
  emscripten::class_<KVCacheBinding>("KVCache")
      .constructor<>()
      .function("createFree", &KVCacheBinding::createFree)
      .function("length", &KVCacheBinding::length)
      .function("bytes", &KVCacheBinding::bytes)
      .function("held", &KVCacheBinding::held)
      .function("padding", &KVCacheBinding::padding)
      .function("truncate", &KVCacheBinding::truncate)
      .function("reorder", &KVCacheBinding::reorder)
      .function("resize", &KVCacheBinding::resize)
      .function("config", &KVCacheBinding::config)
      .function("save", &KVCacheBinding::save)
      .function("loadFree", &KVCacheBinding::loadFree)
      .function("select", &KVCacheBinding::select)
      .function("clone", &KVCacheBinding::clone);
}

}  // namespace
}  // namespace mha
