// Adaptive max pooling and max unpooling: aten::adaptive_max_pool2d / 3d (values and the flat
// index of each maximum within its plane) with their backward ops, aten::max_unpool2d / 3d.
//
// As torch's CPU kernels: output cell o of a dimension of input size n and output size m
// covers [floor(o * n / m), ceil((o + 1) * n / m)); the maximum starts at -inf with the
// window's first index, a larger value or a NaN replaces it (so NaN wins). The backward adds
// each output gradient at its index. max_unpool writes each input value at its index in the
// zeroed output plane (IndexError for an index outside the plane).
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

// Input planes: the leading dims (1 or 2 of them) times the `nd` spatial sizes.
struct Planes {
  int64_t count = 1;
  std::vector<int64_t> sizes;  // spatial
  std::vector<int64_t> lead;   // leading dims
};

Planes PlanesOf(const Tensor& self, int64_t nd, const char* op) {
  TB_CHECK(self.ndim() == nd + 1 || self.ndim() == nd + 2, ValueError)
      << op << ": expected " << nd + 1 << "D or " << nd + 2 << "D input, got shape "
      << ShapeString(self.shape());
  Planes p;
  const int64_t lead = self.ndim() - nd;
  for (int64_t d = 0; d < lead; ++d) {
    p.lead.push_back(self.size(d));
    p.count *= self.size(d);
  }
  for (int64_t d = lead; d < self.ndim(); ++d) {
    TB_CHECK(self.size(d) > 0, ValueError)
        << op << ": expected input to have non-zero size for spatial dimensions, got shape "
        << ShapeString(self.shape());
    p.sizes.push_back(self.size(d));
  }
  return p;
}

std::tuple<Tensor, Tensor> AdaptiveMax(const Tensor& self, const std::vector<int64_t>& output_size,
                                       int64_t nd, const char* op) {
  kernels::CheckHost(op, self);
  TB_CHECK(static_cast<int64_t>(output_size.size()) == nd, ValueError)
      << op << ": output_size must have " << nd << " elements, got " << output_size.size();
  const Planes p = PlanesOf(self, nd, op);
  std::vector<int64_t> out_shape = p.lead;
  int64_t in_plane = 1, out_plane = 1;
  for (int64_t d = 0; d < nd; ++d) {
    TB_CHECK(output_size[d] >= 0, ValueError) << op << ": output_size must be non-negative";
    out_shape.push_back(output_size[d]);
    in_plane *= p.sizes[d];
    out_plane *= output_size[d];
  }
  Tensor x = self.contiguous();
  Tensor out = Tensor::Empty(out_shape, self.dtype());
  Tensor idx = Tensor::Empty(out_shape, DType::kInt64);
  // Sizes padded to 3 spatial dims (leading ones of size 1).
  int64_t in[3] = {1, 1, 1}, os[3] = {1, 1, 1};
  for (int64_t d = 0; d < nd; ++d) {
    in[3 - nd + d] = p.sizes[d];
    os[3 - nd + d] = output_size[d];
  }
  auto start = [](int64_t o, int64_t n, int64_t m) { return (o * n) / m; };
  auto end = [](int64_t o, int64_t n, int64_t m) { return ((o + 1) * n + m - 1) / m; };
  TB_DISPATCH(self.dtype(), op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* xp = x.data_as<const T>();
    T* op_ = out.data_as<T>();
    int64_t* ip = idx.data_as<int64_t>();
    for (int64_t c = 0; c < p.count; ++c) {
      const T* plane = xp + c * in_plane;
      int64_t k = c * out_plane;
      for (int64_t od = 0; od < os[0]; ++od) {
        const int64_t d0 = start(od, in[0], os[0]), d1 = end(od, in[0], os[0]);
        for (int64_t oh = 0; oh < os[1]; ++oh) {
          const int64_t h0 = start(oh, in[1], os[1]), h1 = end(oh, in[1], os[1]);
          for (int64_t ow = 0; ow < os[2]; ++ow, ++k) {
            const int64_t w0 = start(ow, in[2], os[2]), w1 = end(ow, in[2], os[2]);
            Acc best = -std::numeric_limits<Acc>::infinity();
            int64_t best_i = (d0 * in[1] + h0) * in[2] + w0;
            for (int64_t d = d0; d < d1; ++d) {
              for (int64_t h = h0; h < h1; ++h) {
                for (int64_t w = w0; w < w1; ++w) {
                  const int64_t i = (d * in[1] + h) * in[2] + w;
                  const Acc v = static_cast<Acc>(plane[i]);
                  if (v > best || std::isnan(v)) {
                    best = v;
                    best_i = i;
                  }
                }
              }
            }
            op_[k] = static_cast<T>(best);
            ip[k] = best_i;
          }
        }
      }
    }
  });
  return {out, idx};
}

// out (zeros of `shape`, `nd` spatial dims) with out[plane][indices[k]] combined with
// values[plane][k]: added (the pooling backward) or written (max_unpool).
Tensor ScatterToPlanes(const Tensor& values, const Tensor& indices, IntArrayRef shape, int64_t nd,
                       bool add, const char* op) {
  kernels::CheckHost(op, values);
  kernels::CheckHost(op, indices);
  TB_CHECK(values.shape() == indices.shape(), ValueError)
      << op << ": values of shape " << ShapeString(values.shape())
      << " do not match indices of shape " << ShapeString(indices.shape());
  TB_CHECK(indices.dtype() == DType::kInt64, TypeError)
      << op << ": expected int64 indices, got " << DTypeName(indices.dtype());
  const int64_t lead = static_cast<int64_t>(shape.size()) - nd;
  TB_CHECK(lead >= 0 && values.ndim() == static_cast<int64_t>(shape.size()), ValueError)
      << op << ": values of shape " << ShapeString(values.shape()) << " do not match the output "
      << ShapeString(shape);
  int64_t planes = 1, in_plane = 1;
  for (int64_t d = 0; d < lead; ++d) {
    TB_CHECK(values.size(d) == shape[d], ValueError)
        << op << ": values of shape " << ShapeString(values.shape()) << " do not match the output "
        << ShapeString(shape);
    planes *= shape[d];
  }
  for (int64_t d = lead; d < static_cast<int64_t>(shape.size()); ++d) in_plane *= shape[d];
  Tensor v = values.contiguous();
  Tensor ix = indices.contiguous();
  Tensor out = Tensor::Zeros(shape, values.dtype());
  const int64_t per = planes == 0 ? 0 : v.numel() / planes;
  const int64_t* ip = ix.data_as<const int64_t>();
  for (int64_t k = 0; k < v.numel(); ++k) {
    if (ip[k] < 0 || ip[k] >= in_plane) {
      TB_THROW(IndexError) << op << ": found an invalid max index: " << ip[k]
                           << " (output planes have " << in_plane << " elements)";
    }
  }
  TB_DISPATCH(values.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    using Acc = std::conditional_t<std::is_same_v<T, bool>, bool, kernels::opmath_t<T>>;
    const T* vp = v.data_as<const T>();
    T* o = out.data_as<T>();
    for (int64_t c = 0; c < planes; ++c) {
      for (int64_t k = c * per; k < (c + 1) * per; ++k) {
        T& d = o[c * in_plane + ip[k]];
        if (add) {
          d = static_cast<T>(static_cast<Acc>(d) + static_cast<Acc>(vp[k]));
        } else {
          d = vp[k];
        }
      }
    }
  });
  return out;
}

std::tuple<Tensor, Tensor> AdaptiveMaxPool2d(const Tensor& self,
                                             const std::vector<int64_t>& output_size) {
  return AdaptiveMax(self, output_size, 2, "aten::adaptive_max_pool2d");
}
std::tuple<Tensor, Tensor> AdaptiveMaxPool3d(const Tensor& self,
                                             const std::vector<int64_t>& output_size) {
  return AdaptiveMax(self, output_size, 3, "aten::adaptive_max_pool3d");
}

Tensor AdaptiveMaxPool2dBackward(const Tensor& grad_output, const Tensor& self,
                                 const Tensor& indices) {
  return ScatterToPlanes(Cast(grad_output, self.dtype()), indices, self.shape(), 2, true,
                         "aten::adaptive_max_pool2d_backward");
}
Tensor AdaptiveMaxPool3dBackward(const Tensor& grad_output, const Tensor& self,
                                 const Tensor& indices) {
  return ScatterToPlanes(Cast(grad_output, self.dtype()), indices, self.shape(), 3, true,
                         "aten::adaptive_max_pool3d_backward");
}

Tensor MaxUnpool(const Tensor& self, const Tensor& indices, const std::vector<int64_t>& output_size,
                 int64_t nd, const char* op) {
  TB_CHECK(static_cast<int64_t>(output_size.size()) == nd, ValueError)
      << op << ": there should be exactly " << nd << " elements (output size), got "
      << output_size.size();
  TB_CHECK(self.ndim() == nd + 1 || self.ndim() == nd + 2, ValueError)
      << op << ": input to max_unpooling should be a " << nd + 1 << "d or " << nd + 2
      << "d Tensor, got shape " << ShapeString(self.shape());
  TB_CHECK(self.shape() == indices.shape(), ValueError)
      << op << ": expected shape of indices to be same as that of the input tensor ("
      << ShapeString(self.shape())
      << ") but got indices tensor with shape: " << ShapeString(indices.shape());
  std::vector<int64_t> shape(self.shape().begin(), self.shape().end() - nd);
  for (int64_t v : output_size) shape.push_back(v);
  return ScatterToPlanes(self, indices, shape, nd, false, op);
}

Tensor MaxUnpool2d(const Tensor& self, const Tensor& indices,
                   const std::vector<int64_t>& output_size) {
  return MaxUnpool(self, indices, output_size, 2, "aten::max_unpool2d");
}
Tensor MaxUnpool3d(const Tensor& self, const Tensor& indices,
                   const std::vector<int64_t>& output_size, const std::vector<int64_t>& /*stride*/,
                   const std::vector<int64_t>& /*padding*/) {
  return MaxUnpool(self, indices, output_size, 3, "aten::max_unpool3d");
}

}  // namespace

TB_REGISTER_KERNELS(pool_adaptive_max) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::adaptive_max_pool2d", cpu, Boxed<&AdaptiveMaxPool2d>(), TB_HERE);
  table.RegisterKernel("aten::adaptive_max_pool3d", cpu, Boxed<&AdaptiveMaxPool3d>(), TB_HERE);
  table.RegisterKernel("aten::adaptive_max_pool2d_backward", cpu,
                       Boxed<&AdaptiveMaxPool2dBackward>(), TB_HERE);
  table.RegisterKernel("aten::adaptive_max_pool3d_backward", cpu,
                       Boxed<&AdaptiveMaxPool3dBackward>(), TB_HERE);
  table.RegisterKernel("aten::max_unpool2d", cpu, Boxed<&MaxUnpool2d>(), TB_HERE);
  table.RegisterKernel("aten::max_unpool3d", cpu, Boxed<&MaxUnpool3d>(), TB_HERE);
}

}  // namespace tb
