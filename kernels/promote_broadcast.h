// Building blocks the kernels share, public so that C++ kernel authors can use them too:
// type promotion (PyTorch's rules), dtype conversion, broadcasting.
#pragma once

#include <optional>
#include <vector>

#include "bridge/tensor.h"

namespace tb {

// PyTorch's promote_types lattice (torch.promote_types).
TB_API DType PromoteTypes(DType a, DType b);

// One operand of a type-promoting op: a tensor, or a Python number ("wrapped": it
// contributes only its category, as torch's wrapped numbers do).
struct PromotionOperand {
  DType dtype;
  bool zero_dim;  // a 0-d tensor (weaker than tensors with dimensions)
  bool wrapped;   // a Python number
};
// torch.result_type over the operands.
TB_API DType ResultType(const std::vector<PromotionOperand>& operands);
TB_API PromotionOperand Operand(const Tensor& t);

// A new contiguous tensor holding `src` converted to `dtype` (src itself when it already is).
TB_API Tensor Cast(const Tensor& src, DType dtype);
// Element-wise converting copy of `src` (broadcast to dst's shape) into `dst`.
TB_API void CopyCast(const Tensor& dst, const Tensor& src);
// dst <- src (same dtype, src already broadcast to dst's shape) as one memcpy per run of
// elements contiguous in both (the innermost dims with stride 1, merged while both stay
// contiguous), rows spread over threads for large copies. False (nothing copied) when the
// innermost dim is not contiguous in both or the rows are too short to pay.
bool CopyContiguousRows(const Tensor& dst, const Tensor& src);
// The broadcast shape of several shapes; ValueError naming `op` when they do not broadcast.
TB_API Dims BroadcastShapes(const std::vector<IntArrayRef>& shapes, const char* op);
// A new contiguous tensor: `src` with dimension `dim` replaced by src[..., index[j], ...] for
// each j. Every index must already be valid.
Tensor GatherBlocks(const Tensor& src, int64_t dim, const std::vector<int64_t>& index);

}  // namespace tb
