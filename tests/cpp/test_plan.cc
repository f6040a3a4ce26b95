// Tests for dispatch/plan.h: building, slot reuse, running, and the fused nodes the compile
// backend's plan pass emits (tensorbridge::addmm_act, tensorbridge::convolution_relu), checked
// against the unfused ops of the same table.
#include "dispatch/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/op_call.h"

namespace tb {
namespace {

Tensor RandomFloats(IntArrayRef shape, uint32_t seed, DType dtype = DType::kFloat32) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Tensor t = Tensor::Empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kFloat32) {
      static_cast<float*>(t.mutable_data())[i] = static_cast<float>(dist(gen));
    } else {
      static_cast<double*>(t.mutable_data())[i] = dist(gen);
    }
  }
  return t;
}

double MaxAbsDiff(const Tensor& a_in, const Tensor& b_in) {
  EXPECT_EQ(a_in.dtype(), b_in.dtype());
  EXPECT_EQ(a_in.numel(), b_in.numel());
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x =
        a.dtype() == DType::kFloat32 ? a.data_as<const float>()[i] : a.data_as<const double>()[i];
    const double y =
        b.dtype() == DType::kFloat32 ? b.data_as<const float>()[i] : b.data_as<const double>()[i];
    m = std::max(m, std::abs(x - y));
  }
  return m;
}

using Arg = Plan::Arg;

// x @ w.t() + b through an activation, as the compile backend captures a Linear + ReLU/GELU:
// fused into one node, or as addmm then the activation.
void BuildLinear(Plan& plan, bool fused, const std::string& act = "relu",
                 const std::string& approximate = "none") {
  const int w = plan.AddInput("w"), b = plan.AddInput("b"), x = plan.AddInput("x");
  const int wt = plan.AddNode("aten::permute", {Arg::Of(w), Arg::Const(std::vector<int64_t>{1, 0})},
                              1, "permute")[0];
  std::vector<Arg> args = {Arg::Of(b), Arg::Of(x), Arg::Of(wt), Arg::Const(int64_t{1}),
                           Arg::Const(int64_t{1})};
  int y;
  if (fused) {
    args.push_back(Arg::Const(act));
    args.push_back(Arg::Const(approximate));
    y = plan.AddNode("tensorbridge::addmm_act", std::move(args), 1, "addmm_act")[0];
  } else {
    const int mm = plan.AddNode("aten::addmm", std::move(args), 1, "addmm")[0];
    y = act == "relu"
            ? plan.AddNode("aten::relu", {Arg::Of(mm)}, 1, "relu")[0]
            : plan.AddNode("aten::gelu", {Arg::Of(mm), Arg::Const(approximate)}, 1, "gelu")[0];
  }
  plan.SetOutputs({Arg::Of(y)});
  plan.Finalize();
}

class FusedLinear
    : public ::testing::TestWithParam<std::tuple<int64_t, std::string, std::string, DType>> {};

TEST_P(FusedLinear, MatchesTheUnfusedNodes) {
  const auto [rows, act, approximate, dtype] = GetParam();
  Plan fused, plain;
  BuildLinear(fused, true, act, approximate);
  BuildLinear(plain, false, act, approximate);
  EXPECT_EQ(fused.num_nodes(), 2u);
  EXPECT_EQ(plain.num_nodes(), 3u);
  EXPECT_NE(fused.Dump().find("tensorbridge::addmm_act("), std::string::npos);
  Tensor w = RandomFloats({48, 40}, 1, dtype), b = RandomFloats({48}, 2, dtype);
  Tensor x = RandomFloats({rows, 40}, 3, dtype);
  Stack got = fused.Run({w, b, x}), want = plain.Run({w, b, x});
  ASSERT_EQ(got.size(), 1u);
  const Tensor& y = got[0].to_tensor();
  EXPECT_EQ(y.shape(), want[0].to_tensor().shape());
  EXPECT_LT(MaxAbsDiff(y, want[0].to_tensor()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, FusedLinear,
    ::testing::Values(std::make_tuple(1, "relu", "none", DType::kFloat32),    // inner product
                      std::make_tuple(3, "gelu", "none", DType::kFloat32),    // inner product
                      std::make_tuple(1, "gelu", "tanh", DType::kFloat32),    // inner product
                      std::make_tuple(33, "relu", "none", DType::kFloat32),   // matmul
                      std::make_tuple(33, "gelu", "tanh", DType::kFloat32),   // matmul
                      std::make_tuple(5, "relu", "none", DType::kFloat64),    // addmm + relu
                      std::make_tuple(5, "gelu", "none", DType::kFloat64)));  // addmm + gelu

TEST(Plan, FusedConvolutionReluMatchesConvolutionThenRelu) {
  Tensor x = RandomFloats({2, 3, 6, 6}, 4), w = RandomFloats({5, 3, 3, 3}, 5);
  Tensor b = RandomFloats({5}, 6);
  static const OpRef conv("aten::convolution"), relu("aten::relu");
  static const OpRef fused("tensorbridge::convolution_relu");
  const std::vector<int64_t> one{1, 1}, zero{0, 0};
  Tensor want = relu(conv(x, w, b, one, one, one, false, zero, int64_t{1}).tensor()).tensor();
  Tensor got = fused(x, w, b, one, one, one, false, zero, int64_t{1}).tensor();
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_EQ(MaxAbsDiff(got, want), 0.0);
}

TEST(Plan, FusedOpsRejectAnUnknownActivation) {
  Tensor w = RandomFloats({4, 4}, 7), b = RandomFloats({4}, 8), x = RandomFloats({2, 4}, 9);
  static const OpRef addmm_act("tensorbridge::addmm_act");
  try {
    addmm_act.WithKeywords({Value(b), Value(x), Value(w)}, {{"activation", Value("tanh")}});
    FAIL() << "expected a ValueError";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensorbridge::addmm_act: activation must be"),
              std::string::npos)
        << e.what();
  }
}

TEST(Plan, SlotsAreReusedAfterTheLastUse) {
  Plan plan;
  BuildLinear(plan, false);
  // w, b, x, permute, addmm, relu: six values; the dead ones hand their slots on.
  EXPECT_EQ(plan.num_values(), 6u);
  EXPECT_LT(plan.num_slots(), plan.num_values());
  const std::string dump = plan.Dump();
  EXPECT_NE(dump.find("frees"), std::string::npos) << dump;
}

TEST(Plan, AValueDyingAtANodeIsMovedIntoItsLastReadOnly) {
  // Values dying at the node that reads them: x read twice by sq (copied, then moved), y read
  // directly before and after a list by put (copied, then moved), mask read directly and then
  // in a list by picked (copied for both: a list after the direct argument still reads it).
  Plan plan;
  const int a = plan.AddInput("a"), m = plan.AddInput("m");
  const int x =
      plan.AddNode("aten::add.Tensor", {Arg::Of(a), Arg::Of(a), Arg::Const(int64_t{1})}, 1, "x")[0];
  const int sq = plan.AddNode("aten::mul.Tensor", {Arg::Of(x), Arg::Of(x)}, 1, "sq")[0];
  Arg list;
  list.kind = Arg::Kind::kOptionalList;
  list.items = {Arg::Of(m)};
  const int y =
      plan.AddNode("aten::add.Tensor", {Arg::Of(a), Arg::Of(a), Arg::Const(int64_t{1})}, 1, "y")[0];
  const int put = plan.AddNode("aten::index_put", {Arg::Of(y), list, Arg::Of(y), Arg::Const(false)},
                               1, "put")[0];
  const int mask = plan.AddNode("aten::gt.Scalar", {Arg::Of(a), Arg::Const(0.0)}, 1, "mask")[0];
  Arg masks;
  masks.kind = Arg::Kind::kOptionalList;
  masks.items = {Arg::Of(mask)};
  const int picked = plan.AddNode("aten::index.Tensor", {Arg::Of(mask), masks}, 1, "picked")[0];
  plan.SetOutputs({Arg::Of(sq), Arg::Of(put), Arg::Of(picked)});
  plan.Finalize();
  Tensor av = RandomFloats({6}, 7);
  Tensor mv = Tensor::Empty({6}, DType::kInt64);  // indices 5 .. 0: put y reversed into y
  for (int i = 0; i < 6; ++i) static_cast<int64_t*>(mv.mutable_data())[i] = 5 - i;
  for (int run = 0; run < 2; ++run) {
    Stack out = plan.Run({av, mv});
    const float* in = av.data_as<const float>();
    const Tensor& sqt = out[0].to_tensor();
    const Tensor& putt = out[1].to_tensor();
    const Tensor& pick = out[2].to_tensor();
    int64_t positive = 0;
    for (int i = 0; i < 6; ++i) {
      EXPECT_FLOAT_EQ(sqt.data_as<const float>()[i], 4 * in[i] * in[i]);
      EXPECT_FLOAT_EQ(putt.data_as<const float>()[i], 2 * in[5 - i]);
      positive += in[i] > 0;
    }
    EXPECT_EQ(pick.numel(), positive);
  }
}

TEST(Plan, OutputInputsNameTheInputsReturnedUnchanged) {
  Plan plan;
  const int x = plan.AddInput("x");
  const int y = plan.AddInput("y");
  const std::vector<int> sum = plan.AddNode(
      "aten::add.Tensor", {Plan::Arg::Of(x), Plan::Arg::Of(y), Plan::Arg::Const(Value(int64_t{1}))},
      1, "add");
  plan.SetOutputs({Plan::Arg::Of(sum[0]), Plan::Arg::Of(y), Plan::Arg::Of(x)});
  plan.Finalize();
  EXPECT_EQ(plan.output_inputs(), (std::vector<int>{-1, 1, 0}));
}

// x -> a = neg(x) -> v = t(a) (a view) -> b = neg(x) -> c = mul(v, b): a's buffer lives on in v
// until c. Byte sizes: x 1000 (an input handed over), a, b and c 100 each.
int64_t ViewedPeak(bool with_base, bool input_bytes) {
  Plan plan;
  const int x = plan.AddInput("x");
  const int a = plan.AddNode("aten::neg", {Arg::Of(x)}, 1, "a")[0];
  const int v = plan.AddNode("aten::t", {Arg::Of(a)}, 1, "v")[0];
  const int b = plan.AddNode("aten::neg", {Arg::Of(x)}, 1, "b")[0];
  const int c = plan.AddNode("aten::mul.Tensor", {Arg::Of(v), Arg::Of(b)}, 1, "c")[0];
  plan.SetOutputs({Arg::Of(c)});
  if (input_bytes) plan.SetValueBytes(x, 1000);
  plan.SetValueBytes(a, 100);
  plan.SetValueBytes(b, 100);
  plan.SetValueBytes(c, 100);
  if (with_base) plan.SetValueBase(v, a);
  plan.Finalize();
  return plan.peak_bytes();
}

TEST(Plan, PeakBytesFollowTheBuffersThroughViewsAndHandedOverInputs) {
  // a, b and c alive together at c's node; without the base, a seems freed after the view node
  EXPECT_EQ(ViewedPeak(true, false), 300);
  EXPECT_EQ(ViewedPeak(false, false), 200);
  // x alive until its last use, b's node: x, a and b together there
  EXPECT_EQ(ViewedPeak(true, true), 1200);
  EXPECT_EQ(ViewedPeak(false, true), 1100);
}

TEST(Plan, AViewBaseMustBeMadeBeforeTheView) {
  Plan plan;
  const int x = plan.AddInput("x");
  const int y = plan.AddNode("aten::neg", {Arg::Of(x)}, 1, "y")[0];
  EXPECT_THROW(plan.SetValueBase(x, y), Error);
  EXPECT_THROW(plan.SetValueBase(y, 7), Error);
}

}  // namespace
}  // namespace tb
