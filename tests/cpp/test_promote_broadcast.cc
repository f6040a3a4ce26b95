// Tests for kernels/promote_broadcast.h: PyTorch's type promotion (promote_types,
// result_type), converting copies and broadcasting, checked against torch's documented results.
#include "kernels/promote_broadcast.h"

#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::FromValues;
using ::tb::testing::Values;

TEST(PromoteTypesTest, FollowsTorchsLattice) {
  struct Case {
    DType a, b, want;
  };
  // torch.promote_types for each pair (symmetric).
  for (const Case& c : std::vector<Case>{
           {DType::kBool, DType::kInt8, DType::kInt8},
           {DType::kUInt8, DType::kInt8, DType::kInt16},
           {DType::kUInt8, DType::kInt32, DType::kInt32},
           {DType::kInt32, DType::kInt64, DType::kInt64},
           {DType::kInt64, DType::kFloat16, DType::kFloat16},
           {DType::kFloat16, DType::kBFloat16, DType::kFloat32},
           {DType::kFloat32, DType::kFloat64, DType::kFloat64},
           {DType::kComplex64, DType::kFloat64, DType::kComplex128},
           {DType::kComplex64, DType::kFloat32, DType::kComplex64},
           {DType::kComplex64, DType::kComplex128, DType::kComplex128},
           {DType::kUInt16, DType::kInt8, DType::kInt32},
           {DType::kUInt32, DType::kInt16, DType::kInt64},
       }) {
    SCOPED_TRACE(std::string(DTypeName(c.a)) + ", " + std::string(DTypeName(c.b)));
    EXPECT_EQ(PromoteTypes(c.a, c.b), c.want);
    EXPECT_EQ(PromoteTypes(c.b, c.a), c.want);
  }
  EXPECT_EQ(PromoteTypes(DType::kInt16, DType::kInt16), DType::kInt16);
}

TEST(PromoteTypesTest, PairsWithoutACommonTypeAreTypeErrors) {
  EXPECT_TB_ERROR(kTypeError, "promote_types: uint64 and int8 have no common type",
                  PromoteTypes(DType::kUInt64, DType::kInt8));
  EXPECT_TB_ERROR(kTypeError, "storage-only dtype",
                  PromoteTypes(DType::kFloat8_e5m2, DType::kFloat32));
}

TEST(ResultTypeTest, DimensionedTensorsZeroDimTensorsAndNumbers) {
  auto tensor = [](DType t) { return PromotionOperand{t, false, false}; };
  auto zero_dim = [](DType t) { return PromotionOperand{t, true, false}; };
  auto number = [](DType t) { return PromotionOperand{t, true, true}; };
  // float32 tensor + a Python float stays float32.
  EXPECT_EQ(ResultType({tensor(DType::kFloat32), number(DType::kFloat64)}), DType::kFloat32);
  // int64 tensor + a Python float: the default dtype.
  EXPECT_EQ(ResultType({tensor(DType::kInt64), number(DType::kFloat64)}), DType::kFloat32);
  // uint8 tensor + a Python int stays uint8; bool tensor + a Python int is int64.
  EXPECT_EQ(ResultType({tensor(DType::kUInt8), number(DType::kInt64)}), DType::kUInt8);
  EXPECT_EQ(ResultType({tensor(DType::kBool), number(DType::kInt64)}), DType::kInt64);
  // A 0-d tensor of the same category does not widen; of a higher category it decides.
  EXPECT_EQ(ResultType({tensor(DType::kInt32), zero_dim(DType::kInt64)}), DType::kInt32);
  EXPECT_EQ(ResultType({tensor(DType::kInt32), zero_dim(DType::kFloat64)}), DType::kFloat64);
  EXPECT_EQ(ResultType({tensor(DType::kFloat16), zero_dim(DType::kFloat64)}), DType::kFloat16);
  // A Python complex with a float64 tensor: complex128.
  EXPECT_EQ(ResultType({tensor(DType::kFloat64), number(DType::kComplex128)}), DType::kComplex128);
  // Only 0-d operands: they promote among themselves.
  EXPECT_EQ(ResultType({zero_dim(DType::kInt8), zero_dim(DType::kUInt8)}), DType::kInt16);
  EXPECT_TB_ERROR(kValueError, "result_type: no operands", ResultType({}));
}

TEST(ResultTypeTest, OperandDescribesATensor) {
  Tensor scalar = Tensor::Empty({}, DType::kInt32);
  PromotionOperand o = Operand(scalar);
  EXPECT_EQ(o.dtype, DType::kInt32);
  EXPECT_TRUE(o.zero_dim);
  EXPECT_FALSE(o.wrapped);
  EXPECT_FALSE(Operand(Tensor::Empty({3}, DType::kFloat32)).zero_dim);
}

TEST(CastTest, ConvertsIntoANewTensorOrReturnsTheSame) {
  Tensor x = FromValues<int32_t>({3}, DType::kInt32, {1, -2, 3});
  Tensor f = Cast(x, DType::kFloat32);
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_NE(f.data(), x.data());
  EXPECT_EQ(Values<float>(f), (std::vector<float>{1, -2, 3}));
  EXPECT_EQ(Cast(x, DType::kInt32).data(), x.data());
}

TEST(CopyCastTest, BroadcastsAndConvertsAsTorch) {
  // float -> int truncates toward zero; the source row is broadcast over dst's rows.
  Tensor src = FromValues<float>({3}, DType::kFloat32, {1.7f, -1.7f, 0.5f});
  Tensor dst = Tensor::Empty({2, 3}, DType::kInt32);
  CopyCast(dst, src);
  EXPECT_EQ(Values<int32_t>(dst), (std::vector<int32_t>{1, -1, 0, 1, -1, 0}));
  // Into bool: nonzero is true.
  Tensor b = Tensor::Empty({3}, DType::kBool);
  CopyCast(b, src);
  EXPECT_EQ(Values<bool>(b), (std::vector<bool>{true, true, true}));
  // complex -> real keeps the real part.
  Tensor z = FromValues<std::complex<float>>({2}, DType::kComplex64, {{1.5f, 2}, {-3, 4}});
  Tensor r = Tensor::Empty({2}, DType::kFloat64);
  CopyCast(r, z);
  EXPECT_EQ(Values<double>(r), (std::vector<double>{1.5, -3}));
}

std::vector<int64_t> Vec(const Dims& d) { return std::vector<int64_t>(d.begin(), d.end()); }

TEST(BroadcastShapesTest, NumpyRules) {
  EXPECT_EQ(Vec(BroadcastShapes({Dims{2, 1, 3}, Dims{4, 1}}, "op")),
            (std::vector<int64_t>{2, 4, 3}));
  EXPECT_EQ(Vec(BroadcastShapes({Dims{}, Dims{3}}, "op")), (std::vector<int64_t>{3}));
  EXPECT_EQ(Vec(BroadcastShapes({Dims{0, 1}, Dims{1, 5}, Dims{5}}, "op")),
            (std::vector<int64_t>{0, 5}));
  std::string msg = EXPECT_TB_ERROR(kValueError, "aten::add.Tensor: shapes",
                                    BroadcastShapes({Dims{2}, Dims{3}}, "aten::add.Tensor"));
  EXPECT_NE(msg.find("cannot be broadcast together"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tb
