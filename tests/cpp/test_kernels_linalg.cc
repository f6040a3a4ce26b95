// Tests for the linear algebra kernels (kernels/linalg_*.cc, LAPACK / OpenBLAS), called through
// OpTable::Global() as users reach them. Values are worked out by hand on 2x2 real and complex
// matrices; the Python tests compare every op with torch. Under ASan/UBSan these cover the batch
// and column-major index arithmetic and the LAPACK workspaces.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "bridge/error.h"
#include "bridge/tensor.h"
#include "dispatch/op_table.h"
#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::Call;
using ::tb::testing::Contains;
using ::tb::testing::FromValues;
using ::tb::testing::Values;

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "at " << i;
}

TEST(LinalgTest, CholeskyBatchReportsTheMatrixThatIsNotPositiveDefinite) {
  // [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt 2]]; [[-1, 0], [0, 1]] fails at order 1.
  Tensor a = FromValues<double>({2, 2, 2}, DType::kFloat64, {4, 2, 2, 3, -1, 0, 0, 1});
  Stack r = Call("aten::linalg_cholesky_ex", {a, false, false});
  const std::vector<double> l = Values<double>(r[0].to_tensor());
  ExpectNear({l[0], l[1], l[2], l[3]}, {2, 0, 1, std::sqrt(2.0)});
  EXPECT_EQ(Values<int32_t>(r[1].to_tensor()), (std::vector<int32_t>{0, 1}));
  try {
    Call("aten::linalg_cholesky_ex", {a, false, true});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntimeError);
    EXPECT_TRUE(Contains(e.message(), "(Batch element 1)")) << e.message();
    EXPECT_TRUE(Contains(e.message(), "leading minor of order 1")) << e.message();
  }
}

TEST(LinalgTest, SolveInverseAndDeterminant) {
  // A = [[2, 1], [1, 3]]: det 5, A^-1 = [[3, -1], [-1, 2]] / 5, A x = [3, 5] at x = [4, 7] / 5.
  Tensor a = FromValues<double>({2, 2}, DType::kFloat64, {2, 1, 1, 3});
  Tensor b = FromValues<double>({2}, DType::kFloat64, {3, 5});
  Stack x = Call("aten::_linalg_solve_ex", {a, b, true, false});
  EXPECT_EQ(x[0].to_tensor().shape(), (Dims{2}));
  ExpectNear(Values<double>(x[0].to_tensor()), {0.8, 1.4});
  Stack inv = Call("aten::linalg_inv_ex", {a, false});
  ExpectNear(Values<double>(inv[0].to_tensor()), {0.6, -0.2, -0.2, 0.4});
  Stack det = Call("aten::_linalg_det", {a});
  ExpectNear(Values<double>(det[0].to_tensor()), {5});
  // The transposed view (not C-contiguous) has the same determinant.
  Stack det_t = Call("aten::_linalg_det", {a.transpose(0, 1)});
  ExpectNear(Values<double>(det_t[0].to_tensor()), {5});
  Stack sl =
      Call("aten::_linalg_slogdet", {FromValues<double>({2, 2}, DType::kFloat64, {0, 1, 1, 0})});
  ExpectNear(Values<double>(sl[0].to_tensor()), {-1});
  ExpectNear(Values<double>(sl[1].to_tensor()), {0});
}

TEST(LinalgTest, SingularInverseRaisesWhenAskedTo) {
  Tensor z = Tensor::Zeros({2, 2}, DType::kFloat32);
  Stack r = Call("aten::linalg_inv_ex", {z, false});
  EXPECT_EQ(Values<int32_t>(r[1].to_tensor()), (std::vector<int32_t>{1}));
  try {
    Call("aten::linalg_inv_ex", {z, true});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntimeError);
    EXPECT_TRUE(Contains(e.message(), "The diagonal element 1 is zero")) << e.message();
  }
  try {
    Call("aten::linalg_inv_ex", {Tensor::Zeros({2, 3}, DType::kFloat32), false});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_TRUE(Contains(e.message(), "square matrices, but they are 2 by 3")) << e.message();
  }
}

TEST(LinalgTest, QrReconstructsAndEighSvdGiveTheSpectrum) {
  // A = [[3, 0], [4, 5]]: R's first column has norm 5.
  Tensor a = FromValues<double>({2, 2}, DType::kFloat64, {3, 0, 4, 5});
  Stack qr = Call("aten::linalg_qr", {a, std::string("reduced")});
  const std::vector<double> q = Values<double>(qr[0].to_tensor());
  const std::vector<double> r = Values<double>(qr[1].to_tensor());
  EXPECT_NEAR(std::abs(r[0]), 5, 1e-12);
  EXPECT_EQ(r[2], 0);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      EXPECT_NEAR(q[i * 2] * r[j] + q[i * 2 + 1] * r[2 + j], (i == 0 ? 3 - 3 * j : 4 + j), 1e-12);
    }
  }
  Tensor s = FromValues<double>({2, 2}, DType::kFloat64, {2, 1, 1, 2});
  Stack eig = Call("aten::_linalg_eigh", {s, std::string("L"), true});
  ExpectNear(Values<double>(eig[0].to_tensor()), {1, 3});
  Stack svd = Call("aten::_linalg_svd", {FromValues<double>({2, 2}, DType::kFloat64, {3, 0, 0, -2}),
                                         false, true, std::nullopt});
  ExpectNear(Values<double>(svd[1].to_tensor()), {3, 2});
}

TEST(LinalgTest, MatrixExpOfNilpotentAndDiagonal) {
  Tensor a = FromValues<double>({2, 2, 2}, DType::kFloat64, {0, 1, 0, 0, 1, 0, 0, 2});
  Stack e = Call("aten::linalg_matrix_exp", {a});
  const std::vector<double> v = Values<double>(e[0].to_tensor());
  ExpectNear(v, {1, 1, 0, 1, std::exp(1.0), 0, 0, std::exp(2.0)});
}

using C = std::complex<double>;

void ExpectNear(const std::vector<C>& got, const std::vector<C>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(std::abs(got[i] - want[i]), 0, 1e-12) << i;
}

TEST(LinalgTest, ComplexCholeskyInverseAndDeterminantOfAHermitianMatrix) {
  // A = [[2, i], [-i, 2]]: L = [[sqrt 2, 0], [-i / sqrt 2, sqrt 1.5]], det 3,
  // A^-1 = [[2, -i], [i, 2]] / 3.
  const C i(0, 1);
  Tensor a = FromValues<C>({2, 2}, DType::kComplex128, {2, i, -i, 2});
  Stack l = Call("aten::linalg_cholesky_ex", {a, false, true});
  ExpectNear(Values<C>(l[0].to_tensor()), {std::sqrt(2.0), 0, -i / std::sqrt(2.0), std::sqrt(1.5)});
  Stack inv = Call("aten::linalg_inv_ex", {a, false});
  ExpectNear(Values<C>(inv[0].to_tensor()), {2.0 / 3, -i / 3.0, i / 3.0, 2.0 / 3});
  Stack det = Call("aten::_linalg_det", {a});
  ExpectNear(Values<C>(det[0].to_tensor()), {3});
  // Singular values and Hermitian eigenvalues are real (float64): 1 and 3.
  Stack eigh = Call("aten::_linalg_eigh", {a, std::string("L"), true});
  EXPECT_EQ(eigh[0].to_tensor().dtype(), DType::kFloat64);
  ExpectNear(Values<double>(eigh[0].to_tensor()), {1, 3});
  Stack svd = Call("aten::_linalg_svd", {a, false, false, std::nullopt});
  EXPECT_EQ(svd[1].to_tensor().dtype(), DType::kFloat64);
  ExpectNear(Values<double>(svd[1].to_tensor()), {3, 1});
}

TEST(LinalgTest, EigOfARealRotationIsAConjugatePair) {
  // [[0, -1], [1, 0]] has eigenvalues +-i; each eigenvector has unit norm and A v = lambda v.
  Tensor a = FromValues<float>({2, 2}, DType::kFloat32, {0, -1, 1, 0});
  Stack r = Call("aten::linalg_eig", {a});
  Tensor w = r[0].to_tensor(), v = r[1].to_tensor();
  ASSERT_EQ(w.dtype(), DType::kComplex64);
  const std::vector<std::complex<float>> wv = Values<std::complex<float>>(w);
  const std::vector<std::complex<float>> vv = Values<std::complex<float>>(v);
  EXPECT_NEAR(std::abs(wv[0] - std::complex<float>(0, 1)), 0, 1e-6);
  EXPECT_NEAR(std::abs(wv[1] - std::complex<float>(0, -1)), 0, 1e-6);
  for (int j = 0; j < 2; ++j) {
    const std::complex<float> x = vv[j], y = vv[2 + j];  // column j
    EXPECT_NEAR(std::norm(x) + std::norm(y), 1, 1e-6);
    EXPECT_NEAR(std::abs(-y - wv[j] * x), 0, 1e-6);  // row 0 of A v
    EXPECT_NEAR(std::abs(x - wv[j] * y), 0, 1e-6);   // row 1 of A v
  }
  Stack vals = Call("aten::_linalg_eigvals", {a});
  EXPECT_EQ(Values<std::complex<float>>(vals[0].to_tensor()), wv);
}

TEST(LinalgTest, SvdOfANonFiniteMatrixRaises) {
  Tensor a = FromValues<double>({2, 2}, DType::kFloat64, {1, INFINITY, 0, 1});
  try {
    Call("aten::_linalg_svd", {a, false, true, std::nullopt});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntimeError);
    EXPECT_TRUE(Contains(e.message(), "contained non-finite values")) << e.message();
  }
}

}  // namespace
}  // namespace tb
