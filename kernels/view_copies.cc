// Shape ops that copy: the `*_copy` forms of the view ops (aten::view_copy, permute_copy,
// expand_copy, ...: the view op of the table, then a contiguous copy of each result), their
// backward helpers diagonal_backward and unfold_backward, and rot90, diag_embed, trace,
// block_diag, pixel_shuffle, pixel_unshuffle and channel_shuffle.
//
// Results are new contiguous tensors of our own memory, as torch's `*_copy` ops return; the
// element order and dtype are torch's. Errors name the op and the shape or argument at fault.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

// A kernel for `view_op`'s copying form: the same arguments run `view_op` through the table,
// then each tensor result (or each tensor of a list result) becomes a contiguous copy.
BoxedKernel CopyOfView(const char* view_op) {
  const OpId id = OpTable::Global().Intern(view_op);
  return [id](const OpInfo& op, Stack& s) {
    for (const Value& v : s) {
      if (v.is_tensor()) kernels::CheckHost(op.qualified.c_str(), v.to_tensor());
    }
    OpTable::Global().Call(id, s);
    for (Value& v : s) {
      if (v.is_tensor()) {
        v = Value(v.to_tensor().clone());
      } else if (v.tag() == Value::Tag::kTensorList) {
        std::vector<Tensor> copies;
        for (const Tensor& t : v.to_tensor_list()) copies.push_back(t.clone());
        v = Value(std::move(copies));
      }
    }
  };
}

// Zeros of `sizes` in grad's dtype with diagonal(offset, dim1, dim2) set to grad.
Tensor DiagonalBackward(const Tensor& grad, const std::vector<int64_t>& input_sizes, int64_t offset,
                        int64_t dim1, int64_t dim2) {
  constexpr const char* kOp = "aten::diagonal_backward";
  kernels::CheckHost(kOp, grad);
  const int64_t nd = static_cast<int64_t>(input_sizes.size());
  dim1 = WrapDim(dim1, nd, kOp);
  dim2 = WrapDim(dim2, nd, kOp);
  TB_CHECK(dim1 != dim2, ValueError) << kOp << ": diagonal dimensions cannot be identical";
  Tensor out = Tensor::Zeros(input_sizes, grad.dtype());
  Tensor diag = out.diagonal(offset, dim1, dim2);
  TB_CHECK(diag.shape() == grad.shape(), ValueError)
      << kOp << ": grad of shape " << ShapeString(grad.shape()) << " does not match the diagonal "
      << ShapeString(diag.shape()) << " of input_sizes " << ShapeString(input_sizes);
  CopyCast(diag, grad);
  return out;
}

// The gradient of x.unfold(dim, size, step): each window's gradient added back at its place.
Tensor UnfoldBackward(const Tensor& grad_in, const std::vector<int64_t>& input_sizes, int64_t dim,
                      int64_t size, int64_t step) {
  constexpr const char* kOp = "aten::unfold_backward";
  kernels::CheckHost(kOp, grad_in);
  const int64_t nd = static_cast<int64_t>(input_sizes.size());
  dim = nd == 0 ? 0 : WrapDim(dim, nd, kOp);
  TB_CHECK(step > 0 && size >= 0, ValueError)
      << kOp << ": step must be positive and size non-negative, got step " << step << ", size "
      << size;
  const int64_t len = nd == 0 ? 1 : input_sizes[dim];
  const int64_t windows = size > len ? 0 : (len - size) / step + 1;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= input_sizes[d];
  for (int64_t d = dim + 1; d < nd; ++d) inner *= input_sizes[d];
  TB_CHECK(grad_in.numel() == outer * windows * inner * size, ValueError)
      << kOp << ": grad of shape " << ShapeString(grad_in.shape())
      << " does not match the windows of input_sizes " << ShapeString(input_sizes);
  Tensor g = grad_in.contiguous();
  Tensor out = Tensor::Zeros(input_sizes, g.dtype());
  TB_DISPATCH(g.dtype(), kOp, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* src = g.data_as<const T>();
    T* dst = out.data_as<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t w = 0; w < windows; ++w) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* gs = src + ((o * windows + w) * inner + i) * size;
          for (int64_t j = 0; j < size; ++j) {
            T& d = dst[(o * len + w * step + j) * inner + i];
            d = static_cast<T>(static_cast<Acc>(d) + static_cast<Acc>(gs[j]));
          }
        }
      }
    }
  });
  return out;
}

Tensor Rot90(const Tensor& self, int64_t k, const std::vector<int64_t>& dims) {
  constexpr const char* kOp = "aten::rot90";
  kernels::CheckHost(kOp, self);
  TB_CHECK(dims.size() == 2, ValueError)
      << kOp << ": expected total rotation dims == 2, but got dims = " << dims.size();
  TB_CHECK(self.ndim() >= 2, ValueError)
      << kOp << ": expected total dims >= 2, but got total dims = " << self.ndim();
  const int64_t d0 = WrapDim(dims[0], self.ndim(), kOp), d1 = WrapDim(dims[1], self.ndim(), kOp);
  TB_CHECK(d0 != d1, ValueError) << kOp
                                 << ": expected rotation dims to be different, but got dim0 = "
                                 << d0 << " and dim1 = " << d1;
  static const OpRef flip("aten::flip");
  k = ((k % 4) + 4) % 4;
  switch (k) {
    case 1: return flip(self, std::vector<int64_t>{d1}).tensor().transpose(d0, d1).contiguous();
    case 2: return flip(self, std::vector<int64_t>{d0, d1}).tensor();
    case 3: return flip(self, std::vector<int64_t>{d0}).tensor().transpose(d0, d1).contiguous();
    default: return self.clone();
  }
}

Tensor DiagEmbed(const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
  constexpr const char* kOp = "aten::diag_embed";
  kernels::CheckHost(kOp, self);
  TB_CHECK(self.ndim() >= 1, ValueError) << kOp << ": input must have at least 1 dimension";
  const int64_t nd = self.ndim() + 1;
  dim1 = WrapDim(dim1, nd, kOp);
  dim2 = WrapDim(dim2, nd, kOp);
  TB_CHECK(dim1 != dim2, ValueError)
      << kOp << ": diagonal dimensions cannot be identical " << dim1 << ", " << dim2;
  const int64_t n = self.size(-1) + std::abs(offset);
  std::vector<int64_t> shape(self.shape().begin(), self.shape().end() - 1);
  const int64_t lo = std::min(dim1, dim2), hi = std::max(dim1, dim2);
  shape.insert(shape.begin() + lo, n);
  shape.insert(shape.begin() + hi, n);
  Tensor out = Tensor::Zeros(shape, self.dtype());
  if (out.numel() > 0) CopyCast(out.diagonal(offset, dim1, dim2), self);
  return out;
}

Tensor Trace(const Tensor& self) {
  constexpr const char* kOp = "aten::trace";
  kernels::CheckHost(kOp, self);
  TB_CHECK(self.ndim() == 2, ValueError)
      << kOp << ": expected a matrix, but got tensor with dim " << self.ndim();
  static const OpRef sum("aten::sum");
  return sum(self.diagonal(0, 0, 1)).tensor();
}

Tensor BlockDiag(const std::vector<Tensor>& tensors) {
  constexpr const char* kOp = "aten::block_diag";
  if (tensors.empty()) return Tensor::Empty({1, 0}, DType::kFloat32);
  DType dt = tensors[0].dtype();
  int64_t rows = 0, cols = 0;
  std::vector<Tensor> mats;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    kernels::CheckHost(kOp, t);
    TB_CHECK(t.ndim() <= 2, ValueError)
        << kOp << ": Input tensors must have 2 or fewer dimensions. Input " << i << " has "
        << t.ndim() << " dimensions";
    dt = PromoteTypes(dt, t.dtype());
    Tensor m = t.ndim() == 0 ? t.reshape({1, 1}) : t.ndim() == 1 ? t.unsqueeze(0) : t;
    rows += m.size(0);
    cols += m.size(1);
    mats.push_back(m);
  }
  Tensor out = Tensor::Zeros({rows, cols}, dt);
  int64_t r = 0, c = 0;
  for (const Tensor& m : mats) {
    const int64_t h = m.size(0), w = m.size(1);
    if (h * w > 0) CopyCast(out.slice(0, r, r + h).slice(1, c, c + w), m);
    r += h;
    c += w;
  }
  return out;
}

Tensor PixelShuffle(const Tensor& self, int64_t r) {
  constexpr const char* kOp = "aten::pixel_shuffle";
  kernels::CheckHost(kOp, self);
  TB_CHECK(self.ndim() >= 3, ValueError)
      << kOp << ": pixel_shuffle expects input to have at least 3 dimensions, but got input with "
      << self.ndim() << " dimension(s)";
  TB_CHECK(r > 0, ValueError) << kOp << ": upscale_factor must be greater than 0, got " << r;
  const int64_t c = self.size(-3), h = self.size(-2), w = self.size(-1);
  // r * r in range (3037000499 squared is below 2^63), else no channel count divides by it.
  TB_CHECK(r <= 3037000499 && c % (r * r) == 0, ValueError)
      << kOp << ": pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
      << "square of upscale_factor, but input.size(-3)=" << c << " is not divisible by " << r
      << "^2";
  const int64_t nb = self.ndim() - 3;
  std::vector<int64_t> batch(self.shape().begin(), self.shape().begin() + nb);
  std::vector<int64_t> split = batch;
  for (int64_t v : {c / (r * r), r, r, h, w}) split.push_back(v);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < nb; ++i) perm.push_back(i);
  for (int64_t i : {0, 3, 1, 4, 2}) perm.push_back(nb + i);
  std::vector<int64_t> out_shape = batch;
  for (int64_t v : {c / (r * r), h * r, w * r}) out_shape.push_back(v);
  return self.reshape(split).permute(perm).contiguous().view(out_shape);
}

Tensor PixelUnshuffle(const Tensor& self, int64_t r) {
  constexpr const char* kOp = "aten::pixel_unshuffle";
  kernels::CheckHost(kOp, self);
  TB_CHECK(self.ndim() >= 3, ValueError)
      << kOp << ": pixel_unshuffle expects input to have at least 3 dimensions, but got input "
      << "with " << self.ndim() << " dimension(s)";
  TB_CHECK(r > 0, ValueError) << kOp << ": downscale_factor must be greater than 0, got " << r;
  const int64_t c = self.size(-3), h = self.size(-2), w = self.size(-1);
  TB_CHECK(h % r == 0 && w % r == 0, ValueError)
      << kOp << ": pixel_unshuffle expects height and width to be divisible by downscale_factor, "
      << "but got " << h << "x" << w << " and " << r;
  const int64_t nb = self.ndim() - 3;
  std::vector<int64_t> batch(self.shape().begin(), self.shape().begin() + nb);
  std::vector<int64_t> split = batch;
  for (int64_t v : {c, h / r, r, w / r, r}) split.push_back(v);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < nb; ++i) perm.push_back(i);
  for (int64_t i : {0, 2, 4, 1, 3}) perm.push_back(nb + i);
  std::vector<int64_t> out_shape = batch;
  for (int64_t v : {c * r * r, h / r, w / r}) out_shape.push_back(v);
  return self.reshape(split).permute(perm).contiguous().view(out_shape);
}

Tensor ChannelShuffle(const Tensor& self, int64_t groups) {
  constexpr const char* kOp = "aten::channel_shuffle";
  kernels::CheckHost(kOp, self);
  TB_CHECK(self.ndim() > 2, ValueError)
      << kOp << ": channel_shuffle expects input to have at least 3 dimensions, but got input "
      << "with " << self.ndim() << " dimension(s)";
  TB_CHECK(groups > 0, ValueError) << kOp << ": Number of groups to divide channels in must be "
                                   << "positive. Value of groups:" << groups;
  const int64_t c = self.size(1);
  TB_CHECK(c % groups == 0, ValueError)
      << kOp << ": Number of channels must be divisible by groups. Got " << c << " channels and "
      << groups << " groups.";
  std::vector<int64_t> split{self.size(0), groups, c / groups};
  for (int64_t d = 2; d < self.ndim(); ++d) split.push_back(self.size(d));
  return self.reshape(split).transpose(1, 2).contiguous().view(self.shape());
}

}  // namespace

TB_REGISTER_KERNELS(view_copies) {
  const DeviceType cpu = DeviceType::kCPU;
  static const char* const kViews[][2] = {
      {"aten::view_copy", "aten::view"},
      {"aten::permute_copy", "aten::permute"},
      {"aten::expand_copy", "aten::expand"},
      {"aten::unsqueeze_copy", "aten::unsqueeze"},
      {"aten::transpose_copy.int", "aten::transpose.int"},
      {"aten::squeeze_copy", "aten::squeeze"},
      {"aten::squeeze_copy.dim", "aten::squeeze.dim"},
      {"aten::squeeze_copy.dims", "aten::squeeze.dims"},
      {"aten::unbind_copy.int", "aten::unbind.int"},
      {"aten::split_with_sizes_copy", "aten::split_with_sizes"},
      {"aten::split_copy.Tensor", "aten::split.Tensor"},
      {"aten::diagonal_copy", "aten::diagonal"},
      {"aten::unfold_copy", "aten::unfold"},
      {"aten::alias_copy", "aten::alias"},
      {"aten::t_copy", "aten::t"},
      {"aten::narrow_copy", "aten::narrow"},
      {"aten::as_strided_copy", "aten::as_strided"},
      {"aten::select_copy.int", "aten::select.int"},
      {"aten::slice_copy.Tensor", "aten::slice.Tensor"},
      {"aten::detach_copy", "aten::detach"},
  };
  for (const auto& v : kViews) table.RegisterKernel(v[0], cpu, CopyOfView(v[1]), TB_HERE);
  table.RegisterKernel("aten::diagonal_backward", cpu, Boxed<&DiagonalBackward>(), TB_HERE);
  table.RegisterKernel("aten::unfold_backward", cpu, Boxed<&UnfoldBackward>(), TB_HERE);
  table.RegisterKernel("aten::rot90", cpu, Boxed<&Rot90>(), TB_HERE);
  table.RegisterKernel("aten::diag_embed", cpu, Boxed<&DiagEmbed>(), TB_HERE);
  table.RegisterKernel("aten::trace", cpu, Boxed<&Trace>(), TB_HERE);
  table.RegisterKernel("aten::block_diag", cpu, Boxed<&BlockDiag>(), TB_HERE);
  table.RegisterKernel("aten::pixel_shuffle", cpu, Boxed<&PixelShuffle>(), TB_HERE);
  table.RegisterKernel("aten::pixel_unshuffle", cpu, Boxed<&PixelUnshuffle>(), TB_HERE);
  table.RegisterKernel("aten::channel_shuffle", cpu, Boxed<&ChannelShuffle>(), TB_HERE);
}

}  // namespace tb
