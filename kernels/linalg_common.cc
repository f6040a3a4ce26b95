// The checks and batch helpers of kernels/linalg_internal.h, aten::_linalg_check_errors and
// aten::linalg_cross.
#include <algorithm>
#include <complex>
#include <cstring>
#include <string>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/linalg_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb::kernels::linalg {

void CheckMatrix(const Tensor& a, const char* op, bool square, const char* arg) {
  TB_CHECK(a.device().is_host_accessible(), NotImplementedError)
      << op << ": tensors on " << DeviceString(a.device())
      << " are not supported; tensorbridge computes on the CPU";
  TB_CHECK(a.ndim() >= 2, ValueError)
      << op << ": The input tensor " << arg << " must have at least 2 dimensions.";
  const DType dt = a.dtype();
  TB_CHECK(dt == DType::kFloat32 || dt == DType::kFloat64 || IsComplex(dt), TypeError)
      << op << ": Expected a floating point or complex tensor as input. Got " << DTypeName(dt)
      << " (tensorbridge's linear algebra serves float32, float64, complex64 and complex128)";
  if (square) {
    TB_CHECK(a.size(-1) == a.size(-2), ValueError)
        << op << ": " << arg << " must be batches of square matrices, but they are " << a.size(-2)
        << " by " << a.size(-1) << " matrices";
  }
}

void CheckSameDType(const Tensor& a, const Tensor& t, const char* op, const char* arg) {
  TB_CHECK(t.dtype() == a.dtype(), TypeError)
      << op << ": Expected " << arg << " to have the dtype of the input, " << DTypeName(a.dtype())
      << ", got " << DTypeName(t.dtype());
}

Dims BatchShape(const Tensor& a) {
  Dims b;
  for (int64_t i = 0; i + 2 < a.ndim(); ++i) b.push_back(a.size(i));
  return b;
}

int64_t BatchCount(IntArrayRef batch) {
  int64_t n = 1;
  for (size_t i = 0; i < batch.size(); ++i) n *= batch[i];
  return n;
}

Dims Concat(IntArrayRef batch, std::initializer_list<int64_t> tail) {
  Dims d(batch);
  for (int64_t t : tail) d.push_back(t);
  return d;
}

Tensor ColMajor(IntArrayRef batch, int64_t rows, int64_t cols, DType dtype) {
  Tensor t = Tensor::Empty(Concat(batch, {cols, rows}), dtype);
  const int64_t nd = t.ndim();
  return t.transpose(nd - 2, nd - 1);
}

Tensor ColMajorCopy(const Tensor& a) { return ColMajorCopy(a, BatchShape(a)); }

namespace {

// dst (cols x rows, row-major) = src (rows x cols, row-major) transposed, in 32 x 32 tiles.
template <typename T>
void TransposeTiles(const T* src, T* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      for (int64_t j = j0; j < j1; ++j) {
        for (int64_t i = i0; i < i1; ++i) dst[j * rows + i] = src[i * cols + j];
      }
    }
  }
}

// True when `a` is a batch of column-major matrices one after another (what ColMajor makes).
bool IsColMajorBatch(const Tensor& a) {
  const int64_t nd = a.ndim(), r = a.size(-2), c = a.size(-1);
  if ((c > 1 && a.stride(nd - 1) != r) || (r > 1 && a.stride(nd - 2) != 1)) return false;
  int64_t expected = r * c;
  for (int64_t d = nd - 3; d >= 0; --d) {
    if (a.size(d) != 1 && a.stride(d) != expected) return false;
    expected *= a.size(d);
  }
  return true;
}

}  // namespace

Tensor ColMajorCopy(const Tensor& a, IntArrayRef batch) {
  const int64_t rows = a.size(-2), cols = a.size(-1);
  Tensor out = ColMajor(batch, rows, cols, a.dtype());
  const bool same_batch = IntArrayRef(BatchShape(a)) == batch;
  if (out.numel() == 0) return out;  // nothing to copy (and possibly no memory to copy from)
  if (same_batch && IsColMajorBatch(a)) {
    std::memcpy(out.mutable_data(), a.data(), static_cast<size_t>(a.nbytes()));
  } else if (same_batch && a.is_contiguous() && (a.element_size() == 4 || a.element_size() == 8)) {
    const int64_t nb = BatchCount(batch), mat = rows * cols;
    for (int64_t b = 0; b < nb; ++b) {
      if (a.element_size() == 4) {
        TransposeTiles(a.data_as<const uint32_t>() + b * mat, out.data_as<uint32_t>() + b * mat,
                       rows, cols);
      } else {
        TransposeTiles(a.data_as<const uint64_t>() + b * mat, out.data_as<uint64_t>() + b * mat,
                       rows, cols);
      }
    }
  } else {
    out.copy_from(a);
  }
  return out;
}

ReadOperand ReadOnly(const Tensor& a, IntArrayRef batch) {
  if (IntArrayRef(BatchShape(a)) == batch) {
    if (IsColMajorBatch(a)) return {a, false};
    if (a.is_contiguous()) return {a, true};
  }
  return {ColMajorCopy(a, batch), false};
}

Tensor Int32Zeros(IntArrayRef shape) { return Tensor::Zeros(shape, DType::kInt32); }

void CheckErrors(const Tensor& info, const std::string& api, bool is_matrix) {
  if (info.numel() == 0) return;
  Tensor c = info.dtype() == DType::kInt32 ? info.contiguous() : Cast(info, DType::kInt32);
  const int32_t* p = c.data_as<const int32_t>();
  int64_t at = 0;
  while (at < c.numel() && p[at] == 0) ++at;
  if (at == c.numel()) return;
  const int32_t code = p[at];
  const std::string where =
      is_matrix ? std::string() : ": (Batch element " + std::to_string(at) + ")";
  auto has = [&](const char* s) { return api.find(s) != std::string::npos; };
  // LAPACK 3.10's gesdd answers a NaN or an infinity in A with info -4.
  TB_CHECK(!(code == -4 && has("svd")), RuntimeError)
      << api << where
      << ": The algorithm failed to converge because the input matrix contained non-finite "
         "values.";
  TB_CHECK(code > 0, InternalError)
      << api << where << ": Argument " << -code
      << " has illegal value. Most certainly there is a bug in the implementation calling the "
         "backend library.";
  if (has("inv")) {
    TB_THROW(RuntimeError) << api << where << ": The diagonal element " << code
                           << " is zero, the inversion could not be completed because the input "
                              "matrix is singular.";
  } else if (has("solve")) {
    TB_THROW(RuntimeError) << api << where
                           << ": The solver failed because the input matrix is singular.";
  } else if (has("cholesky")) {
    TB_THROW(RuntimeError) << api << where
                           << ": The factorization could not be completed because the input is "
                              "not positive-definite (the leading minor of order "
                           << code << " is not positive-definite).";
  } else if (has("svd")) {
    TB_THROW(RuntimeError) << api << where
                           << ": The algorithm failed to converge because the input matrix is "
                              "ill-conditioned or has too many repeated singular values (error "
                              "code: "
                           << code << ").";
  } else if (has("eig") || has("syevd")) {
    TB_THROW(RuntimeError) << api << where
                           << ": The algorithm failed to converge because the input matrix is "
                              "ill-conditioned or has too many repeated eigenvalues (error code: "
                           << code << ").";
  } else if (has("lstsq")) {
    TB_THROW(RuntimeError) << api << where
                           << ": The least squares solution could not be computed because the "
                              "input matrix does not have full rank (error code: "
                           << code << ").";
  } else if (has("lu_factor")) {
    TB_THROW(RuntimeError) << api << where << ": U[" << code << "," << code
                           << "] is zero and using it on lu_solve would result in a division by "
                              "zero. If you still want to perform the factorization, consider "
                              "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)";
  }
  TB_THROW(RuntimeError) << api << where << ": Unknown error code: " << code << ".";
}

namespace {

void LinalgCheckErrors(const Tensor& info, const std::string& api_name, bool is_matrix) {
  TB_CHECK(info.dtype() == DType::kInt32, TypeError)
      << "aten::_linalg_check_errors: info must be int32, got " << DTypeName(info.dtype());
  CheckErrors(info, api_name, is_matrix);
}

// aten::linalg_cross: the cross product of 3-vectors along `dim`, operands broadcast.
// out = a x b along a length-3 dimension whose elements are `inner` apart, in `outer` blocks
// (a, b, out contiguous): loads in M, products prod(u, v), each difference stored as T.
template <typename T, typename M, typename Prod>
void CrossLoop(const Tensor& a, const Tensor& b, const Tensor& out, int64_t outer, int64_t inner,
               Prod prod) {
  const T* x = a.data_as<const T>();
  const T* y = b.data_as<const T>();
  T* o = out.data_as<T>();
  for (int64_t i = 0; i < outer; ++i) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t p = i * 3 * inner + j;
      const M x0 = M(x[p]), x1 = M(x[p + inner]), x2 = M(x[p + 2 * inner]);
      const M y0 = M(y[p]), y1 = M(y[p + inner]), y2 = M(y[p + 2 * inner]);
      o[p] = T(prod(x1, y2) - prod(x2, y1));
      o[p + inner] = T(prod(x2, y0) - prod(x0, y2));
      o[p + 2 * inner] = T(prod(x0, y1) - prod(x1, y0));
    }
  }
}

Tensor LinalgCross(const Tensor& self, const Tensor& other, int64_t dim) {
  constexpr const char* kOp = "linalg.cross";
  TB_CHECK(self.ndim() == other.ndim(), ValueError)
      << kOp << ": inputs must have the same number of dimensions, got " << self.ndim() << " and "
      << other.ndim();
  TB_CHECK(self.dtype() == other.dtype(), TypeError)
      << kOp << ": expected the inputs to have the same dtype, got " << DTypeName(self.dtype())
      << " and " << DTypeName(other.dtype());
  TB_CHECK(self.device().is_host_accessible() && other.device().is_host_accessible(),
           NotImplementedError)
      << kOp << ": tensorbridge computes on the CPU";
  Dims shape = BroadcastShapes({self.shape(), other.shape()}, kOp);
  const int64_t d = WrapDim(dim, static_cast<int64_t>(shape.size()), kOp);
  TB_CHECK(self.size(d) == 3 && other.size(d) == 3, ValueError)
      << kOp << ": inputs dimension " << dim << " must have length 3. Got " << self.size(d)
      << " and " << other.size(d);
  Tensor a = self.expand(shape).contiguous();
  Tensor b = other.expand(shape).contiguous();
  Tensor out = Tensor::Empty(shape, self.dtype());
  int64_t inner = 1;
  for (size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
  const int64_t outer = out.numel() / (3 * inner);
  if (IsComplex(self.dtype())) {
    // c10::complex's textbook products, in the dtype.
    auto run = [&](auto zero) {
      using T = decltype(zero);
      CrossLoop<T, T>(a, b, out, outer, inner, [](T u, T v) {
        return T(u.real() * v.real() - u.imag() * v.imag(),
                 u.real() * v.imag() + u.imag() * v.real());
      });
    };
    if (self.dtype() == DType::kComplex64) {
      run(std::complex<float>());
    } else {
      run(std::complex<double>());
    }
    return out;
  }
  TB_DISPATCH(self.dtype(), kOp, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    // Each product rounded to T, then their difference, as torch's kernel computes in T (a
    // no-op for float and double).
    CrossLoop<T, M>(a, b, out, outer, inner, [](M u, M v) { return M(T(u * v)); });
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(linalg_common) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_linalg_check_errors", cpu, Boxed<&LinalgCheckErrors>(), TB_HERE);
  table.RegisterKernel("aten::linalg_cross", cpu, Boxed<&LinalgCross>(), TB_HERE);
}

}  // namespace tb::kernels::linalg
