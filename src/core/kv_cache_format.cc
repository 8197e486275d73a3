// KVCache::Save and KVCache::Load: a cache as bytes, in the format of
// docs/kv-cache-format.md (that page is the reference; this file follows it).
#include <array>
#include <cstring>
#include <new>
#include <string>
#include <tuple>
#include <utility>

#include "src/core/kv_cache_internal.h"
#include "src/kv_cache.h"
#include "src/tensor.h"

namespace mha {

namespace {

constexpr char kMagic[8] = {'M', 'H', 'A', '-', 'K', 'V', 'C', '\0'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kRolling = 1;     // flags bit 0
constexpr uint32_t kStreaming = 2;   // flags bit 1: reserved holds keep
constexpr size_t kHeaderBytes = 80;  // before the header's checksum
constexpr size_t kPayloadStart = kHeaderBytes + 4;
constexpr size_t kFramingBytes = kPayloadStart + 4;  // all but the payload (PayloadBytes)
constexpr size_t kLeastBytes = kFramingBytes + 8;    // one entry, nothing held

// CRC-32 (IEEE 802.3, reflected 0xEDB88320: zlib's crc32, PNG's).
std::array<uint32_t, 256> CrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

uint32_t Crc32(const uint8_t* data, size_t size) {
  static const std::array<uint32_t, 256> table = CrcTable();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// Little-endian fields, whatever the host.
void Put(uint64_t value, size_t bytes, uint8_t* at) {
  for (size_t i = 0; i < bytes; ++i) at[i] = static_cast<uint8_t>(value >> (8 * i));
}
uint64_t Get(const uint8_t* at, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(at[i]) << (8 * i);
  return value;
}

// The header's fields past the version, in order, with their offsets.
struct Header {
  uint32_t dtype = 0, flags = 0, reserved = 0;
  uint64_t batch_size = 0, num_kv_heads = 0, head_dim = 0, v_head_dim = 0, max_length = 0,
           length = 0, held = 0;
};

void WriteHeader(const Header& h, uint8_t* at) {
  std::memcpy(at, kMagic, sizeof(kMagic));
  Put(kVersion, 4, at + 8);
  Put(h.dtype, 4, at + 12);
  Put(h.flags, 4, at + 16);
  Put(h.reserved, 4, at + 20);
  const uint64_t dims[] = {h.batch_size, h.num_kv_heads, h.head_dim, h.v_head_dim,
                           h.max_length, h.length,     h.held};
  for (size_t i = 0; i < 7; ++i) Put(dims[i], 8, at + 24 + 8 * i);
  Put(Crc32(at, kHeaderBytes), 4, at + kHeaderBytes);
}

Header ReadHeader(const uint8_t* at) {
  Header h;
  h.dtype = static_cast<uint32_t>(Get(at + 12, 4));
  h.flags = static_cast<uint32_t>(Get(at + 16, 4));
  h.reserved = static_cast<uint32_t>(Get(at + 20, 4));
  uint64_t* dims[] = {&h.batch_size, &h.num_kv_heads, &h.head_dim, &h.v_head_dim,
                      &h.max_length, &h.length,       &h.held};
  for (size_t i = 0; i < 7; ++i) *dims[i] = Get(at + 24 + 8 * i, 8);
  return h;
}

// Calls copy(stored, bytes) for each run of held rows of the cache (`bytes`
// bytes at `stored` in its storage), in the format's order: the keys, then
// the values, per batch entry and key/value head, oldest position first.
template <typename Copy>
void ForEachHeldRun(const KVCache& cache, uint8_t* keys, uint8_t* values, const Copy& copy) {
  const KVCacheConfig& c = cache.config();
  const size_t element = ElementSize(c.dtype), max_length = static_cast<size_t>(c.max_length);
  const size_t heads = static_cast<size_t>(c.batch_size * c.num_kv_heads);
  const HeldSlots held = KVCacheAccess::Held(cache);
  for (const auto& [storage, dim] : {std::make_pair(keys, c.head_dim),
                                     std::make_pair(values, c.v_head_dim)}) {
    const size_t row = static_cast<size_t>(dim) * element;
    for (size_t head = 0; head < heads; ++head) {
      for (const HeldSlots::Run& run : held.runs) {
        copy(storage + (head * max_length + run.first) * row, run.count * row);
      }
    }
  }
}

// Bytes of the payload of a cache of config c holding `held`: the padding
// (8 bytes per batch entry), then the held keys and values.
double PayloadBytes(const KVCacheConfig& c, double held) {
  return 8.0 * static_cast<double>(c.batch_size) +
         static_cast<double>(c.batch_size) * static_cast<double>(c.num_kv_heads) * held *
             static_cast<double>(c.head_dim + c.v_head_dim) *
             static_cast<double>(ElementSize(c.dtype));
}

const std::string kNothing = "; nothing was loaded";

// The config, length and held of a header, checked; `size`: the bytes given.
Status CheckHeader(const Header& h, size_t size, KVCacheConfig* c) {
  if (h.dtype > 2) {
    return Status::InvalidArgument("bytes: dtype code " + std::to_string(h.dtype) +
                                   " is none of 0 (float32), 1 (float16), 2 (bfloat16)" +
                                   kNothing);
  }
  const bool streaming = (h.flags & kStreaming) != 0;
  if ((h.flags & ~(kRolling | kStreaming)) != 0 || (!streaming && h.reserved != 0) ||
      h.flags == (kRolling | kStreaming)) {
    return Status::InvalidArgument("bytes: flags " + std::to_string(h.flags) + " and reserved " +
                                   std::to_string(h.reserved) +
                                   " hold bits this version does not know" + kNothing);
  }
  const uint64_t limit = uint64_t{1} << 40;
  const std::pair<const char*, uint64_t> dims[] = {
      {"batch_size", h.batch_size}, {"num_kv_heads", h.num_kv_heads}, {"head_dim", h.head_dim},
      {"v_head_dim", h.v_head_dim}, {"max_length", h.max_length}};
  for (const auto& [name, value] : dims) {
    if (value == 0 || value > limit) {
      return Status::InvalidArgument(std::string("bytes: ") + name + " " +
                                     std::to_string(value) + " is out of range [1, 2^40]" +
                                     kNothing);
    }
  }
  const bool rolling = (h.flags & kRolling) != 0;
  if (streaming && h.reserved >= h.max_length) {
    return Status::InvalidArgument("bytes: keep " + std::to_string(h.reserved) +
                                   " is not below max_length " + std::to_string(h.max_length) +
                                   kNothing);
  }
  if (h.held > h.length || h.held > h.max_length || (!rolling && h.held != h.length)) {
    return Status::InvalidArgument(
        "bytes: length " + std::to_string(h.length) + " and held " + std::to_string(h.held) +
        " do not fit a" + (rolling ? " rolling" : "") + " cache of max_length " +
        std::to_string(h.max_length) + kNothing);
  }
  c->batch_size = static_cast<int64_t>(h.batch_size);
  c->num_kv_heads = static_cast<int64_t>(h.num_kv_heads);
  c->head_dim = static_cast<int64_t>(h.head_dim);
  c->v_head_dim = static_cast<int64_t>(h.v_head_dim);
  c->max_length = static_cast<int64_t>(h.max_length);
  c->dtype = static_cast<KVCacheDtype>(h.dtype);
  c->rolling = rolling;
  c->keep = streaming ? static_cast<int64_t>(h.reserved) : -1;
  const double payload = PayloadBytes(*c, static_cast<double>(h.held));
  const double expected = static_cast<double>(kFramingBytes) + payload;
  if (!Addressable(payload, 1) || expected != static_cast<double>(size)) {
    return Status::InvalidArgument(
        "bytes: expected " + std::to_string(static_cast<uint64_t>(expected)) +
        " bytes (the header's, for batch_size " + std::to_string(h.batch_size) +
        ", num_kv_heads " + std::to_string(h.num_kv_heads) + ", head_dim " +
        std::to_string(h.head_dim) + ", v_head_dim " + std::to_string(h.v_head_dim) + ", " +
        KVCacheDtypeName(c->dtype) + ", held " + std::to_string(h.held) + "), got " +
        std::to_string(size) + (expected > static_cast<double>(size) ? " (truncated)" : "") +
        kNothing);
  }
  return Status::Ok();
}

// The fields of a module's caches that the saved one does not share, e.g.
// "num_kv_heads 4 (this module's: 2)"; empty when all match.
std::string Differences(const KVCacheConfig& saved, const KVCacheConfig& module) {
  std::string text;
  const std::tuple<const char*, int64_t, int64_t> fields[] = {
      {"num_kv_heads", saved.num_kv_heads, module.num_kv_heads},
      {"head_dim", saved.head_dim, module.head_dim},
      {"v_head_dim", saved.v_head_dim, module.v_head_dim}};
  for (const auto& [name, theirs, ours] : fields) {
    if (theirs == ours) continue;
    text += (text.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(theirs) +
            " (this module's: " + std::to_string(ours) + ")";
  }
  return text;
}

}  // namespace

Status KVCache::Save(std::vector<uint8_t>* out) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Header h;
  h.dtype = static_cast<uint32_t>(config_.dtype);
  h.flags = config_.rolling ? kRolling : config_.keep >= 0 ? kStreaming : 0;
  h.reserved = config_.keep >= 0 ? static_cast<uint32_t>(config_.keep) : 0;
  h.batch_size = static_cast<uint64_t>(config_.batch_size);
  h.num_kv_heads = static_cast<uint64_t>(config_.num_kv_heads);
  h.head_dim = static_cast<uint64_t>(config_.head_dim);
  h.v_head_dim = static_cast<uint64_t>(config_.v_head_dim);
  h.max_length = static_cast<uint64_t>(config_.max_length);
  h.length = static_cast<uint64_t>(length());
  h.held = static_cast<uint64_t>(held());
  const double payload_bytes = PayloadBytes(config_, static_cast<double>(h.held));
  // The cache's storage is addressable (KVCacheAccess::Create); with the
  // header it may not be, and the size would wrap.
  if (!Addressable(static_cast<double>(kFramingBytes) + payload_bytes, 1)) {
    return Status::OutOfMemory("save: the bytes of a cache of " + std::to_string(h.held) +
                               " keys per entry would exceed the address space");
  }
  const size_t payload = static_cast<size_t>(payload_bytes);
  try {
    out->assign(kFramingBytes + payload, 0);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("save: not enough memory for " +
                               std::to_string(kFramingBytes + payload) + " bytes");
  }
  uint8_t* bytes = out->data();
  WriteHeader(h, bytes);
  uint8_t* to = bytes + kPayloadStart;
  for (int64_t n = 0; n < config_.batch_size; ++n, to += 8) {
    Put(static_cast<uint64_t>(state_->padding[n]), 8, to);
  }
  ForEachHeldRun(*this, state_->keys.get(), state_->values.get(),
                 [&](const uint8_t* stored, size_t n) {
                   std::memcpy(to, stored, n);
                   to += n;
                 });
  Put(Crc32(bytes + kPayloadStart, payload), 4, bytes + kPayloadStart + payload);
  return Status::Ok();
}

Status KVCache::Load(const uint8_t* bytes, size_t size, std::unique_ptr<KVCache>* out) {
  return KVCacheAccess::Load(bytes, size, nullptr, 0, 0, out);
}

Status KVCacheAccess::Load(const uint8_t* bytes, size_t size, const KVCacheConfig* module,
                           uint64_t owner, int64_t window_left, std::unique_ptr<KVCache>* out) {
  if (bytes == nullptr || size < kLeastBytes) {
    return Status::InvalidArgument("bytes: expected a saved KVCache (at least " +
                                   std::to_string(kLeastBytes) + " bytes), got " +
                                   std::to_string(bytes == nullptr ? 0 : size) +
                                   " bytes (truncated?)" + kNothing);
  }
  if (std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0) {
    return Status::InvalidArgument("bytes: not a saved KVCache (they do not start with "
                                   "'MHA-KVC')" + kNothing);
  }
  const uint64_t version = Get(bytes + 8, 4);
  if (version != kVersion) {
    return Status::InvalidArgument("bytes: format version " + std::to_string(version) +
                                   "; this version of mha-wasm reads version " +
                                   std::to_string(kVersion) + kNothing);
  }
  if (Get(bytes + kHeaderBytes, 4) != Crc32(bytes, kHeaderBytes)) {
    return Status::InvalidArgument("bytes: the header's checksum (CRC-32) does not match: the "
                                   "bytes are corrupted" + kNothing);
  }
  KVCacheConfig c;
  const Header h = ReadHeader(bytes);
  MHA_RETURN_IF_ERROR(CheckHeader(h, size, &c));
  const size_t payload = size - kFramingBytes;
  if (Get(bytes + kPayloadStart + payload, 4) != Crc32(bytes + kPayloadStart, payload)) {
    return Status::InvalidArgument("bytes: the padding's, keys' and values' checksum (CRC-32) "
                                   "does not match: the bytes are corrupted" + kNothing);
  }
  const uint8_t* from = bytes + kPayloadStart;
  for (int64_t n = 0; n < c.batch_size; ++n) {
    const uint64_t pads = Get(from + 8 * n, 8);
    if (pads > h.length) {
      return Status::InvalidArgument("bytes: padding of entry " + std::to_string(n) + " is " +
                                     std::to_string(pads) + ", more than the length " +
                                     std::to_string(h.length) + kNothing);
    }
  }
  if (module != nullptr) {
    const std::string differences = Differences(c, *module);
    if (!differences.empty()) {
      return Status::InvalidArgument("bytes: the saved cache's heads differ from this module's "
                                     "caches: " + differences + kNothing);
    }
  }
  std::unique_ptr<KVCache> cache;
  MHA_RETURN_IF_ERROR(Create(c, owner, window_left, &cache));
  cache->state_->length.store(static_cast<int64_t>(h.length), std::memory_order_relaxed);
  cache->state_->held.store(static_cast<int64_t>(h.held), std::memory_order_relaxed);
  for (int64_t n = 0; n < c.batch_size; ++n, from += 8) {
    cache->state_->padding[n] = static_cast<int64_t>(Get(from, 8));
  }
  ForEachHeldRun(*cache, cache->state_->keys.get(), cache->state_->values.get(),
                 [&](uint8_t* stored, size_t n) {
                   std::memcpy(stored, from, n);
                   from += n;
                 });
  *out = std::move(cache);
  return Status::Ok();
}

}  // namespace mha
