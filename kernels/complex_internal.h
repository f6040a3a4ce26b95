// Private to kernels/: the complex64 / complex128 forms of the element-wise, reduction and
// matmul kernels. The real kernels compute their result dtype first and hand a complex one to
// these functions (one line each, `if (IsComplex(dt)) return complex::...`), so every overload
// (functional, in-place, out=) of an op gains its complex form in one place. The loops run on
// std::complex, in the precision of the dtype (complex64 transcendental functions in double,
// rounded once). An op without a complex form raises NotImplementedError naming op and dtype.
#pragma once

#include <optional>

#include "bridge/tensor.h"
#include "dispatch/value.h"

namespace tb::kernels::complex {

// ---- element-wise (kernels/complex_elementwise.cc) -------------------------------------------

// The unary op `name` ("aten::exp", the functional name) on complex `self`; `op` is the name
// errors report ("aten::exp_" for the in-place form).
Tensor Unary(const char* name, const char* op, const Tensor& self, bool inplace);

enum class Arith { kAdd, kMul, kDiv, kPow };
// out = self + alpha * other (kAdd), self * other, self / other, self ** other in the complex
// dtype `dt`, into `dest` when given (in-place / out=).
Tensor Arithmetic(const char* op, Arith kind, DType dt, const Tensor& self, const Tensor& other,
                  const Scalar& alpha, const Tensor* dest);
// self ** exponent for a real Scalar exponent (torch's special cases 2, 3, 0.5, -1, ...).
Tensor PowScalar(const char* op, DType dt, const Tensor& self, double exponent, const Tensor* dest);
// eq (ne when `equal` is false) of two operands promoted to `dt`; bool result.
Tensor Equality(const char* op, bool equal, DType dt, const Tensor& self, const Tensor& other,
                const Tensor* dest);
// where(condition, self, other) in the complex dtype `dt`.
Tensor Where(const char* op, DType dt, const Tensor& condition, const Tensor& self,
             const Tensor& other, const Tensor* dest);
// A bool tensor: element != 0 (nonzero's mask).
Tensor NonzeroMask(const Tensor& self);

// ---- reductions (kernels/complex_reduce.cc) --------------------------------------------------

// sum / mean / prod of complex `self` over `dims` (empty: all), keepdim, cast to `dtype`.
enum class SumKind { kSum, kMean, kProd };
Tensor Reduce(const char* op, SumKind kind, const Tensor& self, const std::vector<int64_t>& dims,
              bool keepdim, DType dtype);
// cumsum / cumprod along `dim`, result dtype `dtype`.
Tensor Scan(const char* op, bool prod, const Tensor& self, int64_t dim, DType dtype);
// The vector norm (real result of the dtype's value type) of order `ord`.
Tensor VectorNorm(const char* op, const Tensor& self, double ord, const std::vector<int64_t>& dims,
                  bool keepdim, DType result);
// var (std when `take_sqrt`) with `correction`; real result. With `mean_out` the complex mean too.
Tensor VarStd(const char* op, bool take_sqrt, const Tensor& self, const std::vector<int64_t>& dims,
              double correction, bool keepdim, Tensor* mean_out);

// ---- matmul (kernels/complex_matmul.cc) -----------------------------------------------------

// beta * bias + alpha * (a @ b) for batched (3-d) or plain (2-d) a and b on cgemm / zgemm;
// without `bias` the product alone.
Tensor Gemm(const char* op, const Tensor& a, const Tensor& b, const std::optional<Tensor>& bias,
            double beta, double alpha);
// sum(conj(a) * b) when `conj_a` (vdot), sum(a * b) otherwise; 1-d operands.
Tensor Dot(const char* op, const Tensor& a, const Tensor& b, bool conj_a);

}  // namespace tb::kernels::complex
