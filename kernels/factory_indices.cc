// aten::tril_indices / aten::triu_indices: the (2, N) row and column indices of the lower /
// upper triangle of a row x col matrix (diagonal moved by `offset`), in row-major order.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"

namespace tb {
namespace {

// sum over i in [0, row) of clamp(i + a, 0, col), exactly (no loop over the rows).
__int128 ClampedRowSum(int64_t row, int64_t col, __int128 a) {
  auto clip = [&](__int128 v) { return v < 0 ? __int128(0) : (v > row ? __int128(row) : v); };
  const __int128 lo = clip(1 - a);                  // the first row whose count is at least 1
  const __int128 hi = std::max(lo, clip(col - a));  // the first row whose count is col
  return (hi - lo) * (lo + a + hi - 1 + a) / 2 + (row - hi) * __int128(col);
}

// The rows that hold an index: lower, i >= first; upper, i < end. Each row's columns are
// [0, i + offset] (lower) or [i + offset, col) (upper), within [0, col). The count comes in
// closed form first, so huge row / col with few indices cost no time, and a count past
// int64 is an error, not a loop.
Tensor TriangleIndices(const char* op, bool lower, int64_t row, int64_t col, int64_t offset,
                       std::optional<DType> dtype, const Value& layout, const Value& device) {
  kernels::CheckOptions(op, layout, device);
  TB_CHECK(row >= 0, ValueError) << op << ": row must be non-negative, got " << row;
  TB_CHECK(col >= 0, ValueError) << op << ": col must be non-negative, got " << col;
  const DType dt = dtype.value_or(DType::kInt64);
  TB_CHECK(dt == DType::kInt64 || dt == DType::kInt32, NotImplementedError)
      << op << ": not implemented for " << DTypeName(dt) << " (as torch's: int64 and int32 only)";
  const __int128 count = lower ? ClampedRowSum(row, col, __int128(offset) + 1)
                               : __int128(row) * col - ClampedRowSum(row, col, offset);
  TB_CHECK(count <= INT64_MAX / 2, RuntimeError)
      << op << ": " << row << " x " << col << " with offset " << offset
      << " has more indices than a tensor can hold";
  const int64_t n = static_cast<int64_t>(count);
  Tensor out = Tensor::Empty({2, n}, dt);
  if (n == 0) return out;
  TB_DISPATCH(dt, op, TB_TYPES_INT, [&] {
    using T = scalar_t;
    T* p = out.data_as<T>();
    int64_t k = 0;
    const __int128 first = lower ? std::max<__int128>(0, -__int128(offset)) : 0;
    const __int128 end = lower ? row : std::min<__int128>(row, __int128(col) - offset);
    for (__int128 i = first; i < end && k < n; ++i) {
      const __int128 j0 = lower ? 0 : std::max<__int128>(0, i + offset);
      const __int128 j1 = lower ? std::min<__int128>(col, i + offset + 1) : col;
      for (__int128 j = j0; j < j1; ++j, ++k) {
        p[k] = static_cast<T>(i);
        p[n + k] = static_cast<T>(j);
      }
    }
    TB_ICHECK(k == n) << op << ": wrote " << k << " of " << n << " indices";
  });
  return out;
}

Tensor TrilIndices(int64_t row, int64_t col, int64_t offset, std::optional<DType> dtype,
                   const Value& layout, const Value& device, const Value& /*pin_memory*/) {
  return TriangleIndices("aten::tril_indices", true, row, col, offset, dtype, layout, device);
}

Tensor TriuIndices(int64_t row, int64_t col, int64_t offset, std::optional<DType> dtype,
                   const Value& layout, const Value& device, const Value& /*pin_memory*/) {
  return TriangleIndices("aten::triu_indices", false, row, col, offset, dtype, layout, device);
}

}  // namespace

TB_REGISTER_KERNELS(factory_indices) {
  table.RegisterKernel("aten::tril_indices", DeviceType::kCPU, Boxed<&TrilIndices>(), TB_HERE);
  table.RegisterKernel("aten::triu_indices", DeviceType::kCPU, Boxed<&TriuIndices>(), TB_HERE);
}

}  // namespace tb
