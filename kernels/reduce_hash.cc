// aten::hash_tensor: the XOR of the elements' bits over `dim` (all dims when empty), as uint64.
// As torch's mode 0: floating elements are cast to float64 and their bit patterns taken, integer
// and bool ones cast to int64 (two's complement bits).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"

namespace tb {
namespace {

template <typename T>
uint64_t Bits(T v) {
  if constexpr (std::is_floating_point_v<T> || kernels::kIsReducedFloat<T>) {
    const double d = kernels::Convert<double>(v);
    uint64_t u;
    std::memcpy(&u, &d, sizeof(u));
    return u;
  } else {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  }
}

Tensor HashTensor(const Tensor& self, const std::vector<int64_t>& dim, bool keepdim, int64_t mode) {
  constexpr const char* kOp = "aten::hash_tensor";
  TB_CHECK(mode == 0, ValueError) << kOp << ": mode " << mode << " is not supported (only 0)";
  TB_CHECK_SUPPORTED(!IsComplex(self.dtype()))
      << kOp << ": complex dtypes (" << DTypeName(self.dtype()) << ") are not supported";
  TB_CHECK(!dim.empty() || self.numel() > 0, ValueError)
      << kOp << ": Expected reduction dim to be specified for input.numel() == 0. Specify the "
      << "reduction dim with the 'dim' argument.";
  const int64_t nd = self.ndim();
  std::vector<bool> reduced(static_cast<size_t>(nd), dim.empty());
  for (int64_t d : dim) {
    const int64_t w = WrapDim(d, std::max<int64_t>(nd, 1), kOp);
    TB_CHECK(nd == 0 || !reduced[w], ValueError)
        << kOp << ": dim " << w << " appears multiple times in the list of dims";
    if (nd > 0) reduced[w] = true;
  }
  for (int64_t d = 0; d < nd && !dim.empty(); ++d) {
    TB_CHECK(!reduced[d] || self.size(d) > 0, IndexError)
        << kOp << ": Expected reduction dim " << d << " to have non-zero size.";
  }
  // Kept dims first, then the reduced ones: each output element XORs one contiguous block.
  Dims perm, shape, kept_shape;
  int64_t block = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduced[d]) {
      perm.push_back(d);
      kept_shape.push_back(self.size(d));
    }
    shape.push_back(reduced[d] ? (keepdim ? 1 : -1) : self.size(d));
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      perm.push_back(d);
      block *= self.size(d);
    }
  }
  Dims out_shape;
  for (int64_t s : shape) {
    if (s >= 0) out_shape.push_back(s);
  }
  Tensor out = Tensor::Empty(out_shape, DType::kUInt64);
  Tensor x = self.permute(perm).contiguous();
  const int64_t outer = out.numel();
  uint64_t* po = out.data_as<uint64_t>();
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    const T* px = x.data_as<const T>();
    for (int64_t o = 0; o < outer; ++o) {
      uint64_t h = 0;
      for (int64_t i = 0; i < block; ++i) h ^= Bits(px[o * block + i]);
      po[o] = h;
    }
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(reduce_hash) {
  table.RegisterKernel("aten::hash_tensor", DeviceType::kCPU, Boxed<&HashTensor>(), TB_HERE);
}

}  // namespace tb
