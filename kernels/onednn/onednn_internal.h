// Private to kernels/: access to the engine, the per-thread stream and the primitive cache,
// plus small helpers the oneDNN-backed kernels share (memory descriptors of tensors, cache
// keys, a typed cache for primitives kept with their descriptors, layout conversion).
//
// Threads. A cached primitive is shared by every thread that calls the op, so it must never
// own mutable state. With oneDNN's default, library-managed scratchpad it does: the buffer
// for its temporaries (brgemm's per-thread batch of A/B block addresses, packed copies of
// blocks, partial sums) is allocated with the primitive and indexed by the OpenMP thread
// number inside the call, so two callers executing it at once both write slot 0 and one reads
// the other's operand addresses (oneDNN documents library scratchpads as not thread-safe).
// Every primitive here is therefore made with Attr() (a user-managed scratchpad) and run
// through Execute(), which lends each execution the calling thread's own scratchpad.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

#include "bridge/dtype.h"
#include "bridge/error.h"
#include "bridge/tensor.h"

namespace tb::onednn {

dnnl::engine& Engine();
// One stream per thread: primitives are immutable and may run concurrently.
dnnl::stream& Stream();

// The attributes every cached primitive starts from: a user-managed scratchpad (see above).
dnnl::primitive_attr Attr();

// Runs `prim` (made with Attr()) on this thread's stream with this thread's scratchpad, and
// waits for it. Raises an internal error for a primitive with a library-managed
// scratchpad, which would be unsafe to share between threads.
void Execute(const dnnl::primitive& prim, std::unordered_map<int, dnnl::memory> args);

// Returns the cached primitive for `key`, creating it with `make` on first use.
dnnl::primitive Cached(const std::string& key, const std::function<dnnl::primitive()>& make);

// Counts `prim` under its implementation name (tb::OneDnnPrimitivesCreated()). Cached() counts
// what it creates; a cache of its own (CachedValue) calls this from its `make`.
void CountCreated(const dnnl::primitive& prim);

// The oneDNN data type of a DType; NotImplementedError naming `op` when there is none.
dnnl::memory::data_type DataType(DType dtype, const char* op);

// Runs `fn`, turning a oneDNN error into a tb::Error that names `op`.
template <typename F>
auto Guard(const char* op, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    TB_THROW(RuntimeError) << op << ": oneDNN failed: " << e.what();
  }
}

// ---- helpers ------------------------------------------------------------------------------

inline std::ostream& operator<<(std::ostream& os, const dnnl::memory::dims& d) {
  os << '[';
  for (auto x : d) os << x << ' ';
  return os << ']';
}

// One part of a cache key: an integer or enum in decimal, a floating-point value as the hex of
// its bits (exact, and cheaper than printing it), a string as it is, a range of integers
// (dims) in brackets.
template <typename T>
void KeyPart(std::string& key, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    key += v ? '1' : '0';
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    char buf[24];
    auto end = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(v)).ptr;
    key.append(buf, end);
  } else if constexpr (std::is_floating_point_v<T>) {
    const double d = static_cast<double>(v);
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof(bits));
    char buf[24];
    auto end = std::to_chars(buf, buf + sizeof(buf), bits, 16).ptr;
    key.append(buf, end);
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    key += std::string_view(v);
  } else {
    key += '[';
    for (const auto& x : v) {
      KeyPart(key, x);
      key += ' ';
    }
    key += ']';
  }
}

// A cache key from the values, each followed by ','. Called on every execution of a cached
// primitive, so it formats without streams.
template <typename... A>
std::string Key(const A&... parts) {
  std::string key;
  key.reserve(64);
  ((KeyPart(key, parts), key += ','), ...);
  return key;
}

// Like Cached(), for any copyable value (a primitive with the descriptors it chose, ...).
// One cache per value type, shared by every file that uses the type.
template <typename T>
T CachedValue(const std::string& key, const std::function<T()>& make) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::string, T>();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  T value = make();  // outside the lock: creation can take milliseconds
  std::lock_guard<std::mutex> lock(mu);
  return cache->emplace(key, std::move(value)).first->second;
}

// The descriptor of `t`'s strided layout (strides must be non-negative).
inline dnnl::memory::desc StridedDesc(const Tensor& t, dnnl::memory::data_type dt) {
  dnnl::memory::dims dims(t.shape().begin(), t.shape().end());
  dnnl::memory::dims strides(t.strides().begin(), t.strides().end());
  return dnnl::memory::desc(dims, dt, strides);
}

// The descriptor of a C-contiguous buffer with `dims`.
inline dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::data_type dt) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * dims[i + 1];
  }
  return dnnl::memory::desc(dims, dt, strides);
}

// Memory over caller-owned data (no copy).
inline dnnl::memory Wrap(const dnnl::memory::desc& md, const void* data) {
  return dnnl::memory(md, Engine(), const_cast<void*>(data));
}

// A memory of layout `md` over this thread's temporary buffer number `slot` (0, 1 or 2),
// kept and grown between calls: for the operands one execution reorders, valid until the
// thread's next use of the slot. Above 16 MiB, a memory of its own.
dnnl::memory ThreadTemporary(const dnnl::memory::desc& md, int slot);

// `user` in the layout `want`: `user` itself when the layouts agree, otherwise a memory filled
// by a reorder run on this thread's stream (new, or this thread's temporary `slot`).
inline dnnl::memory ToLayout(const dnnl::memory& user, const dnnl::memory::desc& want,
                             int slot = -1) {
  if (user.get_desc() == want) return user;
  dnnl::memory m = slot < 0 ? dnnl::memory(want, Engine()) : ThreadTemporary(want, slot);
  Execute(dnnl::reorder(user, m, Attr()), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, m}});
  return m;
}

// Copies `from` (a primitive's layout) into `user` when they are different memories.
inline void FromLayout(const dnnl::memory& from, const dnnl::memory& user) {
  if (from.get() == user.get()) return;
  Execute(dnnl::reorder(from, user, Attr()), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, user}});
}

// True when oneDNN lacks an implementation (as opposed to a real failure).
inline bool IsUnimplemented(const dnnl::error& e) { return e.status == dnnl_unimplemented; }

}  // namespace tb::onednn
