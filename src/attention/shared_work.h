// When a call is worth the thread pool: the policy linear, attention and decode
// attention share, kept out of the public thread_pool.h.
#ifndef MHA_SRC_ATTENTION_SHARED_WORK_H_
#define MHA_SRC_ATTENTION_SHARED_WORK_H_

#include "src/thread_pool.h"

namespace mha {

// Multiply-adds below which a call (one projection, one attention) runs on
// the calling thread: waking the pool's threads and waiting for them costs
// more than sharing saves. One value serves the native and WebAssembly
// builds (sharing starts to pay a little earlier natively), chosen so that the
// smallest decoding steps never wake the pool; bench/RESULTS.md and the
// commits that set it have the sweeps.
constexpr double kMinSharedWork = 1e5;

// `pool`, or null (the calling thread alone) for work below kMinSharedWork.
inline ThreadPool* SharedPool(ThreadPool* pool, double work) {
  return work < kMinSharedWork ? nullptr : pool;
}

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_SHARED_WORK_H_
