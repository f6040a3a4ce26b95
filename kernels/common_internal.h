// Private to kernels/: the helpers every op family shares. Argument checks, element bits,
// copies, memory overlap and the parallel loop live here once; a kernel file includes this
// header instead of writing its own.
//
// Checks take the op name first (`kOp`, "aten::cat") and raise one exception per kind of bad
// input, whichever family the op belongs to:
//   a tensor the CPU cannot read (on another device)        NotImplementedError, declined
//   a dtype the kernel has no loop for (TB_DISPATCH's too)  NotImplementedError, declined
//   an element size or packed sub-byte dtype it cannot move NotImplementedError, declined
// A declined call (TB_DECLINE, bridge/error.h) is served by the op table's fallback when one
// is installed.
// Shape and value errors stay with the kernels (ValueError), as do torch's own type rules
// (TypeError, e.g. kernels/binary_internal.h's CheckAlpha).
#pragma once

#include <cstdint>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bridge/error.h"
#include "bridge/tensor.h"
#include "dispatch/value.h"

namespace tb::kernels {

// ---- checks ---------------------------------------------------------------------------------

// NotImplementedError naming `op` and the device unless `t` lives in memory the CPU reads
// (an undefined tensor passes).
void CheckHostTensor(const char* op, const Tensor& t);
// CheckHost(kOp, self, other, ...): every tensor in memory the CPU reads.
template <typename... Ts>
void CheckHost(const char* op, const Ts&... tensors) {
  (CheckHostTensor(op, tensors), ...);
}
// NotImplementedError naming `op` for the packed sub-byte dtypes (int4, float4, ...), which
// have no addressable elements.
void CheckByteSized(const char* op, const Tensor& t);
// NotImplementedError naming `op` unless `t` has a floating-point dtype.
void CheckFloat(const char* op, const Tensor& t);
// NotImplementedError naming `op` unless the layout and device arguments of a factory or a
// copy (None, a name, a Device) ask for a strided tensor on the CPU.
void CheckOptions(const char* op, const Value& layout, const Value& device);

// ---- element bits ---------------------------------------------------------------------------

// A 16-byte element (complex128) moved as raw bits.
struct Bits128 {
  uint64_t lo, hi;
};

// Runs fn(U{}) with U an unsigned type as wide as one element (Bits128 for 16 bytes), for
// kernels that move elements without reading them; NotImplementedError naming `op` for
// other sizes.
template <typename F>
void WithBits(const char* op, int64_t element_size, F&& fn) {
  switch (element_size) {
    case 1: fn(uint8_t{}); return;
    case 2: fn(uint16_t{}); return;
    case 4: fn(uint32_t{}); return;
    case 8: fn(uint64_t{}); return;
    case 16: fn(Bits128{}); return;
    default: TB_DECLINE << op << ": elements of " << element_size << " bytes are not supported";
  }
}

// ---- copies ---------------------------------------------------------------------------------

// dst <- src, both of one shape and dtype, moving raw element bits: one memcpy per run of
// rows contiguous in both when that pays (CopyContiguousRows), else the parallel strided
// loop. dst must not overlap src.
void CopyBits(const Tensor& dst, const Tensor& src);
// dst <- src broadcast to dst's shape: CopyBits when the dtypes match, CopyCast (converting)
// otherwise and for packed sub-byte dtypes. dst must not overlap src.
void CopySame(const Tensor& dst, const Tensor& src);

// ---- overlap --------------------------------------------------------------------------------

// True when the byte ranges of a's and b's elements intersect (tensors without elements
// overlap nothing). Conservative: interleaved strided views count as overlapping.
bool MayOverlap(const Tensor& a, const Tensor& b);

// ---- parallel loops -------------------------------------------------------------------------

// f(i) for i in [0, n), split statically across OpenMP threads when `parallel`.
template <typename F>
void ParallelFor(int64_t n, bool parallel, F&& f) {
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// f(begin, end) over [0, n) in blocks of `block` elements, the blocks split across OpenMP
// threads when `parallel`. Write f's loop with `#pragma omp simd`: GCC vectorizes an
// `omp parallel for simd ... if (...)` loop on its parallel path only, and leaves the serial
// path (every small tensor) a scalar loop.
template <typename F>
void ForEachBlock(int64_t n, int64_t block, bool parallel, F&& f) {
  const int64_t blocks = (n + block - 1) / block;
  ParallelFor(blocks, parallel && blocks > 1,
              [&](int64_t b) { f(b * block, std::min(n, (b + 1) * block)); });
}

// f(begin, end) once on every OpenMP thread, with that thread's even share of [0, n): thread t
// of nt gets [n * t / nt, n * (t + 1) / nt), which may be empty. Shares are contiguous, so a
// caller can split a flat range inside rows or blocks. An exception thrown on any thread is
// rethrown on the caller's after the parallel region.
template <typename F>
void ForEachThreadShare(int64_t n, F&& f) {
  std::exception_ptr error;
#pragma omp parallel
  {
#ifdef _OPENMP
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
    const int64_t nt = 1, t = 0;
#endif
    try {
      f(n * t / nt, n * (t + 1) / nt);
    } catch (...) {
#pragma omp critical(tb_thread_share_error)
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tb::kernels
