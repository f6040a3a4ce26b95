// aten::tril_indices / aten::triu_indices: the (2, N) row and column indices of the lower /
// upper triangle of a row x col matrix (diagonal moved by `offset`), in row-major order.
#include <cstdint>
#include <optional>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"

namespace tb {
namespace {

Tensor TriangleIndices(const char* op, bool lower, int64_t row, int64_t col, int64_t offset,
                       std::optional<DType> dtype, const Value& layout, const Value& device) {
  kernels::CheckOptions(op, layout, device);
  TB_CHECK(row >= 0, ValueError) << op << ": row must be non-negative, got " << row;
  TB_CHECK(col >= 0, ValueError) << op << ": col must be non-negative, got " << col;
  std::vector<int64_t> rows, cols;
  for (int64_t i = 0; i < row; ++i) {
    for (int64_t j = 0; j < col; ++j) {
      if (lower ? j - i <= offset : j - i >= offset) {
        rows.push_back(i);
        cols.push_back(j);
      }
    }
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  const DType dt = dtype.value_or(DType::kInt64);
  TB_CHECK(dt == DType::kInt64 || dt == DType::kInt32, NotImplementedError)
      << op << ": not implemented for " << DTypeName(dt) << " (as torch's: int64 and int32 only)";
  Tensor out = Tensor::Empty({2, n}, dt);
  TB_DISPATCH(dt, op, TB_TYPES_INT, [&] {
    using T = scalar_t;
    T* p = out.data_as<T>();
    for (int64_t k = 0; k < n; ++k) {
      p[k] = static_cast<T>(rows[k]);
      p[n + k] = static_cast<T>(cols[k]);
    }
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
