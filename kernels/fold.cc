// aten::im2col (torch.nn.functional.unfold) copies each sliding block of an image (N, C, H, W)
// or unbatched (C, H, W) into a column of (N, C*kh*kw, L), zeros where a block overlaps the
// padding. aten::col2im (torch.nn.functional.fold), its adjoint, sums the columns of sliding blocks
// back into an image. Input (N, C*kh*kw, L) or unbatched (C*kh*kw, L); output (N, C, H, W) or (C,
// H, W). The accumulation order is torch's (per channel: kernel offset, then block row, then block
// column), each addition done in the element type as torch's col2im does.
#include <string>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/loops_internal.h"

namespace tb {
namespace {

using kernels::Convert;
using kernels::ParallelFor;

// The dtypes torch's im2col takes on CPU (complex aside).
#define TB_TYPES_FLOAT_BOOL(...) TB_CASES_FLOAT_(__VA_ARGS__) TB_CASES_BOOL_(__VA_ARGS__)

Tensor Col2Im(const Tensor& self, const std::vector<int64_t>& output_size,
              const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& dilation,
              const std::vector<int64_t>& padding, const std::vector<int64_t>& stride) {
  constexpr const char* kOp = "aten::col2im";
  auto two = [&](const std::vector<int64_t>& v, const char* name) {
    TB_CHECK(v.size() == 2, ValueError)
        << kOp << ": " << name << " must have 2 elements, got " << ShapeString(v);
  };
  two(output_size, "output_size");
  two(kernel_size, "kernel_size");
  two(dilation, "dilation");
  two(padding, "padding");
  two(stride, "stride");
  const int64_t oh = output_size[0], ow = output_size[1];
  const int64_t kh = kernel_size[0], kw = kernel_size[1];
  const int64_t dh = dilation[0], dw = dilation[1];
  const int64_t ph = padding[0], pw = padding[1];
  const int64_t sh = stride[0], sw = stride[1];
  TB_CHECK(kh > 0 && kw > 0, ValueError)
      << kOp << ": kernel size should be greater than zero, got " << ShapeString(kernel_size);
  TB_CHECK(sh > 0 && sw > 0, ValueError)
      << kOp << ": stride should be greater than zero, got " << ShapeString(stride);
  TB_CHECK(dh > 0 && dw > 0, ValueError)
      << kOp << ": dilation should be greater than zero, got " << ShapeString(dilation);
  TB_CHECK(ph >= 0 && pw >= 0, ValueError)
      << kOp << ": padding should be non-negative, got " << ShapeString(padding);
  TB_CHECK(oh > 0 && ow > 0, ValueError)
      << kOp << ": output_size should be greater than zero, got " << ShapeString(output_size);
  const bool batched = self.ndim() == 3;
  TB_CHECK((self.ndim() == 2 && self.size(0) != 0 && self.size(1) != 0) ||
               (batched && self.size(1) != 0 && self.size(2) != 0),
           ValueError)
      << kOp << ": expected a 2-D or 3-D input with non-zero sizes except the batch dimension, "
      << "got shape " << ShapeString(self.shape());
  const int64_t rows = self.size(-2), L = self.size(-1);
  TB_CHECK(rows % (kh * kw) == 0, ValueError)
      << kOp << ": expected size of input's dimension 1 (" << rows
      << ") to be divisible by the product of kernel_size (" << kh * kw << ")";
  const int64_t bh = (oh + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1;
  const int64_t bw = (ow + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1;
  TB_CHECK(bh >= 1 && bw >= 1 && bh * bw == L, ValueError)
      << kOp << ": given output_size " << ShapeString(output_size) << ", kernel_size "
      << ShapeString(kernel_size) << ", dilation " << ShapeString(dilation) << ", padding "
      << ShapeString(padding) << ", stride " << ShapeString(stride) << ", expected size of "
      << "input's dimension 2 to match the calculated number of sliding blocks " << bh << " * "
      << bw << " = " << bh * bw << ", but got " << L;
  TB_CHECK(IsFloatingPoint(self.dtype()), NotImplementedError)
      << kOp << ": dtype " << DTypeName(self.dtype()) << " is not supported";
  const int64_t n = batched ? self.size(0) : 1;
  const int64_t c = rows / (kh * kw);
  std::vector<int64_t> shape{c, oh, ow};
  if (batched) shape.insert(shape.begin(), n);
  Tensor out = Tensor::Zeros(shape, self.dtype());
  if (out.numel() == 0) return out;
  const Tensor x = self.contiguous();
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    const T* px = x.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    // (image, channel) planes are independent sums.
    ParallelFor(n * c, x.numel() > kernels::kGrain, [&](int64_t plane) {
      const T* col = px + plane * kh * kw * L;
      T* im = po + plane * oh * ow;
      for (int64_t k = 0; k < kh * kw; ++k) {
        const int64_t wo = k % kw, ho = k / kw;
        for (int64_t hc = 0; hc < bh; ++hc) {
          const int64_t hi = hc * sh - ph + ho * dh;
          for (int64_t wc = 0; wc < bw; ++wc) {
            const int64_t wi = wc * sw - pw + wo * dw;
            if (hi >= 0 && hi < oh && wi >= 0 && wi < ow) {
              T& dst = im[hi * ow + wi];
              dst = dst + col[(k * bh + hc) * bw + wc];
            }
          }
        }
      }
    });
  });
  return out;
}

Tensor Im2Col(const Tensor& self, const std::vector<int64_t>& kernel_size,
              const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& stride) {
  constexpr const char* kOp = "aten::im2col";
  for (const auto* v : {&kernel_size, &dilation, &padding, &stride}) {
    TB_CHECK(v->size() == 2, ValueError)
        << kOp << ": kernel_size, dilation, padding and stride must have 2 elements each";
  }
  const int64_t kh = kernel_size[0], kw = kernel_size[1];
  const int64_t dh = dilation[0], dw = dilation[1];
  const int64_t ph = padding[0], pw = padding[1];
  const int64_t sh = stride[0], sw = stride[1];
  TB_CHECK(kh > 0 && kw > 0, ValueError)
      << kOp << ": kernel size should be greater than zero, got " << ShapeString(kernel_size);
  TB_CHECK(sh > 0 && sw > 0, ValueError)
      << kOp << ": stride should be greater than zero, got " << ShapeString(stride);
  TB_CHECK(dh > 0 && dw > 0, ValueError)
      << kOp << ": dilation should be greater than zero, got " << ShapeString(dilation);
  TB_CHECK(ph >= 0 && pw >= 0, ValueError)
      << kOp << ": padding should be non-negative, got " << ShapeString(padding);
  const bool batched = self.ndim() == 4;
  TB_CHECK((self.ndim() == 3 && self.size(0) != 0 && self.size(1) != 0 && self.size(2) != 0) ||
               (batched && self.size(1) != 0 && self.size(2) != 0 && self.size(3) != 0),
           ValueError)
      << kOp << ": expected a 3-D or 4-D input with non-zero sizes except the batch dimension, "
      << "got shape " << ShapeString(self.shape());
  const int64_t n = batched ? self.size(0) : 1;
  const int64_t c = self.size(-3), h = self.size(-2), w = self.size(-1);
  const int64_t bh = (h + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1;
  const int64_t bw = (w + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1;
  TB_CHECK(h + 2 * ph - (dh * (kh - 1) + 1) >= 0 && w + 2 * pw - (dw * (kw - 1) + 1) >= 0,
           ValueError)
      << kOp << ": given input of shape " << ShapeString(self.shape()) << ", kernel_size "
      << ShapeString(kernel_size) << ", dilation " << ShapeString(dilation) << ", padding "
      << ShapeString(padding) << ", stride " << ShapeString(stride)
      << ", the calculated number of sliding blocks " << bh << " * " << bw
      << " is too small (non-positive)";
  const int64_t L = bh * bw;
  std::vector<int64_t> shape{c * kh * kw, L};
  if (batched) shape.insert(shape.begin(), n);
  Tensor out = Tensor::Empty(shape, self.dtype());
  if (out.numel() == 0) return out;
  const Tensor x = self.contiguous();
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_FLOAT_BOOL, [&] {
    using T = scalar_t;
    const T* px = x.data_as<const T>();
    T* po = static_cast<T*>(out.mutable_data());
    const T zero = Convert<T>(0);
    ParallelFor(n * c, out.numel() > kernels::kGrain, [&](int64_t plane) {
      const T* im = px + plane * h * w;
      T* col = po + plane * kh * kw * L;
      for (int64_t k = 0; k < kh * kw; ++k) {
        const int64_t wo = k % kw, ho = k / kw;
        for (int64_t hc = 0; hc < bh; ++hc) {
          const int64_t hi = hc * sh - ph + ho * dh;
          for (int64_t wc = 0; wc < bw; ++wc) {
            const int64_t wi = wc * sw - pw + wo * dw;
            col[(k * bh + hc) * bw + wc] =
                hi >= 0 && hi < h && wi >= 0 && wi < w ? im[hi * w + wi] : zero;
          }
        }
      }
    });
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(fold) {
  table.RegisterKernel("aten::im2col", DeviceType::kCPU, Boxed<&Im2Col>(), TB_HERE);
  table.RegisterKernel("aten::col2im", DeviceType::kCPU, Boxed<&Col2Im>(), TB_HERE);
}

}  // namespace tb
