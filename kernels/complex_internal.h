// Private to kernels/: the complex64 / complex128 forms of the element-wise, reduction and
// matmul kernels. The real kernels compute their result dtype first and hand a complex one to
// these functions (one line each, `if (IsComplex(dt)) return complex::...`), so every overload
// (functional, in-place, out=) of an op gains its complex form in one place. The loops run on
// std::complex, in the precision of the dtype (complex64 transcendental functions in double,
// rounded once). An op without a complex form raises NotImplementedError naming op and dtype.
#pragma once

#include <complex>

#include <optional>

#include "bridge/tensor.h"
#include "dispatch/value.h"

namespace tb::kernels {
struct ReduceDims;
}  // namespace tb::kernels

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
// torch's complex _log_add_exp_helper, log(exp(x) + exp(y)): a NaN in either part infects; of
// two equal infinite real parts, -inf gives the smaller operand and +inf log(exp(x) + exp(y));
// otherwise log1p(exp(min - max)) + max, min and max by real part.
std::complex<double> LogAddExpOne(std::complex<double> x, std::complex<double> y);
// logaddexp(self, other) in the complex dtype `dt`.
Tensor LogAddExp(const char* op, DType dt, const Tensor& self, const Tensor& other,
                 const Tensor* dest);
// self + value * t1 * t2 (t1 / t2 when `divide`) in the complex dtype `dt` (addcmul / addcdiv).
Tensor Addc(const char* op, bool divide, DType dt, const Tensor& self, const Tensor& t1,
            const Tensor& t2, const Scalar& value, const Tensor* dest);
// lerp(self, end, weight) in the complex dtype `dt`: the weight tensor when given, else the
// Scalar weight.
Tensor Lerp(const char* op, DType dt, const Tensor& self, const Tensor& end, const Tensor* weight,
            const Scalar& scalar_weight, const Tensor* dest);
// A bool tensor: element != 0 (nonzero's mask).
Tensor NonzeroMask(const Tensor& self);

// ---- views (kernels/complex_views.cc) -------------------------------------------------------

// view_as_real: the same memory as [..., 2] of the value type (float32 / float64).
Tensor AsReal(const Tensor& self);
// view_as_complex of a [..., 2] float32 / float64 tensor (a contiguous copy first when the
// layout does not allow a view).
Tensor AsComplex(const Tensor& self);

// ---- reductions (kernels/complex_reduce.cc) --------------------------------------------------
// sum / mean / cumsum / var run on the real kernels over AsReal views (the two parts are
// independent); the products and the pairing of the parts are here.

// prod of complex `self` (contiguous or not) over `rd`, in self's dtype.
Tensor Prod(const char* op, const Tensor& self, const ReduceDims& rd);
// cumsum (cumprod when `prod`) of the contiguous complex `x` into `out` (same shape and
// dtype), laid out as O rows of L scanned elements, each I apart.
void Scan(bool prod, const Tensor& x, const Tensor& out, int64_t O, int64_t L, int64_t I);
// out[...] = parts[..., 0] + parts[..., 1] (sqrt of it when `take_sqrt`) for a contiguous real
// [..., 2] tensor: the variance of a complex tensor from its parts' variances.
Tensor AddParts(const Tensor& parts, bool take_sqrt);

// ---- matmul (kernels/complex_matmul.cc) -----------------------------------------------------

// out = alpha * (a @ b) + beta * out for [B, M, K] a, [B, K, N] b and [B, M, N] out (any
// strides; out uninitialised when beta is 0) on BLAS cgemm / zgemm.
void Gemm(const char* op, const Tensor& out, const Tensor& a, const Tensor& b,
          std::complex<double> alpha, std::complex<double> beta);
// torch's loop for small batched products (k * m * n < 400, baddbmm_cpu_kernel): out =
// beta * out + alpha * (a @ b) summed in order in the dtype (alpha * (a @ b) when beta is 0,
// a @ b when `plain`, as bmm), so that small products round as torch's do.
void SmallGemm(const Tensor& out, const Tensor& a, const Tensor& b, std::complex<double> alpha,
               std::complex<double> beta, bool plain);
// sum(conj(a) * b) when `conj_a` (vdot), sum(a * b) otherwise, for 1-d a and b; a 0-d result.
Tensor Dot(const char* op, const Tensor& a, const Tensor& b, bool conj_a);

}  // namespace tb::kernels::complex
