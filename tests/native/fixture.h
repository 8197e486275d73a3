// Loads the reference fixtures in tests/fixtures (format: tests/fixtures/README.md)
// and compares results against them.
#ifndef MHA_TESTS_NATIVE_FIXTURE_H_
#define MHA_TESTS_NATIVE_FIXTURE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "src/multihead_attention.h"
#include "src/io/safetensors.h"
#include "src/status.h"
#include "src/tensor.h"

// Fails the test with the status message unless `expr` is an ok mha::Status.
#define ASSERT_OK(expr)                                    \
  do {                                                     \
    const mha::Status s_ = (expr);                         \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.message(); \
  } while (0)

namespace mha_test {

// One case: its config (from the `config` metadata), the file's bytes and
// float32 copies of the tensors asked for. Views handed out stay valid while
// the Fixture lives (also across a move); it cannot be copied.
struct Fixture {
  std::string name;  // file name without ".safetensors"
  std::string kind;  // "mha", "sdpa" or "decode"
  std::string config_text;  // the `config` metadata (JSON)

  // mha config (0 = default for kdim, vdim, qk_head_dim, v_head_dim).
  int64_t embed_dim = 0;
  int64_t num_heads = 0;
  bool bias = true;
  bool add_bias_kv = false;
  bool add_zero_attn = false;
  int64_t kdim = 0;
  int64_t vdim = 0;
  bool batch_first = false;
  int64_t qk_head_dim = 0;
  int64_t v_head_dim = 0;
  bool need_weights = true;
  bool average_attn_weights = true;
  std::string param_dtype = "F32";  // "F32", "F16" or "BF16"
  // mha and sdpa.
  bool is_causal = false;
  // sdpa: 0 = 1 / sqrt(E).
  float scale = 0.0f;

  std::vector<uint8_t> bytes;  // the whole file
  mha::SafetensorsFile file;   // entries point into `bytes`

  Fixture() = default;
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;
  Fixture(Fixture&&) = default;
  Fixture& operator=(Fixture&&) = default;

  bool Has(const std::string& tensor) const { return file.tensors.count(tensor) != 0; }

  // A float32 view of `tensor` (e.g. "input.query", "expected.output") from an
  // F32, F16 or BF16 entry. `out` may be null to only check it exists.
  mha::Status View(const std::string& tensor, mha::TensorView* out);

  // "input.key_padding_mask" / "input.attn_mask": a bool view (BOOL) or a
  // float view (F32); an absent tensor gives an empty MaskView (kind kNone).
  mha::Status Mask(const std::string& tensor, mha::MaskView* out);

  // Every "param.<name>" tensor as float32, keyed by its state_dict name.
  mha::Status Params(std::map<std::string, mha::TensorView>* out);

  // An owned copy of a float tensor, e.g. "expected.weights".
  mha::Status Expected(const std::string& tensor, mha::Tensor* out);

  // The module config, forward options (masks, flags) and sdpa options.
  mha::MultiheadAttentionConfig ModuleConfig() const;
  mha::Status Options(mha::ForwardOptions* out);
  mha::Status Options(mha::SdpaOptions* out);

 private:
  std::map<std::string, std::vector<float>> floats_;  // conversion buffers by tensor name
};

// The bytes of a file.
mha::Status ReadFile(const std::string& path, std::vector<uint8_t>* out);

// Every *.safetensors file in MHA_FIXTURE_DIR (or its subfolder), as full
// paths, sorted.
std::vector<std::string> ListFixtures(const std::string& subfolder = "");

// Reads and parses one fixture; errors name the file and what is wrong.
mha::Status LoadFixture(const std::string& path, Fixture* out);

// The weights' dtype the fixture suites give their modules (ModuleConfig,
// the decoding configs) and the tolerance ExpectClose allows: float32's by
// default; a suite's int8 run sets int8 weights and kInt8Tolerance for its
// scope. ExpectClose keeps the largest |actual - expected| it saw.
struct Precision {
  mha::WeightsDtype weights = mha::WeightsDtype::kAuto;
  double abs_tolerance = 1e-4, rel_tolerance = 1e-3;
  double max_abs_error = 0.0;
};
// int8 weights (symmetric per output channel) on outputs of order 1: the
// bound docs/precision.md states (the fixture families' largest error
// against PyTorch's float32 is about 0.038, in the decoding fixtures).
constexpr double kInt8AbsTolerance = 4e-2;
constexpr double kInt8RelTolerance = 2e-2;
Precision& CurrentPrecision();
class ScopedInt8Weights {
 public:
  ScopedInt8Weights();
  ~ScopedInt8Weights();  // prints the largest error seen

 private:
  Precision saved_;
};

// A decoder layer's attention as the cache tests use it: embed_dim 16, 4
// query heads on 2 key/value heads, batch_first, rotary; a left window of
// `window_left` keys (-1: none).
mha::MultiheadAttentionConfig DecoderConfig(int64_t window_left);

// A module of config `c` with random parameters (RandomVector of seeds
// first_seed, first_seed + 1, ... in Parameters() order).
std::unique_ptr<mha::MultiheadAttention> RandomModule(const mha::MultiheadAttentionConfig& c,
                                                      uint32_t first_seed);

// `length` random tokens (from `seed`) of each of `batch` entries through a
// batch_first module on `cache`, causal, without weights; the output into
// *output.
mha::Status CausalStep(mha::MultiheadAttention& module, mha::KVCache* cache, int64_t batch,
                       int64_t length, uint32_t seed, std::vector<float>* output);

// Checks that `status` is an InvalidArgument error whose message holds each
// of `fragments`.
void ExpectInvalidArgument(const mha::Status& status, const std::vector<std::string>& fragments);

// Checks shape equality, NaN positions (exactly) and, elementwise,
// |actual - expected| <= abs + rel * |expected| (CurrentPrecision(): 1e-4 +
// 1e-3 * |expected| by default; infinities must match), reporting the worst
// element with its index. `what` names the result.
void ExpectClose(const mha::Tensor& actual, const std::vector<float>& expected,
                 const mha::Shape& expected_shape, const std::string& what);
void ExpectClose(const mha::Tensor& actual, const mha::Tensor& expected, const std::string& what);

// A .safetensors file of the parameters of `m` named in `names` (every one
// when empty), values from `params`: weights (2-D) stored as `matrices`
// ("F32", or "F16" / "BF16": the bits of values those hold exactly, BF16 the
// top half of each float's bits), the rest F32.
std::vector<uint8_t> SafetensorsOf(const mha::MultiheadAttention& m,
                                   const std::map<std::string, std::vector<float>>& params,
                                   const std::string& matrices,
                                   const std::set<std::string>& names = {});

}  // namespace mha_test

#endif  // MHA_TESTS_NATIVE_FIXTURE_H_
