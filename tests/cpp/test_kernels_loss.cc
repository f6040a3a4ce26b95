// Tests for the loss kernels (kernels/loss_nll.cc, kernels/loss_pointwise.cc) and the select /
// slice gradients (kernels/scatter.cc), called through OpTable::Global() as users reach them.
// Values are worked out by hand; the Python tests compare the same ops with torch bit for bit.
// Under ASan/UBSan these cover the kernels' index arithmetic (rows, pixels, ignored targets).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bridge/tensor.h"
#include "dispatch/op_table.h"
#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::Call;
using ::tb::testing::Contains;
using ::tb::testing::FromValues;
using ::tb::testing::Values;

// x[i, c] = 10 * i + c: the picked entries are easy to read.
Tensor Rows(int64_t n, int64_t c) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < c; ++k) v.push_back(static_cast<float>(10 * i + k));
  }
  return FromValues({n, c}, DType::kFloat32, v);
}

TEST(NllLossTest, ReductionsWeightsAndIgnoredRows) {
  Tensor x = Rows(3, 4);
  Tensor t = FromValues<int64_t>({3}, DType::kInt64, {1, -100, 3});
  // none: one loss per row, 0 for the ignored one; total_weight 0
  Stack none = Call("aten::nll_loss_forward", {x, t, std::nullopt, int64_t{0}, int64_t{-100}});
  EXPECT_EQ(Values<float>(none[0].to_tensor()), (std::vector<float>{-1, 0, -23}));
  EXPECT_EQ(Values<float>(none[1].to_tensor()), (std::vector<float>{0}));
  // mean over the two counted rows
  Stack mean = Call("aten::nll_loss_forward", {x, t, std::nullopt, int64_t{1}, int64_t{-100}});
  EXPECT_EQ(Values<float>(mean[0].to_tensor()), (std::vector<float>{-12}));
  EXPECT_EQ(Values<float>(mean[1].to_tensor()), (std::vector<float>{2}));
  // class weights: sum = -(0.5 * 1 + 2 * 23), total_weight 2.5
  Tensor w = FromValues<float>({4}, DType::kFloat32, {1, 0.5f, 1, 2});
  Stack ws = Call("aten::nll_loss_forward", {x, t, w, int64_t{2}, int64_t{-100}});
  EXPECT_EQ(Values<float>(ws[0].to_tensor()), (std::vector<float>{-46.5f}));
  EXPECT_EQ(Values<float>(ws[1].to_tensor()), (std::vector<float>{2.5f}));
  // backward of the weighted mean: -w[t] * g / total_weight at each counted row's target
  Tensor g = FromValues<float>({}, DType::kFloat32, {5});
  Stack gi =
      Call("aten::nll_loss_backward", {g, x, t, w, int64_t{1}, int64_t{-100}, ws[1].to_tensor()});
  std::vector<float> expected(12, 0.f);
  expected[1] = -0.5f * 2.f;  // row 0, class 1: -(5 / 2.5) * 0.5
  expected[11] = -2.f * 2.f;  // row 2, class 3
  EXPECT_EQ(Values<float>(gi[0].to_tensor()), expected);
}

TEST(NllLossTest, SpatialRowsArePixels) {
  // input [1, 2, 2, 2]: class c at pixel p holds 10 * c + p; targets pick per pixel
  Tensor x = FromValues<float>({1, 2, 2, 2}, DType::kFloat32, {0, 1, 2, 3, 10, 11, 12, 13});
  Tensor t = FromValues<int64_t>({1, 2, 2}, DType::kInt64, {1, 0, 5, 1});  // 5: ignored
  Stack none = Call("aten::nll_loss2d_forward", {x, t, std::nullopt, int64_t{0}, int64_t{5}});
  EXPECT_EQ(none[0].to_tensor().shape(), (Dims{1, 2, 2}));
  EXPECT_EQ(Values<float>(none[0].to_tensor()), (std::vector<float>{-10, -1, 0, -13}));
  Stack sum = Call("aten::nll_loss2d_forward", {x, t, std::nullopt, int64_t{2}, int64_t{5}});
  EXPECT_EQ(Values<float>(sum[0].to_tensor()), (std::vector<float>{-24}));
  EXPECT_EQ(Values<float>(sum[1].to_tensor()), (std::vector<float>{3}));
  Tensor g = FromValues<float>({1, 2, 2}, DType::kFloat32, {1, 2, 3, 4});
  Stack gi = Call("aten::nll_loss2d_backward",
                  {g, x, t, std::nullopt, int64_t{0}, int64_t{5}, none[1].to_tensor()});
  EXPECT_EQ(Values<float>(gi[0].to_tensor()), (std::vector<float>{0, -2, 0, 0, -1, 0, 0, -4}));
}

TEST(NllLossTest, ManyRowsTakeTheCascade) {
  // 1,000 rows of -1 at their target: the cascade's partial sums give exactly -1000.
  const int64_t n = 1000, c = 3;
  std::vector<float> v(static_cast<size_t>(n * c), 0.f);
  std::vector<int64_t> tv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    tv[i] = i % c;
    v[i * c + tv[i]] = 1.f;
  }
  Stack out = Call("aten::nll_loss_forward",
                   {FromValues({n, c}, DType::kFloat32, v), FromValues({n}, DType::kInt64, tv),
                    std::nullopt, int64_t{2}, int64_t{-100}});
  EXPECT_EQ(Values<float>(out[0].to_tensor()), (std::vector<float>{-1000}));
  EXPECT_EQ(Values<float>(out[1].to_tensor()), (std::vector<float>{1000}));
}

TEST(NllLossTest, Errors) {
  Tensor x = Rows(2, 3);
  std::string msg = EXPECT_TB_ERROR(
      kIndexError, "aten::nll_loss_forward: target 3 is out of bounds for 3 classes",
      Call("aten::nll_loss_forward", {x, FromValues<int64_t>({2}, DType::kInt64, {0, 3}),
                                      std::nullopt, int64_t{1}, int64_t{-100}}));
  EXPECT_TRUE(Contains(msg, "aten::nll_loss_forward: target 3 is out of bounds for 3 classes"))
      << msg;
  msg = EXPECT_TB_ERROR(
      kValueError, "aten::nll_loss2d_forward: input must be 4-D [N, C, H, W], got shape [2,",
      Call("aten::nll_loss2d_forward", {x, FromValues<int64_t>({2}, DType::kInt64, {0, 1}),
                                        std::nullopt, int64_t{1}, int64_t{-100}}));
  EXPECT_TRUE(Contains(msg, "input must be 4-D")) << msg;
}

TEST(PointwiseLossTest, MseAndSmoothL1) {
  Tensor a = FromValues<float>({4}, DType::kFloat32, {0, 1, 3, -2});
  Tensor b = FromValues<float>({4}, DType::kFloat32, {0, 0.5f, 0, 0});
  Stack mse = Call("aten::mse_loss", {a, b, int64_t{0}});
  EXPECT_EQ(Values<float>(mse[0].to_tensor()), (std::vector<float>{0, 0.25f, 9, 4}));
  Stack sl1 = Call("aten::smooth_l1_loss", {a, b, int64_t{2}, 1.0});
  EXPECT_EQ(Values<float>(sl1[0].to_tensor()), (std::vector<float>{0.125f + 2.5f + 1.5f}));
  Tensor g = FromValues<float>({}, DType::kFloat32, {1});
  Stack dmse = Call("aten::mse_loss_backward", {g, a, b, int64_t{1}});  // 2 / 4 * d
  EXPECT_EQ(Values<float>(dmse[0].to_tensor()), (std::vector<float>{0, 0.25f, 1.5f, -1}));
  Stack dsl1 = Call("aten::smooth_l1_loss_backward", {g, a, b, int64_t{2}, 1.0});
  EXPECT_EQ(Values<float>(dsl1[0].to_tensor()), (std::vector<float>{0, 0.5f, 1, -1}));
  std::string msg =
      EXPECT_TB_ERROR(kValueError, "aten::smooth_l1_loss: beta must be non-negative, got -1",
                      Call("aten::smooth_l1_loss", {a, b, int64_t{1}, -1.0}));
  EXPECT_TRUE(Contains(msg, "beta must be non-negative")) << msg;
}

TEST(SelectSliceBackwardTest, GradientsLandInZeros) {
  Tensor g = FromValues<float>({2}, DType::kFloat32, {7, 8});
  Stack sel =
      Call("aten::select_backward", {g, std::vector<int64_t>{2, 3}, int64_t{1}, int64_t{-1}});
  EXPECT_EQ(Values<float>(sel[0].to_tensor()), (std::vector<float>{0, 0, 7, 0, 0, 8}));
  Stack sl = Call("aten::slice_backward",
                  {g, std::vector<int64_t>{5}, int64_t{0}, int64_t{1}, int64_t{5}, int64_t{2}});
  EXPECT_EQ(Values<float>(sl[0].to_tensor()), (std::vector<float>{0, 7, 0, 8, 0}));
}

}  // namespace
}  // namespace tb
