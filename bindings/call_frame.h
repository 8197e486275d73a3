// The call frame of forward and scaledDotProductAttention, for
// bindings/mha_binding.cc; web/src/call_frame.js reads its layout from
// Frame::Layout().
#ifndef MHA_BINDINGS_CALL_FRAME_H_
#define MHA_BINDINGS_CALL_FRAME_H_

#include <emscripten/val.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "src/multihead_attention.h"

namespace mha {

// A call frame: uint32 words that web/src/call_frame.js writes into the heap
// before a forward or scaledDotProductAttention call and reads after it; this
// class is the layout's one definition, which JS reads from Layout(). Tensor
// slots hold (address or 0 when absent, rank, 1 for a bool mask, index of the
// slot's first dim in the frame); the dims follow the fixed words. The results
// are (address, rank, kMaxResultRank dims) each.
class Frame {
 public:
  enum Slot { kQuery, kKey, kValue, kKeyPaddingMask, kAttnMask, kSinks, kAlibiSlopes, kPositions };
  enum Flag : uint32_t { kNeedWeights = 1, kAverageAttnWeights = 2, kIsCausal = 4, kEnableGqa = 8 };

  enum Number { kScale, kSoftcap };
  enum Integer { kWindowLeft, kWindowRight };

  // {slots: [JS names in Slot order], slotWords, flags: {JS name: bit}, flagsWord,
  // numberWords: {JS name: word of a float}, integerWords: {JS name: word of an int32},
  // outputWord, weightsWord, maxResultRank, fixedWords}.
  static emscripten::val Layout() {
    using emscripten::val;
    val layout = val::object();
    val slots = val::array();
    for (const char* name :
         {"query", "key", "value", "keyPaddingMask", "attnMask", "sinks", "alibiSlopes",
          "positions"}) {
      slots.call<void>("push", std::string(name));
    }
    layout.set("slots", slots);
    val flags = val::object();
    for (const auto& [name, bit] : {std::make_pair("needWeights", kNeedWeights),
                                    std::make_pair("averageAttnWeights", kAverageAttnWeights),
                                    std::make_pair("isCausal", kIsCausal),
                                    std::make_pair("enableGqa", kEnableGqa)}) {
      flags.set(name, static_cast<uint32_t>(bit));
    }
    layout.set("flags", flags);
    val numbers = val::object();
    numbers.set("scale", kNumbers + kScale);
    numbers.set("softcap", kNumbers + kSoftcap);
    layout.set("numberWords", numbers);
    val integers = val::object();
    integers.set("windowLeft", kIntegers + kWindowLeft);
    integers.set("windowRight", kIntegers + kWindowRight);
    layout.set("integerWords", integers);
    for (const auto& [name, words] : {std::make_pair("slotWords", kSlotWords),
                                      std::make_pair("flagsWord", kFlags),
                                      std::make_pair("outputWord", kOutput),
                                      std::make_pair("weightsWord", kWeights),
                                      std::make_pair("maxResultRank", kMaxResultRank),
                                      std::make_pair("fixedWords", kFixedWords)}) {
      layout.set(name, words);
    }
    return layout;
  }

  explicit Frame(uintptr_t address) : words_(reinterpret_cast<uint32_t*>(address)) {}

  TensorView Tensor(Slot slot) const {
    const uint32_t* s = SlotWords(slot);
    return TensorView{reinterpret_cast<const float*>(s[0]), ShapeOf(s)};
  }
  MaskView Mask(Slot slot) const {
    const uint32_t* s = SlotWords(slot);
    if (s[0] == 0) return MaskView();
    if (s[2]) return MaskView::Bool(reinterpret_cast<const uint8_t*>(s[0]), ShapeOf(s));
    return MaskView::Float(reinterpret_cast<const float*>(s[0]), ShapeOf(s));
  }
  // An int32 slot (positions): its data and element count; null when absent.
  const int32_t* Integers(Slot slot, size_t* count) const {
    const uint32_t* s = SlotWords(slot);
    *count = s[0] == 0 ? 0 : static_cast<size_t>(NumElements(ShapeOf(s)));
    return reinterpret_cast<const int32_t*>(s[0]);
  }
  bool flag(Flag f) const { return (words_[kFlags] & f) != 0; }
  int32_t integer(Integer n) const { return static_cast<int32_t>(words_[kIntegers + n]); }
  float number(Number n) const {
    float value;
    std::memcpy(&value, &words_[kNumbers + n], sizeof(value));
    return value;
  }
  // The core's results are at most 4-D (weights (N, H, L, S), SDPA (B, H, L, D)).
  void SetResults(const mha::Tensor& output, const mha::Tensor& weights) {
    SetResult(kOutput, output);
    SetResult(kWeights, weights);
  }

 private:
  static constexpr int kSlotWords = 4;
  static constexpr int kFlags = kSlotWords * (kPositions + 1);
  static constexpr int kNumbers = kFlags + 1;
  static constexpr int kIntegers = kNumbers + kSoftcap + 1;
  static constexpr int kOutput = kIntegers + kWindowRight + 1;
  static constexpr int kMaxResultRank = 4;
  static constexpr int kWeights = kOutput + 2 + kMaxResultRank;
  static constexpr int kFixedWords = kWeights + 2 + kMaxResultRank;

  const uint32_t* SlotWords(Slot slot) const { return words_ + kSlotWords * slot; }
  Shape ShapeOf(const uint32_t* s) const {
    if (s[0] == 0) return Shape();
    return Shape(words_ + s[3], words_ + s[3] + s[1]);
  }
  void SetResult(int at, const mha::Tensor& tensor) {
    words_[at] = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(tensor.data.data()));
    words_[at + 1] = static_cast<uint32_t>(tensor.shape.size());
    for (size_t i = 0; i < tensor.shape.size() && i < kMaxResultRank; ++i) {
      words_[at + 2 + i] = static_cast<uint32_t>(tensor.shape[i]);
    }
  }

  uint32_t* words_;
};

}  // namespace mha

#endif  // MHA_BINDINGS_CALL_FRAME_H_
