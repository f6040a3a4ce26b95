// Matrix products: aten::mm, addmm, bmm, baddbmm, mv, addmv, dot, vdot.
//
// Every product runs through BatchedGemm (out[b] = alpha * a[b] @ b[b] + beta * out[b]):
// float32 with few rows or a short inner dimension on the small-product kernels
// (kernels::SmallGemm), other float32 and bfloat16 on oneDNN's matmul primitive (alpha as an output
// scale, beta as a sum post-op), float16 as float32 on oneDNN, float64 and the integer types on
// Eigen.
#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <string_view>
#include <tuple>

#include <Eigen/Core>

#include "dispatch/op_table.h"
#include "kernels/complex_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/linear_internal.h"
#include "kernels/loops_internal.h"
#include "kernels/onednn/onednn_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::Convert;

// ---- argument checks ---------------------------------------------------------------------

void CheckDims(const char* op, const char* arg, const Tensor& t, int64_t ndim) {
  TB_CHECK(t.ndim() == ndim, ValueError) << op << ": expected " << arg << " to be a " << ndim
                                         << "-D tensor, got shape " << ShapeString(t.shape());
}

void CheckSameDType(const char* op, const Tensor& a, const Tensor& b) {
  TB_CHECK(a.dtype() == b.dtype(), TypeError)
      << op << ": expected both tensors to have the same dtype, got " << DTypeName(a.dtype())
      << " and " << DTypeName(b.dtype());
}

void CheckComputable(const char* op, DType t) {
  TB_CHECK_SUPPORTED(t != DType::kBool && !IsStorageOnly(t) && t != DType::kUInt16 &&
                     t != DType::kUInt32 && t != DType::kUInt64)
      << op << ": dtype " << DTypeName(t) << " is not supported";
}

// ---- oneDNN path --------------------------------------------------------------------------

// A 3-D operand oneDNN's matmul takes as it is: row- or column-major matrices, any batch
// stride. Returns the strides to describe it with (size-1 dims given consistent strides),
// or false when it needs a contiguous copy.
bool MatmulStrides(const Tensor& t, dnnl::memory::dims* strides) {
  const int64_t b = t.size(0), r = t.size(1), c = t.size(2);
  const int64_t s0 = t.stride(0), s1 = t.stride(1), s2 = t.stride(2);
  if (s0 < 0 || s1 < 0 || s2 < 0) return false;
  const bool row = (c == 1 || s2 == 1) && (r == 1 || s1 >= c);
  const bool col = (r == 1 || s1 == 1) && (c == 1 || s2 >= r);
  int64_t ld1, ld2, extent;
  if (row) {
    ld2 = 1;
    ld1 = r == 1 ? c : s1;
    extent = ld1 * r;
  } else if (col) {
    ld1 = 1;
    ld2 = c == 1 ? r : s2;
    extent = ld2 * c;
  } else {
    return false;
  }
  if (b > 1 && s0 < extent) return false;  // overlapping or broadcast batches
  *strides = {b == 1 ? extent : s0, ld1, ld2};
  return true;
}

void OneDnnGemm(const char* op, const Tensor& out, Tensor a, Tensor b, double alpha, double beta) {
  auto dt = onednn::DataType(out.dtype(), op);
  dnnl::memory::dims as, bs;
  if (!MatmulStrides(a, &as)) {
    a = a.contiguous();
    MatmulStrides(a, &as);
  }
  if (!MatmulStrides(b, &bs)) {
    b = b.contiguous();
    MatmulStrides(b, &bs);
  }
  dnnl::memory::dims ad(a.shape().begin(), a.shape().end());
  dnnl::memory::dims bd(b.shape().begin(), b.shape().end());
  dnnl::memory::dims cd(out.shape().begin(), out.shape().end());
  dnnl::memory::desc a_md(ad, dt, as), b_md(bd, dt, bs), c_md = onednn::PlainDesc(cd, dt);
  std::string key = onednn::Key("matmul", static_cast<int>(dt), ad, as, bd, bs, alpha, beta);
  onednn::Guard(op, [&] {
    auto prim = onednn::Cached(key, [&] {
      dnnl::primitive_attr attr = onednn::Attr();
      if (alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(alpha)});
      if (beta != 0.0) {
        dnnl::post_ops po;
        po.append_sum(static_cast<float>(beta));
        attr.set_post_ops(po);
      }
      dnnl::matmul::desc desc(a_md, b_md, c_md);
      return dnnl::primitive(
          dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, onednn::Engine())));
    });
    auto am = onednn::Wrap(a_md, a.data()), bm = onednn::Wrap(b_md, b.data());
    auto cm = onednn::Wrap(c_md, out.data());
    onednn::Execute(prim, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  });
}

// ---- Eigen path ---------------------------------------------------------------------------

template <typename T>
void EigenGemm(const Tensor& out, Tensor a, Tensor b, double alpha, double beta) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Str = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  auto positive = [](const Tensor& t) {
    for (int64_t d = 0; d < t.ndim(); ++d) {
      if (t.size(d) > 1 && t.stride(d) <= 0) return false;
    }
    return true;
  };
  if (!positive(a)) a = a.contiguous();
  if (!positive(b)) b = b.contiguous();
  const int64_t nb = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  const T ta = static_cast<T>(alpha), tb = static_cast<T>(beta);
  auto one = [&](int64_t i) {
    const T* pa = a.data_as<const T>() + i * a.stride(0);
    const T* pb = b.data_as<const T>() + i * b.stride(0);
    T* pc = static_cast<T*>(out.mutable_data()) + i * m * n;
    Eigen::Map<const Mat, 0, Str> A(pa, m, k, Str(a.stride(1), a.stride(2)));
    Eigen::Map<const Mat, 0, Str> B(pb, k, n, Str(b.stride(1), b.stride(2)));
    Eigen::Map<Mat> C(pc, m, n);
    if (beta == 0.0) {
      if (alpha == 1.0) {
        C.noalias() = A * B;
      } else {
        C.noalias() = (A * B) * ta;
      }
    } else {
      if (beta != 1.0) C *= tb;
      if (alpha == 1.0) {
        C.noalias() += A * B;
      } else {
        C.noalias() += (A * B) * ta;
      }
    }
  };
  // Small matrices in a batch: one matrix per thread; otherwise Eigen threads each product.
  if (nb > 1 && m * n * k < (1 << 18)) {
#pragma omp parallel for schedule(static) if (nb * m * n * k > (1 << 16))
    for (int64_t i = 0; i < nb; ++i) one(i);
  } else {
    for (int64_t i = 0; i < nb; ++i) one(i);
  }
}

// torch's own path for small batched products (k * m * n < 400): a plain loop accumulating in
// opmath order by order, so that bmm / baddbmm on small matrices round exactly as torch does.
constexpr int64_t kSmallBmm = 400;

void SmallBatchedGemm(const char* op, const Tensor& out, const Tensor& a, const Tensor& b,
                      double alpha, double beta) {
  if (IsComplex(out.dtype())) return kernels::complex::Gemm(op, out, a, b, alpha, beta);
  const int64_t nb = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  TB_DISPATCH(out.dtype(), op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const Acc ta = static_cast<Acc>(alpha), tbeta = static_cast<Acc>(beta);
    const T* pa = a.data_as<const T>();
    const T* pb = b.data_as<const T>();
    T* pc = static_cast<T*>(out.mutable_data());
    const int64_t a0 = a.stride(0), a1 = a.stride(1), a2 = a.stride(2);
    const int64_t b0 = b.stride(0), b1 = b.stride(1), b2 = b.stride(2);
    for (int64_t bi = 0; bi < nb; ++bi) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          Acc acc = 0;
          for (int64_t x = 0; x < k; ++x) {
            acc += Convert<Acc>(pa[bi * a0 + i * a1 + x * a2]) *
                   Convert<Acc>(pb[bi * b0 + x * b1 + j * b2]);
          }
          T& r = pc[(bi * m + i) * n + j];
          if (beta == 0.0) {
            r = Convert<T>(alpha == 1.0 ? acc : static_cast<Acc>(ta * acc));
          } else {
            r = Convert<T>(static_cast<Acc>(Convert<Acc>(r) * tbeta + ta * acc));
          }
        }
      }
    }
  });
}

// out (C-contiguous [B, m, n]) = alpha * a @ b + beta * out. `a` is [B, m, k], `b` [B, k, n].
void BatchedGemm(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha,
                 double beta) {
  const DType dt = out.dtype();
  if (IsComplex(dt)) return kernels::complex::Gemm(op, out, a, b, alpha, beta);
  if (out.numel() == 0) return;
  if (a.size(2) == 0 || alpha == 0.0) {  // the product adds nothing
    TB_DISPATCH(dt, op, TB_TYPES_NUMERIC, [&] {
      using T = scalar_t;
      using Acc = kernels::opmath_t<T>;
      if (beta == 0.0) {
        kernels::Map<T>(out, [] { return T(0); });
      } else if (beta != 1.0) {
        const Acc kb = static_cast<Acc>(beta);
        kernels::Map<T, T>(
            out, [kb](T v) { return Convert<T>(static_cast<Acc>(Convert<Acc>(v) * kb)); }, out);
      }
    });
    return;
  }
  if (dt == DType::kFloat32) {
    Tensor o = out;
    if (kernels::SmallGemm(a, b, nullptr, alpha, beta, &o)) return;
  }
  if (dt == DType::kFloat32 || dt == DType::kBFloat16) {
    try {
      OneDnnGemm(op, out, a, b, alpha, beta);
      return;
    } catch (const Error&) {
      if (dt == DType::kFloat32) throw;
      // bfloat16 without oneDNN support on this CPU: float32 below.
    }
  }
  if (dt == DType::kFloat16 || dt == DType::kBFloat16) {
    Tensor o32 = Cast(out, DType::kFloat32);
    if (o32.data() == out.data()) o32 = o32.clone();
    OneDnnGemm(op, o32, Cast(a, DType::kFloat32), Cast(b, DType::kFloat32), alpha, beta);
    CopyCast(out, o32);
    return;
  }
  TB_DISPATCH(dt, op, TB_TYPES_NUMERIC, [&] {
    if constexpr (!kernels::kIsReducedFloat<scalar_t>) {
      EigenGemm<scalar_t>(out, a, b, alpha, beta);
    }
  });
}

// alpha / beta as the kernel uses them: integer dtypes truncate a float (as torch's
// Scalar::to<int64_t>() does).
double ScalarValue(const Scalar& s, DType dt) {
  if (IsFloatingPoint(dt) || IsComplex(dt)) return s.to_double();
  return static_cast<double>(s.to_int());
}

// out = beta * self (broadcast to `shape`) when beta != 0; uninitialised otherwise.
Tensor OutWithSelf(const char* op, const Tensor& self, const Dims& shape, double beta) {
  Tensor out = Tensor::Empty(shape, self.dtype());
  if (beta != 0.0 && out.numel() > 0) {
    Dims b = BroadcastShapes({self.shape(), IntArrayRef(shape)}, op);
    TB_CHECK(b.ref() == shape.ref(), ValueError)
        << op << ": self of shape " << ShapeString(self.shape()) << " does not broadcast to "
        << ShapeString(shape);
    out.copy_from(self.expand(shape));
  }
  return out;
}

// ---- ops ----------------------------------------------------------------------------------

void CheckMm(const char* op, const Tensor& a, const Tensor& b) {
  CheckDims(op, "self", a, 2);
  CheckDims(op, "mat2", b, 2);
  CheckSameDType(op, a, b);
  CheckComputable(op, a.dtype());
  TB_CHECK(a.size(1) == b.size(0), ValueError)
      << op << ": shapes " << ShapeString(a.shape()) << " and " << ShapeString(b.shape())
      << " cannot be multiplied (" << a.size(1) << " != " << b.size(0) << ")";
}

// out = a @ b for k = 1 (an outer product, as weight gradients at batch 1 are) on small
// results, where a oneDNN call costs more than the products: each element is one product,
// exactly what a GEMM computes, written row by row.
template <typename T>
void OuterProduct(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t m = out.size(0), n = out.size(1), sa = a.stride(0), sb = b.stride(1);
  const T* pa = a.data_as<const T>();
  const T* pb = b.data_as<const T>();
  T* po = static_cast<T*>(out.mutable_data());
  for (int64_t i = 0; i < m; ++i) {
    const T ai = pa[i * sa];
    T* __restrict row = po + i * n;
    if (sb == 1) {
      for (int64_t j = 0; j < n; ++j) row[j] = ai * pb[j];
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] = ai * pb[j * sb];
    }
  }
}

Tensor Mm(const Tensor& self, const Tensor& mat2) {
  constexpr const char* kOp = "aten::mm";
  CheckMm(kOp, self, mat2);
  if (self.size(1) == 1 && self.size(0) * mat2.size(1) <= 16384 &&
      (self.dtype() == DType::kFloat32 || self.dtype() == DType::kFloat64)) {
    Tensor out = Tensor::Empty({self.size(0), mat2.size(1)}, self.dtype());
    if (self.dtype() == DType::kFloat32) {
      OuterProduct<float>(out, self, mat2);
    } else {
      OuterProduct<double>(out, self, mat2);
    }
    return out;
  }
  // Tiny products (k * m * n < 400) take the plain loop: a oneDNN call (inner product or
  // gemm) costs more than the product itself there.
  const bool tiny = self.size(1) > 0 && self.size(1) * self.size(0) * mat2.size(1) < kSmallBmm;
  // A few rows times a transposed row-major weight (linear layers at small batch): the
  // small-product kernels, else the inner product, read the weight as stored.
  if (!tiny && self.dtype() == DType::kFloat32 && self.size(0) <= kernels::kInnerProductRows) {
    Tensor out;
    if (kernels::SmallGemm(self, mat2, nullptr, 1.0, 0.0, &out) ||
        kernels::OneDnnInnerProduct(kOp, nullptr, self, mat2, kernels::LinearAct::kNone, &out)) {
      return out;
    }
  }
  Tensor out = Tensor::Empty({self.size(0), mat2.size(1)}, self.dtype());
  if (tiny) {
    SmallBatchedGemm(kOp, out.unsqueeze(0), self.unsqueeze(0), mat2.unsqueeze(0), 1.0, 0.0);
  } else {
    BatchedGemm(kOp, out.unsqueeze(0), self.unsqueeze(0), mat2.unsqueeze(0), 1.0, 0.0);
  }
  return out;
}

Tensor Addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
             const Scalar& alpha) {
  constexpr const char* kOp = "aten::addmm";
  CheckMm(kOp, mat1, mat2);
  CheckSameDType(kOp, self, mat1);
  if (IsComplex(self.dtype())) {
    const std::complex<double> a = alpha.to_complex(), b = beta.to_complex();
    Tensor out = OutWithSelf(kOp, self, {mat1.size(0), mat2.size(1)}, b != 0.0 ? 1.0 : 0.0);
    kernels::complex::Gemm(kOp, out.unsqueeze(0), mat1.unsqueeze(0), mat2.unsqueeze(0), a, b);
    return out;
  }
  const double b = ScalarValue(beta, self.dtype());
  const double a = ScalarValue(alpha, self.dtype());
  // float32 linear layers (a bias vector, beta = alpha = 1): the bias is oneDNN's bias
  // argument, not a copy into the output plus a sum post-op.
  const bool bias_vector = (self.ndim() == 1 || (self.ndim() == 2 && self.size(0) == 1)) &&
                           self.size(self.ndim() - 1) == mat2.size(1);
  if (self.dtype() == DType::kFloat32 && mat1.dtype() == DType::kFloat32 && bias_vector &&
      a == 1.0 && b == 1.0) {
    Tensor out;
    if (kernels::SmallGemm(mat1, mat2, &self, 1.0, 0.0, &out)) return out;
    if (mat1.size(0) <= kernels::kInnerProductRows &&
        kernels::OneDnnInnerProduct(kOp, &self, mat1, mat2, kernels::LinearAct::kNone, &out)) {
      return out;
    }
    if (kernels::OneDnnLinear(kOp, self, mat1, mat2, kernels::LinearAct::kNone, &out)) return out;
  }
  Tensor out = OutWithSelf(kOp, self, {mat1.size(0), mat2.size(1)}, b);
  BatchedGemm(kOp, out.unsqueeze(0), mat1.unsqueeze(0), mat2.unsqueeze(0), a, b);
  return out;
}

void CheckBmm(const char* op, const Tensor& a, const Tensor& b) {
  CheckDims(op, "batch1", a, 3);
  CheckDims(op, "batch2", b, 3);
  CheckSameDType(op, a, b);
  CheckComputable(op, a.dtype());
  TB_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), ValueError)
      << op << ": shapes " << ShapeString(a.shape()) << " and " << ShapeString(b.shape())
      << " cannot be batch-multiplied";
}

Tensor Bmm(const Tensor& self, const Tensor& mat2) {
  constexpr const char* kOp = "aten::bmm";
  CheckBmm(kOp, self, mat2);
  Tensor out = Tensor::Empty({self.size(0), self.size(1), mat2.size(2)}, self.dtype());
  if (self.size(2) > 0 && self.size(2) * self.size(1) * mat2.size(2) < kSmallBmm) {
    if (IsComplex(out.dtype())) {
      kernels::complex::SmallGemm(out, self, mat2, 1.0, 0.0, /*plain=*/true);
      return out;
    }
    SmallBatchedGemm(kOp, out, self, mat2, 1.0, 0.0);
  } else {
    BatchedGemm(kOp, out, self, mat2, 1.0, 0.0);
  }
  return out;
}

Tensor Baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  constexpr const char* kOp = "aten::baddbmm";
  CheckBmm(kOp, batch1, batch2);
  CheckSameDType(kOp, self, batch1);
  if (IsComplex(self.dtype())) {
    const std::complex<double> a = alpha.to_complex(), b = beta.to_complex();
    Tensor out = OutWithSelf(kOp, self, {batch1.size(0), batch1.size(1), batch2.size(2)},
                             b != 0.0 ? 1.0 : 0.0);
    if (batch1.size(2) > 0 && batch1.size(2) * batch1.size(1) * batch2.size(2) < kSmallBmm) {
      kernels::complex::SmallGemm(out, batch1, batch2, a, b, /*plain=*/false);
    } else {
      kernels::complex::Gemm(kOp, out, batch1, batch2, a, b);
    }
    return out;
  }
  const double b = ScalarValue(beta, self.dtype());
  const double a = ScalarValue(alpha, self.dtype());
  Tensor out = OutWithSelf(kOp, self, {batch1.size(0), batch1.size(1), batch2.size(2)}, b);
  if (batch1.size(2) > 0 && batch1.size(2) * batch1.size(1) * batch2.size(2) < kSmallBmm) {
    SmallBatchedGemm(kOp, out, batch1, batch2, a, b);
  } else {
    BatchedGemm(kOp, out, batch1, batch2, a, b);
  }
  return out;
}

void CheckMv(const char* op, const Tensor& mat, const Tensor& vec) {
  CheckDims(op, "mat", mat, 2);
  CheckDims(op, "vec", vec, 1);
  CheckSameDType(op, mat, vec);
  CheckComputable(op, mat.dtype());
  TB_CHECK(mat.size(1) == vec.size(0), ValueError)
      << op << ": size mismatch, mat " << ShapeString(mat.shape()) << ", vec "
      << ShapeString(vec.shape());
}

Tensor Addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta,
             const Scalar& alpha) {
  constexpr const char* kOp = "aten::addmv";
  CheckMv(kOp, mat, vec);
  CheckSameDType(kOp, self, mat);
  if (IsComplex(self.dtype())) {
    const std::complex<double> a = alpha.to_complex(), b = beta.to_complex();
    Tensor out = OutWithSelf(kOp, self, {mat.size(0)}, b != 0.0 ? 1.0 : 0.0);
    kernels::complex::Gemm(kOp, out.unsqueeze(0).unsqueeze(2), mat.unsqueeze(0),
                           vec.unsqueeze(1).unsqueeze(0), a, b);
    return out;
  }
  const double b = ScalarValue(beta, self.dtype());
  const double a = ScalarValue(alpha, self.dtype());
  Tensor out = OutWithSelf(kOp, self, {mat.size(0)}, b);
  BatchedGemm(kOp, out.unsqueeze(0).unsqueeze(2), mat.unsqueeze(0), vec.unsqueeze(1).unsqueeze(0),
              a, b);
  return out;
}

Tensor Mv(const Tensor& self, const Tensor& vec) {
  constexpr const char* kOp = "aten::mv";
  CheckMv(kOp, self, vec);
  Tensor out = Tensor::Empty({self.size(0)}, self.dtype());
  BatchedGemm(kOp, out.unsqueeze(0).unsqueeze(2), self.unsqueeze(0), vec.unsqueeze(1).unsqueeze(0),
              1.0, 0.0);
  return out;
}

// dot, and vdot (which conjugates self: the same for the real dtypes).
Tensor DotImpl(const char* op, const Tensor& self, const Tensor& tensor) {
  CheckDims(op, "self", self, 1);
  CheckDims(op, "tensor", tensor, 1);
  CheckSameDType(op, self, tensor);
  CheckComputable(op, self.dtype());
  TB_CHECK(self.size(0) == tensor.size(0), ValueError)
      << op << ": inconsistent tensor size, expected tensors of the same size, got " << self.size(0)
      << " and " << tensor.size(0);
  if (IsComplex(self.dtype())) {
    return kernels::complex::Dot(op, self, tensor, std::string_view(op) == "aten::vdot");
  }
  Tensor out = Tensor::Empty({}, self.dtype());
  const int64_t n = self.size(0), sa = self.stride(0), sb = tensor.stride(0);
  TB_DISPATCH(self.dtype(), op, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    // Floating types accumulate in double, integers in their own type (wrapping as torch).
    using Acc = std::conditional_t<kernels::kIsFloating<T>, double, T>;
    const T* x = self.data_as<const T>();
    const T* y = tensor.data_as<const T>();
    Acc acc = 0;
    for (int64_t i = 0; i < n; ++i) {
      acc += Convert<Acc>(x[i * sa]) * Convert<Acc>(y[i * sb]);
    }
    *static_cast<T*>(out.mutable_data()) = Convert<T>(acc);
  });
  return out;
}
Tensor Dot(const Tensor& self, const Tensor& tensor) { return DotImpl("aten::dot", self, tensor); }
Tensor Vdot(const Tensor& self, const Tensor& other) { return DotImpl("aten::vdot", self, other); }

}  // namespace

TB_REGISTER_KERNELS(matmul) {
  table.RegisterKernel("aten::mm", DeviceType::kCPU, Boxed<&Mm>(), TB_HERE);
  table.RegisterKernel("aten::addmm", DeviceType::kCPU, Boxed<&Addmm>(), TB_HERE);
  table.RegisterKernel("aten::bmm", DeviceType::kCPU, Boxed<&Bmm>(), TB_HERE);
  table.RegisterKernel("aten::baddbmm", DeviceType::kCPU, Boxed<&Baddbmm>(), TB_HERE);
  table.RegisterKernel("aten::mv", DeviceType::kCPU, Boxed<&Mv>(), TB_HERE);
  table.RegisterKernel("aten::addmv", DeviceType::kCPU, Boxed<&Addmv>(), TB_HERE);
  table.RegisterKernel("aten::dot", DeviceType::kCPU, Boxed<&Dot>(), TB_HERE);
  table.RegisterKernel("aten::vdot", DeviceType::kCPU, Boxed<&Vdot>(), TB_HERE);
}

}  // namespace tb
