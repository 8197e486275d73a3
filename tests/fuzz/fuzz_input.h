// Reads a fuzzer's bytes as a stream of small decisions; past the end every
// read returns 0, so any input (even empty) decodes to some case.
#ifndef MHA_TESTS_FUZZ_FUZZ_INPUT_H_
#define MHA_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <limits>

namespace mha_fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool Bool() { return (Byte() & 1) != 0; }
  // An integer in [lo, hi] (hi - lo < 256).
  int Int(int lo, int hi) { return lo + Byte() % (hi - lo + 1); }

  // Mostly moderate values on a 1/32 grid in [-1, 1); with `specials`, also
  // NaN, +-Inf and huge ones.
  float Value(bool specials) {
    const uint8_t b = Byte();
    if (specials && b >= 250) {
      constexpr float kSpecial[] = {std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(), 3e38f, -3e38f,
                                    1e-40f};
      return kSpecial[b - 250];
    }
    return (static_cast<int>(b) - 128) / 128.0f;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace mha_fuzz

#endif  // MHA_TESTS_FUZZ_FUZZ_INPUT_H_
