// oneDNN set-up shared by the kernels: one CPU engine, a stream per thread, a primitive
// cache, and the CPU ISA cap applied before oneDNN does anything else.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "bridge/api.h"

namespace tb {

// The ISA oneDNN dispatches to in this process, e.g. "avx512_core_bf16".
TB_API std::string OneDnnEffectiveIsa();
// How many oneDNN primitives the kernels created in this process, by implementation name
// (oneDNN's impl_info_str, as ONEDNN_VERBOSE prints it: "gemm:jit", "brg:avx512_core", ...).
TB_API std::map<std::string, int64_t> OneDnnPrimitivesCreated();
// oneDNN's version, "2.6.3".
TB_API std::string OneDnnVersion();
// True when tensorbridge capped oneDNN's ISA (false when ONEDNN_MAX_CPU_ISA or
// DNNL_MAX_CPU_ISA was set by the user, who then decides).
TB_API bool OneDnnIsaCapped();

}  // namespace tb
