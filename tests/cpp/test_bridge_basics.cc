// Tests for the small types under bridge/: Dims and IntArrayRef (array_ref.h), DType, Device,
// errors (error.h) and the shape helpers of tensor.h (ContiguousStrides, ShapeNumel, WrapDim).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bridge/tensor.h"
#include "tests/cpp/test_util.h"

namespace tb {
namespace {

std::vector<int64_t> Vec(IntArrayRef r) { return r.vec(); }

// ---- Dims / IntArrayRef ------------------------------------------------------------------------

TEST(DimsTest, InlineBasics) {
  Dims d{2, 3, 4};
  EXPECT_EQ(d.size(), 3u);
  EXPECT_FALSE(d.empty());
  EXPECT_EQ(d[0], 2);
  EXPECT_EQ(d[2], 4);
  d.push_back(5);
  d.insert(0, 1);
  EXPECT_EQ(Vec(d), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  d.erase(2);
  EXPECT_EQ(Vec(d), (std::vector<int64_t>{1, 2, 4, 5}));
  d.resize(6, 9);
  EXPECT_EQ(Vec(d), (std::vector<int64_t>{1, 2, 4, 5, 9, 9}));
  d.resize(2);
  EXPECT_EQ(Vec(d), (std::vector<int64_t>{1, 2}));
  Dims filled(3, 7);
  EXPECT_EQ(Vec(filled), (std::vector<int64_t>{7, 7, 7}));
  EXPECT_TRUE(Dims().empty());
}

TEST(DimsTest, HeapCopyAndMove) {
  std::vector<int64_t> want = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  Dims big(IntArrayRef(want.data(), want.size()));
  ASSERT_GT(big.size(), Dims::kInline);
  EXPECT_EQ(Vec(big), want);

  Dims copy(big);  // copy construction: independent heap buffer
  EXPECT_EQ(Vec(copy), want);
  EXPECT_NE(copy.data(), big.data());
  copy[0] = 100;
  EXPECT_EQ(big[0], 1);

  const int64_t* heap = big.data();
  Dims moved(std::move(big));  // move construction steals the heap buffer
  EXPECT_EQ(moved.data(), heap);
  EXPECT_EQ(Vec(moved), want);
  EXPECT_EQ(big.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is defined

  Dims small{1, 2};
  small = moved;  // copy assignment, inline -> heap
  EXPECT_EQ(Vec(small), want);
  EXPECT_NE(small.data(), moved.data());

  Dims assigned{5};
  heap = moved.data();
  assigned = std::move(moved);  // move assignment
  EXPECT_EQ(assigned.data(), heap);
  EXPECT_EQ(Vec(assigned), want);
  EXPECT_TRUE(moved.empty());  // NOLINT(bugprone-use-after-move)

  assigned = Dims{4, 5};  // heap -> short contents
  EXPECT_EQ(Vec(assigned), (std::vector<int64_t>{4, 5}));

  Dims& self = assigned;
  assigned = self;  // self-assignment keeps the contents
  EXPECT_EQ(Vec(assigned), (std::vector<int64_t>{4, 5}));

  // Growing past the inline capacity by push_back / insert keeps the elements.
  Dims grow;
  for (int64_t i = 0; i < 20; ++i) grow.push_back(i);
  grow.insert(3, -1);
  grow.erase(0);
  ASSERT_EQ(grow.size(), 20u);
  EXPECT_EQ(grow[0], 1);
  EXPECT_EQ(grow[2], -1);
  EXPECT_EQ(grow[3], 3);
  EXPECT_EQ(grow[19], 19);

  // Moving an inline Dims copies its elements.
  Dims inl{8, 9};
  Dims inl_moved(std::move(inl));
  EXPECT_EQ(Vec(inl_moved), (std::vector<int64_t>{8, 9}));
}

TEST(IntArrayRefTest, EqualityAndVec) {
  std::vector<int64_t> v = {1, 2, 3};
  IntArrayRef a(v);
  Dims d{1, 2, 3};
  EXPECT_TRUE(a == d.ref());
  EXPECT_FALSE(a != IntArrayRef(d));
  Dims e{1, 2};
  EXPECT_TRUE(a != e.ref());
  EXPECT_EQ(a.vec(), v);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_TRUE(IntArrayRef().empty());
}

// ---- free functions ----------------------------------------------------------------------------

TEST(ShapeTest, ContiguousStridesNumelAndString) {
  EXPECT_EQ(Vec(ContiguousStrides({2, 3, 4})), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(Vec(ContiguousStrides({})), (std::vector<int64_t>{}));
  EXPECT_EQ(Vec(ContiguousStrides({2, 0, 3})), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(ShapeNumel({2, 3, 4}), 24);
  EXPECT_EQ(ShapeNumel({}), 1);
  EXPECT_EQ(ShapeNumel({5, 0}), 0);
  EXPECT_EQ(ShapeString({2, 3}), "[2, 3]");
  EXPECT_EQ(ShapeString({}), "[]");
  EXPECT_TB_ERROR(kValueError, "negative dimension in shape [2, -1]", ShapeNumel({2, -1}));
  std::string msg = EXPECT_TB_ERROR(
      kValueError, "shape [1099511627776, 1099511627776] has more than 2^63 elements",
      ShapeNumel({int64_t{1} << 40, int64_t{1} << 40}));
  EXPECT_NE(msg.find("2^63"), std::string::npos) << msg;
}

// The strides of [2^40, 2^40] fit in int64 (2^40 and 1), but ContiguousStrides also
// multiplies its running product by the outermost size, which overflows here: undefined
// behaviour (UBSan aborts this test) for a product that is never used. DLPack import calls
// it on producer shapes before checking their element count.
TEST(ShapeTest, ContiguousStridesDoNotOverflowPastTheOutermostDim) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(Vec(ContiguousStrides({big, big})), (std::vector<int64_t>{big, 1}));
}

TEST(ShapeTest, WrapDim) {
  EXPECT_EQ(WrapDim(-1, 3, "op"), 2);
  EXPECT_EQ(WrapDim(0, 3, "op"), 0);
  EXPECT_EQ(WrapDim(-3, 3, "op"), 0);
  EXPECT_EQ(WrapDim(0, 0, "op"), 0);
  EXPECT_EQ(WrapDim(-1, 0, "op"), 0);
  std::string msg = EXPECT_TB_ERROR(
      kIndexError, "myop: dimension 3 out of range for a tensor of 3 dimensions (expected",
      WrapDim(3, 3, "myop"));
  EXPECT_NE(msg.find("myop"), std::string::npos) << msg;
  EXPECT_TB_ERROR(kIndexError,
                  "op: dimension -4 out of range for a tensor of 3 dimensions (expected in",
                  WrapDim(-4, 3, "op"));
}

TEST(ErrorTest, KindNamesAndStreaming) {
  EXPECT_STREQ(ErrorKindName(ErrorKind::kValueError), "ValueError");
  EXPECT_STREQ(ErrorKindName(ErrorKind::kBufferError), "BufferError");
  EXPECT_STREQ(ErrorKindName(ErrorKind::kIndexError), "IndexError");
  EXPECT_STREQ(ErrorKindName(ErrorKind::kNotImplementedError), "NotImplementedError");
  try {
    TB_THROW(TypeError) << "bad " << 42;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTypeError);
    EXPECT_EQ(e.message(), "bad 42");
    EXPECT_STREQ(e.what(), "bad 42");
  }
  std::string msg = EXPECT_TB_ERROR(kInternalError, "check `1 + 1 == 3` failed. arith",
                                    TB_ICHECK(1 + 1 == 3) << "arith");
  EXPECT_NE(msg.find("1 + 1 == 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("arith"), std::string::npos) << msg;
}

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2);
  EXPECT_EQ(DTypeSize(DType::kComplex128), 16);
  EXPECT_EQ(DTypeSize(DType::kBool), 1);
  EXPECT_EQ(DTypeBits(DType::kFloat4_e2m1fn), 4);
  EXPECT_EQ(DTypeSize(DType::kFloat4_e2m1fn), 1);
  EXPECT_TRUE(IsSubByte(DType::kFloat6_e3m2fn));
  EXPECT_FALSE(IsSubByte(DType::kFloat8_e5m2));
  EXPECT_TRUE(IsStorageOnly(DType::kFloat8_e5m2));
  EXPECT_TRUE(IsFloatingPoint(DType::kBFloat16));
  EXPECT_TRUE(IsIntegral(DType::kBool, /*include_bool=*/true));
  EXPECT_FALSE(IsIntegral(DType::kBool, /*include_bool=*/false));
  for (int i = 0; i < kNumDTypes; ++i) {
    DType d = static_cast<DType>(i), back;
    ASSERT_TRUE(DTypeFromName(DTypeName(d), &back)) << DTypeName(d);
    EXPECT_EQ(back, d);
  }
  DType unused;
  EXPECT_FALSE(DTypeFromName("float31", &unused));
}

TEST(DeviceTest, NamesAndAccessibility) {
  EXPECT_EQ(DeviceString(Device{}), "cpu");
  EXPECT_EQ(DeviceString(Device{DeviceType::kCUDA, 1}), "cuda:1");
  EXPECT_TRUE(Device{}.is_cpu());
  EXPECT_TRUE((Device{DeviceType::kCUDAHost, 0}.is_host_accessible()));
  EXPECT_FALSE((Device{DeviceType::kCUDA, 0}.is_host_accessible()));
  EXPECT_TRUE(IsKnownDeviceType(1));
  EXPECT_FALSE(IsKnownDeviceType(5));
  EXPECT_TRUE((Device{DeviceType::kCUDA, 0} != Device{DeviceType::kCUDA, 1}));
}

// device.h: "unknown codes print as "device(<code>)"".
TEST(DeviceTest, UnknownDeviceCodePrintsItsNumber) {
  EXPECT_STREQ(DeviceTypeName(DeviceType::kROCMHost), "rocm_host");
  EXPECT_STREQ(DeviceTypeName(static_cast<DeviceType>(5)), "device(5)");
}

}  // namespace
}  // namespace tb
