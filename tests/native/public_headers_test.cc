// The public headers show only the API: including them pulls in neither the
// kernels' header nor Highway (a compile-time check), and a cache is used
// through its API alone, its length readable while a call holds the cache.
#include <memory>
#include <thread>
#include <vector>

#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "src/status.h"
#include "src/tensor.h"

#if defined(MHA_SRC_KERNELS_KERNELS_H_) || defined(HIGHWAY_HWY_BASE_H_)
#error "a public header includes src/kernels/kernels.h or Highway"
#endif

#include "gtest/gtest.h"

namespace {

TEST(PublicHeaders, CacheThroughItsApi) {
  mha::KVCacheConfig c;
  c.batch_size = 1;
  c.num_kv_heads = 2;
  c.head_dim = c.v_head_dim = 4;
  c.max_length = 8;
  std::unique_ptr<mha::KVCache> cache;
  ASSERT_TRUE(mha::KVCache::Create(c, &cache).ok());
  const std::vector<float> q(2 * 3 * 4, 0.5f), kv(2 * 3 * 4, 0.25f);
  mha::SdpaOptions o;
  o.cache = cache.get();
  mha::Tensor out;
  // length() from another thread while calls run: never a torn or partial value.
  std::thread reader([&] {
    for (int i = 0; i < 1000; ++i) {
      const int64_t length = cache->length();
      EXPECT_TRUE(length == 0 || length == 3 || length == 6) << length;
    }
  });
  const mha::TensorView qv{q.data(), {1, 2, 3, 4}}, kvv{kv.data(), {1, 2, 3, 4}};
  ASSERT_TRUE(mha::ScaledDotProductAttention(qv, kvv, kvv, o, &out).ok());
  ASSERT_TRUE(mha::ScaledDotProductAttention(qv, kvv, kvv, o, &out).ok());
  reader.join();
  EXPECT_EQ(cache->length(), 6);
  ASSERT_TRUE(cache->Truncate(2).ok());
  EXPECT_EQ(cache->length(), 2);
  EXPECT_FALSE(cache->Truncate(3).ok());
}

}  // namespace
