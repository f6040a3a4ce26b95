// Tests for kernels/layout.h: the layouts torch gives new results (TensorIterator's stride
// order, empty_like's preserve_format), worked by hand, and element-wise kernels called
// through the table allocating them.
#include "kernels/layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "dispatch/op_table.h"
#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::Contains;
using ::tb::testing::ErrorOf;

Tensor Arange(IntArrayRef shape) {
  Tensor t = Tensor::Empty(shape, DType::kFloat32);
  auto* p = static_cast<float*>(t.mutable_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

// `t` with the same values stored with dimensions a and b swapped in memory.
Tensor StoredSwapped(const Tensor& t, int64_t a, int64_t b) {
  Tensor s = t.transpose(a, b).clone();
  return s.transpose(a, b);
}

std::vector<int64_t> Vec(IntArrayRef r) { return r.vec(); }

Tensor Call1(const char* op, Stack stack) {
  OpTable::Global().Call(op, stack);
  EXPECT_EQ(stack.size(), 1u) << op;
  return stack[0].to_tensor();
}

TEST(LayoutTest, DenseTensors) {
  EXPECT_TRUE(IsNonOverlappingAndDense({2, 3, 4}, {12, 4, 1}));
  EXPECT_TRUE(IsNonOverlappingAndDense({2, 3, 4}, {1, 8, 2}));    // permuted
  EXPECT_TRUE(IsNonOverlappingAndDense({2, 1, 4}, {4, 99, 1}));   // size 1: any stride
  EXPECT_FALSE(IsNonOverlappingAndDense({2, 3, 4}, {24, 8, 2}));  // every other element
  EXPECT_FALSE(IsNonOverlappingAndDense({2, 3}, {0, 1}));         // broadcast
  EXPECT_FALSE(IsNonOverlappingAndDense({4}, {-1}));
  EXPECT_TRUE(IsNonOverlappingAndDense({1}, {7}));
}

TEST(LayoutTest, FormatStrides) {
  EXPECT_EQ(Vec(FormatStrides({2, 3, 4, 5}, MemoryFormat::kChannelsLast, "op")),
            (std::vector<int64_t>{60, 1, 15, 3}));
  EXPECT_EQ(Vec(FormatStrides({2, 3, 2, 4, 5}, MemoryFormat::kChannelsLast3d, "op")),
            (std::vector<int64_t>{120, 1, 60, 15, 3}));
  EXPECT_EQ(Vec(FormatStrides({2, 3}, MemoryFormat::kContiguous, "op")),
            (std::vector<int64_t>{3, 1}));
  std::string msg = EXPECT_TB_ERROR(kValueError, "aten::x",
                                    FormatStrides({2, 3}, MemoryFormat::kChannelsLast, "aten::x"));
  EXPECT_TRUE(Contains(msg, "4-d")) << msg;
  msg = EXPECT_TB_ERROR(kValueError, "aten::clone", ParseMemoryFormat("sideways", "aten::clone"));
  EXPECT_TRUE(Contains(msg, "sideways")) << msg;
  EXPECT_EQ(ParseMemoryFormat("", "op"), MemoryFormat::kPreserve);
  EXPECT_EQ(ParseMemoryFormat("channels_last", "op"), MemoryFormat::kChannelsLast);
}

TEST(LayoutTest, LikeStridesPreserve) {
  Tensor t = StoredSwapped(Arange({2, 3, 4}), 1, 2);  // strides [12, 1, 3]
  EXPECT_EQ(Vec(LikeStrides(t)), (std::vector<int64_t>{12, 1, 3}));
  EXPECT_EQ(Vec(LikeStrides(t, MemoryFormat::kContiguous)), (std::vector<int64_t>{12, 4, 1}));
  // Not dense (every other column of the transposed storage): dense in the same order.
  Tensor s = t.slice(1, 0, 3, 2);  // [2, 2, 4], strides [12, 2, 3]
  EXPECT_EQ(Vec(LikeStrides(s)), (std::vector<int64_t>{8, 1, 2}));
  // torch's infer_dense_strides example: size/stride (6, 5, 4, 3, 2)/(6, 0, 120, 0, 1) sorts
  // innermost first to (4, 3, 0, 1, 2): the stride-0 dimensions do not move.
  Tensor big = Tensor::Empty({1000}, DType::kFloat32);
  Tensor z = big.as_strided({6, 5, 4, 3, 2}, {6, 0, 120, 0, 1});
  EXPECT_EQ(Vec(LikeStrides(z)), (std::vector<int64_t>{6, 36, 180, 2, 1}));
  Tensor e = EmptyLike(t, DType::kFloat64);
  EXPECT_EQ(e.dtype(), DType::kFloat64);
  EXPECT_EQ(Vec(e.strides()), (std::vector<int64_t>{12, 1, 3}));
}

TEST(LayoutTest, SuggestedMemoryFormat) {
  Tensor c = Arange({2, 3, 4, 5});
  EXPECT_EQ(SuggestMemoryFormat(c), MemoryFormat::kContiguous);
  Tensor cl = InFormat(c, MemoryFormat::kChannelsLast);
  EXPECT_EQ(Vec(cl.strides()), (std::vector<int64_t>{60, 1, 15, 3}));
  EXPECT_EQ(SuggestMemoryFormat(cl), MemoryFormat::kChannelsLast);
  EXPECT_TRUE(IsContiguousIn(cl, MemoryFormat::kChannelsLast));
  EXPECT_EQ(InFormat(cl, MemoryFormat::kChannelsLast).data(), cl.data());  // no copy
  // c10's rule: a size-1 height with a stride below the channels' extent is not channels-last
  // (a transposed 1-d signal seen as [N, C, 1, L]).
  Tensor big = Tensor::Empty({64}, DType::kFloat32);
  EXPECT_EQ(SuggestMemoryFormat(big.as_strided({1, 2, 1, 3}, {6, 1, 3, 2})),
            MemoryFormat::kContiguous);
  // Every size 1 but the batch: ambiguous, C order.
  EXPECT_EQ(SuggestMemoryFormat(big.as_strided({4, 1, 1, 1}, {1, 1, 1, 1})),
            MemoryFormat::kContiguous);
  Tensor c5 = Arange({2, 3, 2, 4, 5});
  EXPECT_EQ(SuggestMemoryFormat(InFormat(c5, MemoryFormat::kChannelsLast3d)),
            MemoryFormat::kChannelsLast3d);
}

TEST(LayoutTest, PreservedAndElementwiseCopies) {
  Tensor c = Arange({4, 6});
  // clone_preserve_strides keeps even non-dense strides.
  Tensor every_other = c.slice(1, 0, 6, 2);  // [4, 3], strides [6, 2]
  Tensor kept = EmptyPreservingStrides(every_other, DType::kFloat32);
  EXPECT_EQ(Vec(kept.strides()), (std::vector<int64_t>{6, 2}));
  // A broadcast (overlapping) tensor gets a dense layout instead.
  Tensor row = Arange({6}).expand({4, 6});
  EXPECT_EQ(Vec(EmptyPreservingStrides(row, DType::kFloat32).strides()),
            (std::vector<int64_t>{6, 1}));
  // A C-order result relaid as an element-wise result over a transposed operand: same values.
  Tensor t = StoredSwapped(c, 0, 1);  // strides [1, 4]
  Tensor r = LaidOutElementwise(c, {&t});
  EXPECT_EQ(Vec(r.strides()), (std::vector<int64_t>{1, 4}));
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      ASSERT_EQ(r.data_as<const float>()[i * r.stride(0) + j * r.stride(1)],
                static_cast<float>(i * 6 + j));
    }
  }
  EXPECT_EQ(LaidOutElementwise(c, {&c}).data(), c.data());  // already so: no copy
  EXPECT_EQ(Vec(LaidOutLike(c, t).strides()), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(Vec(CloneLike(t).strides()), (std::vector<int64_t>{1, 4}));
}

TEST(LayoutTest, ElementwiseOrderFollowsTheFirstOperand) {
  Tensor c = Arange({4, 8, 16});
  Tensor t = StoredSwapped(c, 1, 2);  // strides [128, 1, 8]
  EXPECT_EQ(Vec(ElementwiseOrder(c.shape(), {&c, &c})), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(Vec(ElementwiseOrder(c.shape(), {&t})), (std::vector<int64_t>{0, 2, 1}));
  // Two layouts: the first operand decides.
  EXPECT_EQ(Vec(ElementwiseOrder(c.shape(), {&t, &c})), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(Vec(ElementwiseOrder(c.shape(), {&c, &t})), (std::vector<int64_t>{0, 1, 2}));
  // A broadcast operand decides nothing on its broadcast dimensions.
  Tensor bias = Arange({16});
  EXPECT_EQ(Vec(ElementwiseOrder(c.shape(), {&bias, &t})), (std::vector<int64_t>{0, 2, 1}));
  Tensor row = Arange({1, 8, 1});
  EXPECT_EQ(Vec(ElementwiseOrder(c.shape(), {&row, &t})), (std::vector<int64_t>{0, 2, 1}));
  // Channels-last.
  Tensor nchw = Arange({2, 3, 4, 5});
  Tensor cl =
      EmptyDense(nchw.shape(), FormatStrides(nchw.shape(), MemoryFormat::kChannelsLast, "op"),
                 DType::kFloat32);
  EXPECT_EQ(Vec(ElementwiseOrder(nchw.shape(), {&cl})), (std::vector<int64_t>{0, 2, 3, 1}));
}

TEST(LayoutTest, BinaryResultFollowsTheInputs) {
  Tensor c = Arange({4, 8, 16});
  Tensor t = StoredSwapped(c, 1, 2);
  Tensor bias = Arange({16});
  Tensor r = Call1("aten::add.Tensor", {t, bias, 1});
  EXPECT_EQ(Vec(r.strides()), (std::vector<int64_t>{128, 1, 8}));
  // Values: c[i, j, k] + k, read through the result's strides.
  const float* p = r.data_as<const float>();
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 8; ++j) {
      for (int64_t k = 0; k < 16; ++k) {
        const float got = p[i * r.stride(0) + j * r.stride(1) + k * r.stride(2)];
        ASSERT_EQ(got, static_cast<float>(i * 128 + j * 16 + k + k)) << i << " " << j << " " << k;
      }
    }
  }
  // Contiguous inputs give a contiguous result; an in-place op keeps its destination.
  EXPECT_TRUE(Call1("aten::mul.Tensor", {c, c}).is_contiguous());
  Tensor d = StoredSwapped(c, 0, 2);
  Tensor same = Call1("aten::add_.Tensor", {d, c, 1});
  EXPECT_EQ(same.data(), d.data());
  EXPECT_EQ(d.data_as<const float>()[d.stride(0) * 1 + d.stride(2) * 3], 2.f * (128 + 3));
  // Unary ops and clone keep the input's layout.
  EXPECT_EQ(Vec(Call1("aten::neg", {t}).strides()), (std::vector<int64_t>{128, 1, 8}));
  EXPECT_EQ(Vec(Call1("aten::clone", {t, Value()}).strides()), (std::vector<int64_t>{128, 1, 8}));
  EXPECT_TRUE(Call1("aten::clone", {t, Value(std::string("contiguous_format"))}).is_contiguous());
}

}  // namespace
}  // namespace tb
