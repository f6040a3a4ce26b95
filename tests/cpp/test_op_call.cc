// Tests for dispatch/op_call.h: calling table ops by name from C++ (OpRef, OpResult), with
// arguments bound against the op's schema and the call counted by the table it goes through.
#include "dispatch/op_call.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::FromValues;
using ::tb::testing::Values;

TEST(OpRefTest, CallsAGlobalKernelByName) {
  static const OpRef add("aten::add.Tensor");
  Tensor x = FromValues<float>({3}, DType::kFloat32, {1, 2, 3});
  Tensor y = FromValues<float>({3}, DType::kFloat32, {10, 20, 30});
  Tensor z = add(x, y).tensor();
  EXPECT_EQ(Values<float>(z), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(add.id(), OpTable::Global().Intern("aten::add.Tensor"));
}

TEST(OpRefTest, BindsDefaultsKeywordsAndNumbers) {
  const OpRef add("aten::add.Tensor");
  Tensor x = FromValues<float>({2}, DType::kFloat32, {1, 2});
  Tensor y = FromValues<float>({2}, DType::kFloat32, {3, 4});
  // alpha by keyword: x + 2 * y.
  Tensor z = add.WithKeywords({x, y}, {{"alpha", Value(int64_t{2})}}).tensor();
  EXPECT_EQ(Values<float>(z), (std::vector<float>{7, 10}));
  // A Python-style number for `other` is wrapped, and does not promote float32.
  Tensor w = add(x, 0.5).tensor();
  EXPECT_EQ(w.dtype(), DType::kFloat32);
  EXPECT_EQ(Values<float>(w), (std::vector<float>{1.5f, 2.5f}));
}

TEST(OpRefTest, SchemaErrorsNameTheOp) {
  const OpRef add("aten::add.Tensor");
  Tensor x = FromValues<float>({1}, DType::kFloat32, {1});
  EXPECT_TB_ERROR(kTypeError, "aten::add.Tensor: missing required argument 'other'", add(x));
  EXPECT_TB_ERROR(kTypeError, "aten::add.Tensor: got an unexpected keyword argument 'beta'",
                  add.WithKeywords({x, x}, {{"beta", Value(int64_t{1})}}));
}

TEST(OpResultTest, SeveralResults) {
  const OpRef max("aten::max.dim");
  Tensor x = FromValues<float>({2, 3}, DType::kFloat32, {1, 5, 2, 7, 0, 3});
  OpResult r = max(x, int64_t{1});
  ASSERT_EQ(r.stack().size(), 2u);
  EXPECT_EQ(Values<float>(r.tensor(0)), (std::vector<float>{5, 7}));
  EXPECT_EQ(r.tensor(1).dtype(), DType::kInt64);
  EXPECT_EQ(r.tensor(1).data_as<const int64_t>()[0], 1);
  EXPECT_EQ(r.tensor(1).data_as<const int64_t>()[1], 0);
  EXPECT_TB_ERROR(kValueError, "expected one Tensor result, got 2 results", r.tensor());
  EXPECT_TB_ERROR(kValueError, "result 2 is not a Tensor", r.tensor(2));
}

TEST(OpResultTest, NonTensorResultIsNotATensor) {
  OpResult r(Stack{Value(int64_t{4})});
  EXPECT_TB_ERROR(kValueError, "expected one Tensor result, got 1 results", r.tensor());
  EXPECT_TB_ERROR(kValueError, "result 0 is not a Tensor", r.tensor(0));
}

TEST(OpRefTest, GoesThroughTheTableItWasGiven) {
  OpTable table;
  table.Define("test::twice(Tensor self) -> Tensor");
  auto reg = table.RegisterKernel(
      "test::twice", DeviceType::kCPU,
      [](const OpInfo&, Stack& s) {
        Tensor in = s[0].to_tensor().contiguous();
        Tensor out = Tensor::Empty(in.shape(), DType::kFloat32);
        const float* a = in.data_as<const float>();
        float* b = static_cast<float*>(out.mutable_data());
        for (int64_t i = 0; i < in.numel(); ++i) b[i] = 2 * a[i];
        s.clear();
        s.emplace_back(out);
      },
      "test");
  const OpRef twice("test::twice", table);
  Tensor x = FromValues<float>({2}, DType::kFloat32, {1, -3});
  EXPECT_EQ(Values<float>(twice(x).tensor()), (std::vector<float>{2, -6}));
  EXPECT_EQ(table.Counters(twice.id()).calls, 1u);
  EXPECT_EQ(table.Counters(twice.id()).kernel, 1u);
  // The global table does not know the op.
  EXPECT_FALSE(OpTable::Global().Find("test::twice").has_value());
  // Its schema binds the call: a keyword for `self` works, a wrong type names the argument.
  EXPECT_EQ(Values<float>(twice.WithKeywords({}, {{"self", Value(x)}}).tensor()),
            (std::vector<float>{2, -6}));
  EXPECT_TB_ERROR(kTypeError, "test::twice: argument 'self' must be Tensor", twice("x"));
}

}  // namespace
}  // namespace tb
