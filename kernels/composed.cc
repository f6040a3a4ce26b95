// ATen ops that torch computes as a sequence of other ATen ops, composed here the same way from
// the table's kernels (so results round as torch's do): aten::native_dropout_backward,
// aten::addbmm, aten::allclose, aten::_prelu_kernel, aten::_chunk_cat,
// aten::_batch_norm_with_update, aten::dist and aten::renorm. Each checks its arguments as torch
// does first, and calls the table through OpRef (the calls show in tb.metrics() under the ops they
// reach).
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"

namespace tb {
namespace {

// grad * mask * scale (torch's native_dropout_backward).
Tensor NativeDropoutBackward(const Tensor& grad, const Tensor& mask, double scale) {
  static const OpRef mul("aten::mul.Tensor");
  TB_CHECK(mask.dtype() == DType::kBool, TypeError)
      << "aten::native_dropout_backward: Mask should be Bool Scalar Type, got "
      << DTypeName(mask.dtype());
  return mul(mul(grad, mask).tensor(), scale).tensor();
}

// self expanded to (n, p), then addmm with each batch in turn: beta on the first product only,
// as torch's addbmm accumulates (beta * self when there are no batches).
Tensor Addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
              const Scalar& alpha) {
  constexpr const char* kOp = "aten::addbmm";
  static const OpRef addmm("aten::addmm"), mul("aten::mul.Tensor"), zeros("aten::zeros_like");
  TB_CHECK(batch1.ndim() == 3, ValueError) << kOp << ": batch1 must be a 3D tensor";
  TB_CHECK(batch2.ndim() == 3, ValueError) << kOp << ": batch2 must be a 3D tensor";
  TB_CHECK(batch1.size(0) == batch2.size(0), ValueError)
      << kOp << ": batch1 and batch2 must have same number of batches, got " << batch1.size(0)
      << " and " << batch2.size(0);
  TB_CHECK(batch1.size(2) == batch2.size(1), ValueError)
      << kOp << ": Incompatible matrix sizes for bmm (" << batch1.size(1) << "x" << batch1.size(2)
      << " and " << batch2.size(1) << "x" << batch2.size(2) << ")";
  const int64_t rows = batch1.size(1), cols = batch2.size(2);
  TB_CHECK(self.ndim() <= 2, ValueError) << kOp << ": self of shape " << ShapeString(self.shape())
                                         << " cannot expand to (" << rows << ", " << cols << ")";
  Tensor out = self.expand({rows, cols}).clone();
  if (batch1.size(0) == 0) {
    if (beta.to_double() != 0 || (beta.is_bool() && beta.to_int() != 0)) {
      return mul(out, Value(beta)).tensor();
    }
    return zeros(out).tensor();
  }
  Scalar b = beta;
  for (int64_t i = 0; i < batch1.size(0); ++i) {
    out = addmm
              .WithKeywords({out, batch1.select(0, i), batch2.select(0, i)},
                            {{"beta", Value(b)}, {"alpha", Value(alpha)}})
              .tensor();
    b = Scalar(int64_t{1});
  }
  return out;
}

// isclose(self, other, rtol, atol, equal_nan).all(), isclose composed as torch composes it:
// self == other, or (with equal_nan) both NaN, or a finite |self - other| <= atol + |rtol other|.
bool Allclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  constexpr const char* kOp = "aten::allclose";
  static const OpRef eq("aten::eq.Tensor"), isnan("aten::isnan"), band("aten::bitwise_and.Tensor"),
      bor("aten::bitwise_or.Tensor"), mul("aten::mul.Tensor"), abs("aten::abs"),
      add("aten::add.Tensor"), sub("aten::sub.Tensor"), isfinite("aten::isfinite"),
      le("aten::le.Tensor"), all("aten::all"), to("aten::_to_copy");
  TB_CHECK(self.dtype() == other.dtype(), TypeError)
      << kOp << ": " << DTypeName(self.dtype()) << " did not match " << DTypeName(other.dtype());
  TB_CHECK(rtol >= 0, ValueError) << kOp << ": rtol must be greater than or equal to zero, but got "
                                  << rtol;
  TB_CHECK(atol >= 0, ValueError) << kOp << ": atol must be greater than or equal to zero, but got "
                                  << atol;
  Tensor close = eq(self, other).tensor();
  const bool floating = IsFloatingPoint(self.dtype());
  if (equal_nan && floating) {
    close = bor(close, band(isnan(self).tensor(), isnan(other).tensor()).tensor()).tensor();
  }
  if (rtol != 0 || atol != 0) {
    // bool operands take the default float dtype, so that the difference is defined.
    auto cast = [&](const Tensor& t) {
      return t.dtype() == DType::kBool
                 ? to.WithKeywords({t}, {{"dtype", Value(DType::kFloat32)}}).tensor()
                 : t;
    };
    const Tensor s = cast(self), o = cast(other);
    const Tensor allowed = add(abs(mul(o, rtol).tensor()).tensor(), atol).tensor();
    const Tensor actual = abs(sub(s, o).tensor()).tensor();
    close =
        bor(close, band(isfinite(actual).tensor(), le(actual, allowed).tensor()).tensor()).tensor();
  }
  const Tensor r = all(close).tensor();
  return *r.data_as<const bool>();
}

// self > 0 ? self : weight * self, weight broadcast against self.
Tensor PreluKernel(const Tensor& self, const Tensor& weight) {
  constexpr const char* kOp = "aten::_prelu_kernel";
  static const OpRef gt("aten::gt.Scalar"), mul("aten::mul.Tensor"), where("aten::where.self");
  TB_CHECK_SUPPORTED(IsFloatingPoint(self.dtype()) && !IsComplex(self.dtype()))
      << kOp << ": not implemented for " << DTypeName(self.dtype())
      << " (torch's CPU prelu serves floating dtypes)";
  TB_CHECK(weight.dtype() == self.dtype(), TypeError)
      << kOp << ": weight of dtype " << DTypeName(weight.dtype()) << " does not match input of "
      << DTypeName(self.dtype());
  return where(gt(self, int64_t{0}).tensor(), self, mul(weight, self).tensor()).tensor();
}

// Each tensor zero-padded along `dim` to a multiple of num_chunks, viewed as
// (sizes before dim, num_chunks, rest), and the views concatenated along dim + 1.
Tensor ChunkCat(const std::vector<Tensor>& tensors, int64_t dim, int64_t num_chunks) {
  constexpr const char* kOp = "aten::_chunk_cat";
  static const OpRef pad("aten::constant_pad_nd"), cat("aten::cat");
  TB_CHECK(!tensors.empty(), ValueError) << kOp << ": expects a non-empty input tensor list";
  TB_CHECK(num_chunks >= 1, ValueError) << kOp << ": expects positive num_chunks";
  const Tensor& first = tensors[0];
  TB_CHECK(first.ndim() > 0, ValueError) << kOp << ": expects tensors of at least one dimension";
  dim = WrapDim(dim, first.ndim(), kOp);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    TB_CHECK(t.dtype() == first.dtype(), TypeError)
        << kOp << ": expects all input tensors with the same dtype, got "
        << DTypeName(first.dtype()) << " and " << DTypeName(t.dtype());
    TB_CHECK(t.numel() > 0, ValueError) << kOp << ": expects non-empty tensors";
    TB_CHECK(t.ndim() > dim, ValueError)
        << kOp << ": tensor of shape " << ShapeString(t.shape()) << " has no dimension " << dim;
    for (int64_t d = 0; d < dim; ++d) {
      TB_CHECK(t.size(d) == first.size(d), ValueError)
          << kOp << ": expects same sizes of 0,...,dim-1 dimensions for all tensors, got "
          << ShapeString(first.shape()) << " and " << ShapeString(t.shape());
    }
    const int64_t n = t.size(dim), padded = (n + num_chunks - 1) / num_chunks * num_chunks;
    Tensor p = t;
    if (padded != n) {
      // constant_pad_nd's pairs run from the last dim: the end of `dim` is entry 2 (ndim-1-dim)+1.
      std::vector<int64_t> amounts(2 * (t.ndim() - dim), 0);
      amounts.back() = padded - n;
      p = pad(t, amounts).tensor();
    }
    Dims shape;
    for (int64_t d = 0; d < dim; ++d) shape.push_back(t.size(d));
    shape.push_back(num_chunks);
    shape.push_back(-1);
    parts.push_back(p.reshape(shape));
  }
  return cat(parts, dim + 1).tensor();
}

// linalg_vector_norm(self - other, p) (torch's dist: at::norm of the difference).
Tensor Dist(const Tensor& self, const Tensor& other, const Scalar& p) {
  static const OpRef sub("aten::sub.Tensor"), norm("aten::linalg_vector_norm");
  return norm(sub(self, other).tensor(), Value(p)).tensor();
}

// Each slice along `dim` scaled to p-norm maxnorm where its norm exceeds it: the norms in the
// accumulation type (float for 16-bit inputs), the factor maxnorm / (norm + 1e-7) (else 1) in
// that type, cast to self's dtype, then self * factor (torch's renorm).
Tensor Renorm(const Tensor& self, const Scalar& p, int64_t dim, const Scalar& maxnorm) {
  constexpr const char* kOp = "aten::renorm";
  static const OpRef norm("aten::linalg_vector_norm"), mul("aten::mul.Tensor"),
      to("aten::_to_copy");
  TB_CHECK(p.to_double() > 0.0, ValueError) << kOp << ": non-positive-norm not supported";
  TB_CHECK(maxnorm.to_double() >= 0.0, ValueError)
      << kOp << ": expected maxnorm to be >= 0 but got " << maxnorm.to_double();
  TB_CHECK(self.ndim() > 1, ValueError)
      << kOp << ": input needs at least 2 dimensions, got " << self.ndim() << " dimensions";
  TB_CHECK_SUPPORTED(IsFloatingPoint(self.dtype()) || IsComplex(self.dtype()))
      << kOp << ": not implemented for " << DTypeName(self.dtype());
  dim = WrapDim(dim, self.ndim(), kOp);
  std::vector<int64_t> reduce;
  for (int64_t d = 0; d < self.ndim(); ++d) {
    if (d != dim) reduce.push_back(d);
  }
  // Complex input: the norms are real (float32 for complex64), the factor a real one.
  const bool wide = self.dtype() == DType::kFloat64 || self.dtype() == DType::kComplex128;
  const DType acc = wide ? DType::kFloat64 : DType::kFloat32;
  std::vector<std::pair<std::string, Value>> kw = {{"keepdim", Value(true)}};
  if (acc != self.dtype() && !IsComplex(self.dtype())) kw.emplace_back("dtype", Value(acc));
  Tensor n = norm.WithKeywords({self, Value(p), Value(reduce)}, kw).tensor().contiguous();
  Tensor factor = Tensor::Empty(n.shape(), acc);
  auto scale = [&](auto zero) {
    using T = decltype(zero);
    const T m = static_cast<T>(maxnorm.to_double()), eps = static_cast<T>(1e-7);
    const T* in = n.data_as<const T>();
    T* out = factor.data_as<T>();
    for (int64_t i = 0; i < n.numel(); ++i) out[i] = in[i] > m ? m / (in[i] + eps) : T(1);
  };
  acc == DType::kFloat64 ? scale(double{}) : scale(float{});
  if (acc != self.dtype()) {
    factor = to.WithKeywords({factor}, {{"dtype", Value(self.dtype())}}).tensor();
  }
  return mul(self, factor).tensor();
}

// Batch norm in training mode through native_batch_norm (running statistics updated in place),
// and the empty uint8 reserve torch's CPU kernel returns.
std::tuple<Tensor, Tensor, Tensor, Tensor> BatchNormWithUpdate(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  static const OpRef bn("aten::native_batch_norm");
  OpResult r = bn(input, weight, bias, running_mean, running_var, true, momentum, eps);
  return {r.tensor(0), r.tensor(1), r.tensor(2), Tensor::Empty({0}, DType::kUInt8)};
}

}  // namespace

TB_REGISTER_KERNELS(composed) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::native_dropout_backward", cpu, Boxed<&NativeDropoutBackward>(),
                       TB_HERE);
  table.RegisterKernel("aten::addbmm", cpu, Boxed<&Addbmm>(), TB_HERE);
  table.RegisterKernel("aten::allclose", cpu, Boxed<&Allclose>(), TB_HERE);
  table.RegisterKernel("aten::_prelu_kernel", cpu, Boxed<&PreluKernel>(), TB_HERE);
  table.RegisterKernel("aten::_chunk_cat", cpu, Boxed<&ChunkCat>(), TB_HERE);
  table.RegisterKernel("aten::_batch_norm_with_update", cpu, Boxed<&BatchNormWithUpdate>(),
                       TB_HERE);
  table.RegisterKernel("aten::dist", cpu, Boxed<&Dist>(), TB_HERE);
  table.RegisterKernel("aten::renorm", cpu, Boxed<&Renorm>(), TB_HERE);
}

}  // namespace tb
