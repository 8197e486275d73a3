// AlignedBuffer: grows on demand, reuses what it has, and a moved-from buffer
// allocates again (it once kept its capacity with no memory behind it).
#include "src/attention/aligned_buffer.h"

#include <gtest/gtest.h>

#include <utility>

namespace mha {
namespace {

TEST(AlignedBufferTest, GrowsAndReuses) {
  AlignedBuffer buffer;
  float* first = buffer.Get(16);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(buffer.Get(8), first);
  float* grown = buffer.Get(1024);
  ASSERT_NE(grown, nullptr);
  grown[1023] = 1.0f;
}

TEST(AlignedBufferTest, AMovedFromBufferAllocatesAgain) {
  AlignedBuffer from;
  float* data = from.Get(64);
  AlignedBuffer to(std::move(from));
  EXPECT_EQ(to.Get(64), data);
  float* again = from.Get(64);  // NOLINT(bugprone-use-after-move): the point of the test
  ASSERT_NE(again, nullptr);
  again[63] = 1.0f;

  AlignedBuffer assigned;
  assigned = std::move(to);
  EXPECT_EQ(assigned.Get(64), data);
  ASSERT_NE(to.Get(64), nullptr);  // NOLINT(bugprone-use-after-move)
}

}  // namespace
}  // namespace mha
