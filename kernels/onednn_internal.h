// Private to kernels/: access to the engine, the per-thread stream and the primitive cache.
#pragma once

#include <functional>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "bridge/dtype.h"
#include "bridge/error.h"

namespace tb::onednn {

dnnl::engine& Engine();
// One stream per thread: primitives are immutable and may run concurrently.
dnnl::stream& Stream();

// Returns the cached primitive for `key`, creating it with `make` on first use.
dnnl::primitive Cached(const std::string& key, const std::function<dnnl::primitive()>& make);

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

}  // namespace tb::onednn
