// aten::im2col (torch.nn.functional.unfold) copies each sliding block of an image (N, C, H, W)
// or unbatched (C, H, W) into a column of (N, C*kh*kw, L), zeros where a block overlaps the
// padding. aten::col2im (torch.nn.functional.fold), its adjoint, sums the columns of sliding blocks
// back into an image. Input (N, C*kh*kw, L) or unbatched (C*kh*kw, L); output (N, C, H, W) or (C,
// H, W). The accumulation order is torch's (per channel: kernel offset, then block row, then block
// column), each addition done in the element type as torch's col2im does.
#include <string>
#include <utility>
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

// The sliding blocks both ops walk: kernel size, dilation, padding and stride, 2 elements each.
struct Blocks2d {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
  // The extent of an image of h rows / w columns the blocks sweep, less one block (negative
  // when no block fits); the number of blocks along it is this / stride + 1.
  int64_t SweepH(int64_t h) const { return h + 2 * ph - (dh * (kh - 1) + 1); }
  int64_t SweepW(int64_t w) const { return w + 2 * pw - (dw * (kw - 1) + 1); }
};

// The four parameters checked as torch checks them (each naming the one at fault).
Blocks2d CheckBlocks(const char* op, const std::vector<int64_t>& kernel_size,
                     const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding,
                     const std::vector<int64_t>& stride) {
  const std::pair<const std::vector<int64_t>*, const char*> params[] = {
      {&kernel_size, "kernel_size"},
      {&dilation, "dilation"},
      {&padding, "padding"},
      {&stride, "stride"}};
  for (const auto& [v, name] : params) {
    TB_CHECK(v->size() == 2, ValueError)
        << op << ": " << name << " must have 2 elements, got " << ShapeString(*v);
  }
  const Blocks2d b{kernel_size[0], kernel_size[1], dilation[0], dilation[1],
                   padding[0],     padding[1],     stride[0],   stride[1]};
  TB_CHECK(b.kh > 0 && b.kw > 0, ValueError)
      << op << ": kernel size should be greater than zero, got " << ShapeString(kernel_size);
  TB_CHECK(b.sh > 0 && b.sw > 0, ValueError)
      << op << ": stride should be greater than zero, got " << ShapeString(stride);
  TB_CHECK(b.dh > 0 && b.dw > 0, ValueError)
      << op << ": dilation should be greater than zero, got " << ShapeString(dilation);
  TB_CHECK(b.ph >= 0 && b.pw >= 0, ValueError)
      << op << ": padding should be non-negative, got " << ShapeString(padding);
  return b;
}

// f(column index, image row, image column) for every element of one plane's columns (kernel
// offset, then block row, then block column: torch's order); the image position may lie in
// the padding.
template <typename F>
void ForEachBlockElement(const Blocks2d& b, int64_t bh, int64_t bw, F&& f) {
  for (int64_t k = 0; k < b.kh * b.kw; ++k) {
    const int64_t wo = k % b.kw, ho = k / b.kw;
    for (int64_t hc = 0; hc < bh; ++hc) {
      const int64_t hi = hc * b.sh - b.ph + ho * b.dh;
      for (int64_t wc = 0; wc < bw; ++wc) {
        f((k * bh + hc) * bw + wc, hi, wc * b.sw - b.pw + wo * b.dw);
      }
    }
  }
}

Tensor Col2Im(const Tensor& self, const std::vector<int64_t>& output_size,
              const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& dilation,
              const std::vector<int64_t>& padding, const std::vector<int64_t>& stride) {
  constexpr const char* kOp = "aten::col2im";
  TB_CHECK(output_size.size() == 2, ValueError)
      << kOp << ": output_size must have 2 elements, got " << ShapeString(output_size);
  const Blocks2d b = CheckBlocks(kOp, kernel_size, dilation, padding, stride);
  const int64_t oh = output_size[0], ow = output_size[1];
  const int64_t kh = b.kh, kw = b.kw;
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
  const int64_t bh = b.SweepH(oh) / b.sh + 1, bw = b.SweepW(ow) / b.sw + 1;
  TB_CHECK(bh >= 1 && bw >= 1 && bh * bw == L, ValueError)
      << kOp << ": given output_size " << ShapeString(output_size) << ", kernel_size "
      << ShapeString(kernel_size) << ", dilation " << ShapeString(dilation) << ", padding "
      << ShapeString(padding) << ", stride " << ShapeString(stride) << ", expected size of "
      << "input's dimension 2 to match the calculated number of sliding blocks " << bh << " * "
      << bw << " = " << bh * bw << ", but got " << L;
  TB_CHECK_SUPPORTED(IsFloatingPoint(self.dtype()))
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
      ForEachBlockElement(b, bh, bw, [&](int64_t ci, int64_t hi, int64_t wi) {
        if (hi >= 0 && hi < oh && wi >= 0 && wi < ow) {
          T& dst = im[hi * ow + wi];
          dst = dst + col[ci];
        }
      });
    });
  });
  return out;
}

Tensor Im2Col(const Tensor& self, const std::vector<int64_t>& kernel_size,
              const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& stride) {
  constexpr const char* kOp = "aten::im2col";
  const Blocks2d b = CheckBlocks(kOp, kernel_size, dilation, padding, stride);
  const int64_t kh = b.kh, kw = b.kw;
  const bool batched = self.ndim() == 4;
  TB_CHECK((self.ndim() == 3 && self.size(0) != 0 && self.size(1) != 0 && self.size(2) != 0) ||
               (batched && self.size(1) != 0 && self.size(2) != 0 && self.size(3) != 0),
           ValueError)
      << kOp << ": expected a 3-D or 4-D input with non-zero sizes except the batch dimension, "
      << "got shape " << ShapeString(self.shape());
  const int64_t n = batched ? self.size(0) : 1;
  const int64_t c = self.size(-3), h = self.size(-2), w = self.size(-1);
  const int64_t bh = b.SweepH(h) / b.sh + 1, bw = b.SweepW(w) / b.sw + 1;
  TB_CHECK(b.SweepH(h) >= 0 && b.SweepW(w) >= 0, ValueError)
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
      ForEachBlockElement(b, bh, bw, [&](int64_t ci, int64_t hi, int64_t wi) {
        col[ci] = hi >= 0 && hi < h && wi >= 0 && wi < w ? im[hi * w + wi] : zero;
      });
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
