#include "tests/native/fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "src/io/json.h"
#include "src/kernels/kernels.h"
#include "src/io/safetensors.h"
#include "tests/native/reference.h"

namespace mha_test {
namespace {

constexpr char kParamPrefix[] = "param.";

// Reads config fields, remembering the first problem.
class ConfigReader {
 public:
  explicit ConfigReader(const mha::json::Value& config) : config_(config) {}

  void Int(const char* key, int64_t* out) {
    const mha::json::Value* v = Get(key, mha::json::Type::kNumber);
    if (v && !v->is_integer) Fail(std::string(key) + " must be an integer");
    if (v && v->is_integer) *out = v->integer;
  }
  void Bool(const char* key, bool* out) {
    if (const mha::json::Value* v = Get(key, mha::json::Type::kBool)) *out = v->boolean;
  }
  void Float(const char* key, float* out) {
    if (const mha::json::Value* v = Get(key, mha::json::Type::kNumber)) {
      *out = static_cast<float>(v->number);
    }
  }
  void String(const char* key, std::string* out) {
    if (const mha::json::Value* v = Get(key, mha::json::Type::kString)) *out = v->string;
  }
  const mha::Status& status() const { return status_; }

 private:
  const mha::json::Value* Get(const char* key, mha::json::Type type) {
    const mha::json::Value* v = config_.Find(key);
    if (v == nullptr) {
      Fail(std::string("config lacks \"") + key + "\"");
    } else if (v->type != type) {
      Fail(std::string("config \"") + key + "\" must be a " + mha::json::TypeName(type) + ", got " +
           mha::json::TypeName(v->type));
      return nullptr;
    }
    return v;
  }
  void Fail(const std::string& message) {
    if (status_.ok()) status_ = mha::Status::InvalidArgument(message);
  }

  const mha::json::Value& config_;
  mha::Status status_;
};

mha::Status ReadConfig(const std::string& text, Fixture* f) {
  mha::json::Value config;
  MHA_RETURN_IF_ERROR(mha::json::Parse(text.data(), text.size(), &config));
  if (config.type != mha::json::Type::kObject) {
    return mha::Status::InvalidArgument("config must be a JSON object");
  }
  ConfigReader r(config);
  r.String("kind", &f->kind);
  if (f->kind != "decode") r.Bool("is_causal", &f->is_causal);
  if (f->kind == "sdpa") {
    r.Float("scale", &f->scale);
  } else if (f->kind == "mha") {
    r.Int("embed_dim", &f->embed_dim);
    r.Int("num_heads", &f->num_heads);
    r.Bool("bias", &f->bias);
    r.Bool("add_bias_kv", &f->add_bias_kv);
    r.Bool("add_zero_attn", &f->add_zero_attn);
    r.Int("kdim", &f->kdim);
    r.Int("vdim", &f->vdim);
    r.Bool("batch_first", &f->batch_first);
    r.Int("qk_head_dim", &f->qk_head_dim);
    r.Int("v_head_dim", &f->v_head_dim);
    r.Bool("need_weights", &f->need_weights);
    r.Bool("average_attn_weights", &f->average_attn_weights);
    r.String("param_dtype", &f->param_dtype);
  } else if (f->kind != "decode" && r.status().ok()) {
    return mha::Status::InvalidArgument("config kind must be \"mha\", \"sdpa\" or \"decode\", got \"" +
                                        f->kind + "\"");
  }
  return r.status();
}

mha::Status Load(const std::string& path, Fixture* f) {
  f->name = std::filesystem::path(path).stem().string();
  MHA_RETURN_IF_ERROR(ReadFile(path, &f->bytes));
  MHA_RETURN_IF_ERROR(mha::ParseSafetensors(f->bytes.data(), f->bytes.size(), &f->file));
  auto config = f->file.metadata.find("config");
  if (config == f->file.metadata.end()) {
    return mha::Status::InvalidArgument("no \"config\" in __metadata__");
  }
  f->config_text = config->second;
  return ReadConfig(config->second, f);
}

// "[1, 0, 3]": the row-major index of flat element `i`.
std::string IndexString(size_t i, const mha::Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = static_cast<int64_t>(i) % shape[d];
    i /= static_cast<size_t>(shape[d]);
  }
  std::ostringstream s;
  s << "[";
  for (size_t d = 0; d < index.size(); ++d) s << (d ? ", " : "") << index[d];
  s << "]";
  return s.str();
}

}  // namespace

mha::Status ReadFile(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return mha::Status::InvalidArgument("cannot open " + path);
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return mha::Status::InvalidArgument("cannot read " + path);
  return mha::Status::Ok();
}

mha::Status Fixture::View(const std::string& tensor, mha::TensorView* out) {
  auto entry = file.tensors.find(tensor);
  if (entry == file.tensors.end()) {
    return mha::Status::InvalidArgument(name + ": no tensor \"" + tensor + "\"");
  }
  auto converted = floats_.find(tensor);
  if (converted == floats_.end()) {
    std::vector<float> values;
    MHA_RETURN_IF_ERROR(mha::ToFloat32(tensor, entry->second, &values));
    converted = floats_.emplace(tensor, std::move(values)).first;
  }
  if (out != nullptr) *out = mha::TensorView{converted->second.data(), entry->second.shape};
  return mha::Status::Ok();
}

mha::Status Fixture::Mask(const std::string& tensor, mha::MaskView* out) {
  *out = mha::MaskView();
  auto entry = file.tensors.find(tensor);
  if (entry == file.tensors.end()) return mha::Status::Ok();
  if (entry->second.dtype == mha::DType::kBool) {
    *out = mha::MaskView::Bool(entry->second.data, entry->second.shape);
    return mha::Status::Ok();
  }
  mha::TensorView view;
  MHA_RETURN_IF_ERROR(View(tensor, &view));
  *out = mha::MaskView::Float(view.data, view.shape);
  return mha::Status::Ok();
}

mha::Status Fixture::Params(std::map<std::string, mha::TensorView>* out) {
  out->clear();
  const std::string prefix = kParamPrefix;
  for (const auto& entry : file.tensors) {
    if (entry.first.compare(0, prefix.size(), prefix) != 0) continue;
    MHA_RETURN_IF_ERROR(View(entry.first, &(*out)[entry.first.substr(prefix.size())]));
  }
  return mha::Status::Ok();
}

mha::Status Fixture::Expected(const std::string& tensor, mha::Tensor* out) {
  mha::TensorView view;
  MHA_RETURN_IF_ERROR(View(tensor, &view));
  out->data.assign(view.data, view.data + mha::NumElements(view.shape));
  out->shape = view.shape;
  return mha::Status::Ok();
}

mha::MultiheadAttentionConfig Fixture::ModuleConfig() const {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = embed_dim;
  config.num_heads = num_heads;
  config.bias = bias;
  config.add_bias_kv = add_bias_kv;
  config.add_zero_attn = add_zero_attn;
  config.kdim = kdim;
  config.vdim = vdim;
  config.batch_first = batch_first;
  config.qk_head_dim = qk_head_dim;
  config.v_head_dim = v_head_dim;
  config.weights_dtype = CurrentPrecision().weights;
  return config;
}

mha::Status Fixture::Options(mha::ForwardOptions* out) {
  *out = mha::ForwardOptions();
  MHA_RETURN_IF_ERROR(Mask("input.key_padding_mask", &out->key_padding_mask));
  MHA_RETURN_IF_ERROR(Mask("input.attn_mask", &out->attn_mask));
  out->need_weights = need_weights;
  out->average_attn_weights = average_attn_weights;
  out->is_causal = is_causal;
  return mha::Status::Ok();
}

mha::Status Fixture::Options(mha::SdpaOptions* out) {
  *out = mha::SdpaOptions();
  MHA_RETURN_IF_ERROR(Mask("input.attn_mask", &out->attn_mask));
  out->is_causal = is_causal;
  out->scale = scale;
  return mha::Status::Ok();
}

std::vector<std::string> ListFixtures(const std::string& subfolder) {
  std::vector<std::string> paths;
  std::error_code error;
  const std::string dir = subfolder.empty() ? MHA_FIXTURE_DIR : MHA_FIXTURE_DIR "/" + subfolder;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".safetensors") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

mha::Status LoadFixture(const std::string& path, Fixture* out) {
  *out = Fixture();
  mha::Status status = Load(path, out);
  if (!status.ok()) return mha::Status(status.code(), path + ": " + status.message());
  return status;
}

Precision& CurrentPrecision() {
  static Precision precision;
  return precision;
}

ScopedInt8Weights::ScopedInt8Weights() : saved_(CurrentPrecision()) {
  CurrentPrecision() = {mha::WeightsDtype::kInt8, kInt8AbsTolerance, kInt8RelTolerance, 0.0};
}

ScopedInt8Weights::~ScopedInt8Weights() {
  std::printf("int8 weights: max |output - PyTorch float32| %.3g\n",
              CurrentPrecision().max_abs_error);
  CurrentPrecision() = saved_;
}

mha::Status CausalStep(mha::MultiheadAttention& module, mha::KVCache* cache, int64_t batch,
                       int64_t length, uint32_t seed, std::vector<float>* output) {
  const int64_t E = module.config().embed_dim;
  const std::vector<float> x = RandomVector(static_cast<size_t>(batch * length * E), seed);
  mha::ForwardOptions o;
  o.is_causal = true;
  o.need_weights = false;
  o.cache = cache;
  mha::ForwardResult r;
  const mha::TensorView t{x.data(), {batch, length, E}};
  const mha::Status status = module.Forward(t, t, t, o, &r);
  *output = r.output.data;
  return status;
}

mha::MultiheadAttentionConfig DecoderConfig(int64_t window_left) {
  mha::MultiheadAttentionConfig m;
  m.embed_dim = 16;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.batch_first = true;
  m.rotary.enabled = true;
  m.window.left = window_left;
  return m;
}

std::unique_ptr<mha::MultiheadAttention> RandomModule(const mha::MultiheadAttentionConfig& c,
                                                      uint32_t first_seed) {
  std::unique_ptr<mha::MultiheadAttention> module;
  EXPECT_TRUE(mha::MultiheadAttention::Create(c, &module).ok());
  uint32_t seed = first_seed;
  for (const mha::ParameterSpec& spec : module->Parameters()) {
    const std::vector<float> w = RandomVector(static_cast<size_t>(mha::NumElements(spec.shape)), seed++);
    EXPECT_TRUE(module->LoadParameter(spec.name, w.data(), spec.shape).ok());
  }
  return module;
}

void ExpectInvalidArgument(const mha::Status& status, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), mha::StatusCode::kInvalidArgument);
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "message '" << status.message() << "' lacks '" << f << "'";
  }
}

void ExpectClose(const mha::Tensor& actual, const std::vector<float>& expected,
                 const mha::Shape& expected_shape, const std::string& what) {
  if (actual.shape != expected_shape) {
    ADD_FAILURE() << what << ": shape " << mha::ShapeString(actual.shape) << ", expected "
                  << mha::ShapeString(expected_shape);
    return;
  }
  if (actual.data.size() != expected.size() ||
      static_cast<int64_t>(expected.size()) != mha::NumElements(expected_shape)) {
    ADD_FAILURE() << what << ": " << actual.data.size() << " values for " << expected.size()
                  << " expected of shape " << mha::ShapeString(expected_shape);
    return;
  }
  Precision& precision = CurrentPrecision();
  const double kAbsTolerance = precision.abs_tolerance, kRelTolerance = precision.rel_tolerance;
  size_t nan_mismatches = 0, first_nan_mismatch = 0;
  double worst_excess = 0.0;  // error / allowed error, > 1 fails
  size_t worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = actual.data[i], e = expected[i];
    if (std::isnan(a) != std::isnan(e)) {
      if (nan_mismatches++ == 0) first_nan_mismatch = i;
      continue;
    }
    if (std::isnan(e) || a == e) continue;  // also equal infinities
    if (!std::isinf(a) && !std::isinf(e)) {
      precision.max_abs_error = std::max(precision.max_abs_error, std::abs(a - e));
    }
    const double excess = std::isinf(a) || std::isinf(e)
                              ? HUGE_VAL
                              : std::abs(a - e) / (kAbsTolerance + kRelTolerance * std::abs(e));
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (nan_mismatches > 0) {
    ADD_FAILURE() << what << ": " << nan_mismatches << " NaN position(s) differ, first at "
                  << IndexString(first_nan_mismatch, expected_shape) << ": actual "
                  << actual.data[first_nan_mismatch] << ", expected "
                  << expected[first_nan_mismatch];
  }
  if (worst_excess > 1.0) {
    ADD_FAILURE() << what << ": worst element " << IndexString(worst, expected_shape) << " actual "
                  << actual.data[worst] << ", expected " << expected[worst] << " (|diff| "
                  << std::abs(double{actual.data[worst]} - expected[worst]) << " > "
                  << kAbsTolerance << " + " << kRelTolerance << " * |expected|)";
  }
}

void ExpectClose(const mha::Tensor& actual, const mha::Tensor& expected, const std::string& what) {
  ExpectClose(actual, expected.data, expected.shape, what);
}

std::vector<uint8_t> SafetensorsOf(const mha::MultiheadAttention& m,
                                   const std::map<std::string, std::vector<float>>& params,
                                   const std::string& matrices, const std::set<std::string>& names) {
  std::string header = "{";
  std::vector<uint8_t> data;
  const auto put = [&data](uint32_t bits, int bytes) {
    for (int i = 0; i < bytes; ++i) data.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  };
  for (const mha::ParameterSpec& spec : m.Parameters()) {
    if (!names.empty() && names.count(spec.name) == 0) continue;
    const bool narrow = spec.shape.size() == 2 && matrices != "F32";
    const size_t begin = data.size();
    for (float x : params.at(spec.name)) {
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof(bits));
      if (!narrow) {
        put(bits, 4);
      } else if (matrices == "BF16") {
        put(bits >> 16, 2);
      } else {
        uint16_t h;
        mha::kernels::FloatToHalf(&x, 1, &h);
        put(h, 2);
      }
    }
    if (header.size() > 1) header += ",";
    header += "\"" + spec.name + "\":{\"dtype\":\"" + (narrow ? matrices : "F32") + "\",\"shape\":[";
    for (size_t i = 0; i < spec.shape.size(); ++i) {
      header += (i ? "," : "") + std::to_string(spec.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  std::vector<uint8_t> file;
  file.reserve(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) {
    file.push_back(static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i)));
  }
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

}  // namespace mha_test
