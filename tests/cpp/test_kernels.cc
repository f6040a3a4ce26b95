// Tests for the CPU kernels (kernels/binary.cc, kernels/matmul.cc, kernels/activation.cc),
// called the way users reach them, through OpTable::Global().Call(...), and for
// kernels/onednn/onednn.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "bridge/tensor.h"
#include "dispatch/op_table.h"
#include "kernels/onednn/onednn.h"
#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::Contains;
using ::tb::testing::FromValues;
using ::tb::testing::Values;

// ---- helpers -----------------------------------------------------------------------------------

Tensor Floats(IntArrayRef shape, const std::vector<float>& values) {
  return FromValues(shape, DType::kFloat32, values);
}

// Uniform floats in [lo, hi), deterministic for a seed.
Tensor RandomFloats(IntArrayRef shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(ShapeNumel(shape)));
  for (float& x : v) x = dist(gen);
  return Floats(shape, v);
}

float At2(const Tensor& t, int64_t i, int64_t j) {
  return t.data_as<const float>()[i * t.stride(0) + j * t.stride(1)];
}

// Calls `op` on the global table and returns its single tensor result.
Tensor Call1(const char* op, Stack stack) {
  OpTable::Global().Call(op, stack);
  EXPECT_EQ(stack.size(), 1u) << op;
  if (stack.size() != 1 || !stack[0].is_tensor()) return Tensor();
  return stack[0].to_tensor();
}

// bfloat16 <-> float: the upper 16 bits of the float, rounded to nearest even.
uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float FromBf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Naive (i, k) x (k, j) product through the operands' strides, accumulated in double.
std::vector<double> NaiveMm(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += double{At2(a, i, p)} * double{At2(b, p, j)};
      c[static_cast<size_t>(i * n + j)] = acc;
    }
  }
  return c;
}

void ExpectMmMatches(const Tensor& a, const Tensor& b, double rel_tol = 1e-5) {
  Tensor c = Call1("aten::mm", {a, b});
  ASSERT_TRUE(c.defined());
  ASSERT_EQ(c.ndim(), 2);
  ASSERT_EQ(c.size(0), a.size(0));
  ASSERT_EQ(c.size(1), b.size(1));
  EXPECT_EQ(c.dtype(), DType::kFloat32);
  EXPECT_TRUE(c.is_contiguous());
  std::vector<double> ref = NaiveMm(a, b);
  std::vector<float> got = Values<float>(c);
  int bad = 0;
  for (size_t i = 0; i < ref.size() && bad < 10; ++i) {
    double tol = rel_tol * (1.0 + std::fabs(ref[i]));
    if (std::fabs(got[i] - ref[i]) > tol) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", expected " << ref[i];
      ++bad;
    }
  }
}

// ---- binary ------------------------------------------------------------------------------------

TEST(AddTest, Float32Contiguous) {
  Tensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Floats({2, 3}, {10, 20, 30, 40, 50, 60});
  Tensor c = Call1("aten::add.Tensor", {a, b, 1});
  EXPECT_EQ(c.dtype(), DType::kFloat32);
  EXPECT_EQ(c.shape(), a.shape());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), a.storage());
  EXPECT_NE(c.storage(), b.storage());
  EXPECT_EQ(Values<float>(c), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ(Values<float>(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));  // inputs untouched
  // Read-only inputs are fine: only the output is written.
  Tensor ro = Call1("aten::add.Tensor", {a.with_read_only(true), b.with_read_only(true), 1.0});
  EXPECT_FALSE(ro.read_only());
  EXPECT_EQ(Values<float>(ro), Values<float>(c));
}

TEST(AddTest, Broadcasting) {
  Tensor a = Floats({3, 1}, {1, 2, 3});
  Tensor b = Floats({4}, {10, 20, 30, 40});
  Tensor c = Call1("aten::add.Tensor", {a, b, 1});
  ASSERT_EQ(c.shape(), IntArrayRef({3, 4}));
  EXPECT_EQ(Values<float>(c), (std::vector<float>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
  Tensor d = Call1("aten::add.Tensor", {b, a, 1});  // either order
  EXPECT_EQ(Values<float>(d), Values<float>(c));

  Tensor s = Floats({}, {100});  // 0-d with [2, 3]
  Tensor e = Call1("aten::add.Tensor", {Floats({2, 3}, {0, 1, 2, 3, 4, 5}), s, 1});
  EXPECT_EQ(Values<float>(e), (std::vector<float>{100, 101, 102, 103, 104, 105}));
  Tensor scalar = Call1("aten::add.Tensor", {s, s, 1});
  EXPECT_EQ(scalar.ndim(), 0);
  EXPECT_EQ(*scalar.data_as<float>(), 200.f);
}

TEST(AddTest, NonContiguousInputs) {
  Tensor base = Floats({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor at = base.transpose(0, 1);  // [4, 3], strides [1, 4]
  ASSERT_FALSE(at.is_contiguous());
  Tensor b = Floats({4, 3}, {100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200});
  Tensor c = Call1("aten::add.Tensor", {at, b, 1});
  ASSERT_EQ(c.shape(), IntArrayRef({4, 3}));
  EXPECT_EQ(c.strides(), IntArrayRef({1, 4}));  // laid out as the first input, as torch's
  std::vector<float> want;
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) want.push_back(At2(at, i, j) + At2(b, i, j));
  }
  EXPECT_EQ(Values<float>(c), want);
  EXPECT_EQ(Values<float>(c)[1], 4.f + 200.f);

  // A strided slice and a negative-stride view.
  Tensor cols = base.slice(1, 0, 4, 2);                  // [3, 2], strides [4, 2]
  Tensor rev = base.as_strided({3, 2}, {-4, 1}, 8 + 1);  // rows reversed, columns 1 and 2
  Tensor d = Call1("aten::add.Tensor", {cols, rev, 1});
  EXPECT_EQ(Values<float>(d), (std::vector<float>{0 + 9, 2 + 10, 4 + 5, 6 + 6, 8 + 1, 10 + 2}));
}

TEST(AddTest, Int64WithAlpha) {
  const int64_t big = int64_t{1} << 40;
  Tensor a = FromValues<int64_t>({4}, DType::kInt64, {1, -2, big, 7});
  Tensor b = FromValues<int64_t>({4}, DType::kInt64, {10, 20, 30, big});
  Tensor c = Call1("aten::add.Tensor", {a, b, 2});
  EXPECT_EQ(c.dtype(), DType::kInt64);
  EXPECT_EQ(Values<int64_t>(c), (std::vector<int64_t>{21, 38, big + 60, 7 + 2 * big}));
  Tensor d = Call1("aten::add.Tensor", {a, b, 1});
  EXPECT_EQ(Values<int64_t>(d), (std::vector<int64_t>{11, 18, big + 30, big + 7}));
  Tensor i32 = Call1("aten::add.Tensor", {FromValues<int32_t>({2}, DType::kInt32, {1, 2}),
                                          FromValues<int32_t>({2}, DType::kInt32, {3, 4}), -1});
  EXPECT_EQ(Values<int32_t>(i32), (std::vector<int32_t>{-2, -2}));
}

TEST(AddTest, FloatAlpha) {
  Tensor a = Floats({3}, {1, 2, 3});
  Tensor b = Floats({3}, {4, 8, 12});
  EXPECT_EQ(Values<float>(Call1("aten::add.Tensor", {a, b, 0.5})), (std::vector<float>{3, 6, 9}));
  EXPECT_EQ(Values<float>(Call1("aten::add.Tensor", {a, b, 2})), (std::vector<float>{9, 18, 27}));
  Tensor f64 = FromValues<double>({2}, DType::kFloat64, {0.25, 0.5});
  EXPECT_EQ(Values<double>(Call1("aten::add.Tensor", {f64, f64, -3.0})),
            (std::vector<double>{-0.5, -1.0}));
}

// torch refuses a floating-point alpha for integral tensors ("For integral input tensors,
// argument alpha must not be a floating point number"); the kernels cast it to the integer
// type, so add(a, b, alpha=0.5) silently returns a + 0 * b.
TEST(AddTest, FloatAlphaOnIntegerTensorsIsRefused) {
  Tensor a = FromValues<int64_t>({2}, DType::kInt64, {1, 2});
  Tensor b = FromValues<int64_t>({2}, DType::kInt64, {10, 20});
  for (const char* op : {"aten::add.Tensor", "aten::sub.Tensor"}) {
    SCOPED_TRACE(op);
    Stack s{a, b, 0.5};
    try {
      OpTable::Global().Call(op, s);
      ADD_FAILURE() << "no error; result "
                    << ::testing::PrintToString(Values<int64_t>(s.at(0).to_tensor()));
    } catch (const Error& e) {
      EXPECT_TRUE(Contains(e.message(), "alpha")) << e.message();
    }
  }
}

TEST(BinaryTest, SubAndMul) {
  Tensor a = Floats({2, 2}, {10, 20, 30, 40});
  Tensor b = Floats({2}, {1, 2});
  EXPECT_EQ(Values<float>(Call1("aten::sub.Tensor", {a, b, 1})),
            (std::vector<float>{9, 18, 29, 38}));
  EXPECT_EQ(Values<float>(Call1("aten::sub.Tensor", {a, b, 3})),
            (std::vector<float>{7, 14, 27, 34}));
  EXPECT_EQ(Values<float>(Call1("aten::sub.Tensor", {a, b, 0.5})),
            (std::vector<float>{9.5, 19, 29.5, 39}));
  EXPECT_EQ(Values<float>(Call1("aten::mul.Tensor", {a, b})), (std::vector<float>{10, 40, 30, 80}));
  EXPECT_EQ(Values<float>(Call1("aten::mul.Tensor", {a.transpose(0, 1), b})),
            (std::vector<float>{10, 60, 20, 80}));
  Tensor ia = FromValues<int64_t>({3}, DType::kInt64, {5, -6, 7});
  EXPECT_EQ(Values<int64_t>(Call1("aten::mul.Tensor", {ia, ia})),
            (std::vector<int64_t>{25, 36, 49}));
  EXPECT_EQ(Values<int64_t>(Call1("aten::sub.Tensor", {ia, ia, 2})),
            (std::vector<int64_t>{-5, 6, -7}));
  Tensor u8 = FromValues<uint8_t>({2}, DType::kUInt8, {200, 3});
  EXPECT_EQ(Values<uint8_t>(Call1("aten::add.Tensor", {u8, u8, 1})),
            (std::vector<uint8_t>{144, 6}));  // wraps, as torch.uint8 does
}

TEST(BinaryTest, LargeTensorsTakeTheParallelLoops) {
  const int64_t rows = 300, cols = 200;  // 60000 elements: above the parallel grain
  Tensor a = RandomFloats({rows, cols}, 1);
  Tensor b = RandomFloats({rows, cols}, 2);
  Tensor c = Call1("aten::add.Tensor", {a, b, 1});
  std::vector<float> va = Values<float>(a), vb = Values<float>(b), vc = Values<float>(c);
  for (size_t i = 0; i < vc.size(); ++i) ASSERT_EQ(vc[i], va[i] + vb[i]) << i;

  Tensor col = RandomFloats({rows, 1}, 3);
  Tensor row = RandomFloats({cols}, 4);
  Tensor m = Call1("aten::mul.Tensor", {col, row});  // broadcast: the N-d loop
  ASSERT_EQ(m.shape(), IntArrayRef({rows, cols}));
  for (int64_t i = 0; i < rows; i += 7) {
    for (int64_t j = 0; j < cols; ++j) {
      ASSERT_EQ(At2(m, i, j), col.data_as<float>()[i] * row.data_as<float>()[j]) << i << "," << j;
    }
  }
  Tensor t = Call1("aten::sub.Tensor", {a.transpose(0, 1), b.transpose(0, 1), 1});
  ASSERT_EQ(t.shape(), IntArrayRef({cols, rows}));
  for (int64_t i = 0; i < cols; i += 5) {
    for (int64_t j = 0; j < rows; ++j) ASSERT_EQ(At2(t, i, j), At2(a, j, i) - At2(b, j, i));
  }
}

TEST(BinaryTest, EmptyShapes) {
  Tensor a = Tensor::Empty({0, 3}, DType::kFloat32);
  Tensor b = Floats({3}, {1, 2, 3});
  Tensor c = Call1("aten::add.Tensor", {a, b, 1});
  EXPECT_EQ(c.shape(), IntArrayRef({0, 3}));
  EXPECT_EQ(c.numel(), 0);
}

TEST(BinaryTest, Errors) {
  Tensor f = Floats({2}, {1, 2});
  std::string shapes =
      EXPECT_TB_ERROR(kValueError, "aten::mul.Tensor: shapes [2] [3] cannot be broadcast together",
                      Call1("aten::mul.Tensor", {f, Floats({3}, {1, 2, 3})}));
  EXPECT_TRUE(Contains(shapes, "aten::mul.Tensor")) << shapes;
  EXPECT_TB_ERROR(
      kValueError, "aten::add.Tensor: shapes [2, 3] [2] cannot be broadcast together",
      Call1("aten::add.Tensor", {Floats({2, 3}, std::vector<float>(6)), Floats({2}, {1, 2}), 1}));
  Tensor c = Tensor::Zeros({2}, DType::kComplex64);  // maximum has no complex form
  EXPECT_TB_ERROR(kNotImplementedError, "aten::maximum: dtype complex64 is not supported",
                  Call1("aten::maximum", {c, c}));
  EXPECT_TB_ERROR(kTypeError, "aten::add.Tensor: expected 3 arguments, got 2",
                  Call1("aten::add.Tensor", {f, f}));  // arity
  EXPECT_TB_ERROR(kTypeError, "aten::add.Tensor: argument 1 'other' expected Tensor but got float",
                  Call1("aten::add.Tensor", {f, 2.0, 1}));  // Scalar for Tensor
}

// Dispatch picks the kernel from the tensors' device; the CPU kernels then read every operand
// as host memory. An operand on another device must be refused (torch: "Expected all
// tensors to be on the same device"), not read. The "CUDA" tensor here is host memory in
// disguise, so the missing check shows as a result instead of a crash.
Tensor FakeCudaTensor(IntArrayRef shape) {
  static float memory[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  Device cuda{DeviceType::kCUDA, 0};
  auto storage = Storage::Wrap(memory, sizeof(memory), cuda, nullptr, nullptr);
  return Tensor(storage, memory, Dims(shape), ContiguousStrides(shape), DType::kFloat32, cuda);
}

TEST(DeviceCheckTest, OperandsOnAnotherDeviceAreRefused) {
  Tensor cpu = Floats({2, 2}, {1, 2, 3, 4});
  Tensor cuda = FakeCudaTensor({2, 2});
  for (const char* op : {"aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::mm"}) {
    SCOPED_TRACE(op);
    Stack s{cpu, cuda};
    if (std::string(op) != "aten::mul.Tensor" && std::string(op) != "aten::mm") s.emplace_back(1);
    std::string msg = EXPECT_TB_ERROR(kValueError, "tensors on different devices (cpu and cuda)",
                                      OpTable::Global().Call(op, s));
    EXPECT_NE(msg.find(op), std::string::npos) << msg;
  }
}

TEST(DeviceCheckTest, TensorsInListsCountToo) {
  Tensor cpu = Floats({2, 2}, {1, 2, 3, 4});
  Tensor cuda = FakeCudaTensor({2, 2});
  Stack mixed{std::vector<Tensor>{cpu, cuda}, int64_t{0}};
  EXPECT_TB_ERROR(kValueError, "aten::cat: tensors on different devices (cpu and cuda)",
                  OpTable::Global().Call("aten::cat", mixed));
  // All on a device without kernels: no CPU kernel runs on them.
  Stack all_cuda{std::vector<Tensor>{cuda, cuda}, int64_t{0}};
  EXPECT_TB_ERROR(kNotImplementedError, "aten::cat", OpTable::Global().Call("aten::cat", all_cuda));
}

// ---- mm ----------------------------------------------------------------------------------------

TEST(MmTest, Float32MatchesNaiveProduct) {
  Tensor a = RandomFloats({64, 32}, 10);
  Tensor b = RandomFloats({32, 48}, 11);
  ExpectMmMatches(a, b);
  // Small, exact case.
  Tensor x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = Floats({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor z = Call1("aten::mm", {x, y});
  EXPECT_EQ(Values<float>(z), (std::vector<float>{58, 64, 139, 154}));
}

TEST(MmTest, TransposedOperands) {
  Tensor bt = RandomFloats({48, 32}, 12);
  Tensor b = bt.transpose(0, 1);  // [32, 48], strides [1, 32]
  ASSERT_FALSE(b.is_contiguous());
  Tensor a = RandomFloats({64, 32}, 13);
  ExpectMmMatches(a, b);
  Tensor at = RandomFloats({32, 64}, 14).transpose(0, 1);  // [64, 32], strides [1, 64]
  ExpectMmMatches(at, b);
  ExpectMmMatches(at, RandomFloats({32, 48}, 15));
}

TEST(MmTest, StridedSlicedOperands) {
  Tensor wide = RandomFloats({64, 64}, 16);
  Tensor a = wide.slice(1, 0, std::nullopt, 2);  // [64, 32], strides [64, 2]
  ASSERT_EQ(a.stride(1), 2);
  Tensor b = RandomFloats({64, 48}, 17).slice(0, 1, std::nullopt, 2);  // [32, 48], [96, 1]
  ExpectMmMatches(a, b);
  // A row of a matrix, as a [1, k] operand.
  ExpectMmMatches(wide.slice(0, 5, 6), RandomFloats({64, 3}, 18));
}

TEST(MmTest, NegativeAndZeroStridedOperandsAreCopiedFirst) {
  Tensor base = RandomFloats({16, 8}, 19);
  Tensor flipped = base.as_strided({16, 8}, {-8, 1}, 15 * 8);  // rows reversed
  ASSERT_LT(flipped.stride(0), 0);
  Tensor row = RandomFloats({1, 5}, 20);
  Tensor expanded = row.expand({8, 5});  // stride 0
  ExpectMmMatches(flipped, expanded);
  EXPECT_LT(flipped.stride(0), 0);  // the inputs are not modified
}

TEST(MmTest, BFloat16) {
  const int64_t m = 24, k = 40, n = 16;
  Tensor af = RandomFloats({m, k}, 21);
  Tensor bf = RandomFloats({k, n}, 22);
  std::vector<uint16_t> a16, b16;
  for (float x : Values<float>(af)) a16.push_back(ToBf16(x));
  for (float x : Values<float>(bf)) b16.push_back(ToBf16(x));
  Tensor a = FromValues<uint16_t>({m, k}, DType::kBFloat16, a16);
  Tensor b = FromValues<uint16_t>({k, n}, DType::kBFloat16, b16);
  Tensor c = Call1("aten::mm", {a, b});
  ASSERT_TRUE(c.defined());
  EXPECT_EQ(c.dtype(), DType::kBFloat16);
  ASSERT_EQ(c.shape(), IntArrayRef({m, n}));

  // Reference: the same bf16-rounded inputs, multiplied in double.
  std::vector<float> ar, br;
  for (uint16_t x : a16) ar.push_back(FromBf16(x));
  for (uint16_t x : b16) br.push_back(FromBf16(x));
  std::vector<double> ref = NaiveMm(Floats({m, k}, ar), Floats({k, n}, br));
  std::vector<uint16_t> got = Values<uint16_t>(c);
  int bad = 0;
  for (size_t i = 0; i < ref.size() && bad < 10; ++i) {
    double g = FromBf16(got[i]);
    if (std::fabs(g - ref[i]) > 1e-2 * std::fabs(ref[i]) + 1e-2) {
      ADD_FAILURE() << "element " << i << ": got " << g << ", expected " << ref[i];
      ++bad;
    }
  }
  // bf16 rounding of the inputs is what the reference models: check the helpers too.
  EXPECT_EQ(ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FromBf16(0x3F80), 1.0f);
  EXPECT_EQ(FromBf16(ToBf16(1.00390625f)), 1.0f);  // halfway: rounds to even
  EXPECT_EQ(FromBf16(ToBf16(-2.5f)), -2.5f);

  // A transposed bf16 operand.
  Tensor bt = FromValues<uint16_t>({n, k}, DType::kBFloat16, std::vector<uint16_t>(n * k, 0x3F80));
  Tensor ct = Call1("aten::mm", {a, bt.transpose(0, 1)});
  std::vector<uint16_t> got_t = Values<uint16_t>(ct);
  for (int64_t i = 0; i < m; ++i) {
    double row_sum = 0;
    for (int64_t p = 0; p < k; ++p) row_sum += ar[static_cast<size_t>(i * k + p)];
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(FromBf16(got_t[static_cast<size_t>(i * n + j)]), row_sum,
                  1e-2 * std::fabs(row_sum) + 1e-2);
    }
  }
}

TEST(MmTest, DegenerateShapes) {
  Tensor a = Tensor::Empty({3, 0}, DType::kFloat32);
  Tensor b = Tensor::Empty({0, 4}, DType::kFloat32);
  Tensor z = Call1("aten::mm", {a, b});  // k == 0: zeros
  ASSERT_EQ(z.shape(), IntArrayRef({3, 4}));
  EXPECT_EQ(Values<float>(z), std::vector<float>(12, 0.f));
  Tensor e = Call1("aten::mm", {Tensor::Empty({0, 5}, DType::kFloat32), RandomFloats({5, 2}, 1)});
  EXPECT_EQ(e.shape(), IntArrayRef({0, 2}));
  ExpectMmMatches(RandomFloats({1, 1}, 2), RandomFloats({1, 1}, 3));
}

TEST(MmTest, Errors) {
  Tensor a = RandomFloats({4, 3}, 1);
  std::string msg = EXPECT_TB_ERROR(
      kValueError, "aten::mm: shapes [4, 3] and [4, 3] cannot be multiplied (3 != 4)",
      Call1("aten::mm", {a, RandomFloats({4, 3}, 2)}));
  EXPECT_TRUE(Contains(msg, "aten::mm")) << msg;
  EXPECT_TRUE(Contains(msg, "cannot be multiplied")) << msg;
  EXPECT_TB_ERROR(kValueError, "aten::mm: expected mat2 to be a 2-D tensor, got shape [3]",
                  Call1("aten::mm", {a, RandomFloats({3}, 3)}));
  EXPECT_TB_ERROR(kValueError, "aten::mm: expected self to be a 2-D tensor, got shape [2, 2, 2]",
                  Call1("aten::mm", {RandomFloats({2, 2, 2}, 3), a}));
  Tensor d = FromValues<double>({3, 1}, DType::kFloat64, {1, 2, 3});
  EXPECT_TB_ERROR(kTypeError,
                  "aten::mm: expected both tensors to have the same dtype, got float32 and",
                  Call1("aten::mm", {a, d}));
  Tensor b = FromValues<uint8_t>({1, 1}, DType::kBool, {1});
  EXPECT_TB_ERROR(kNotImplementedError, "aten::mm: dtype bool is not supported",
                  Call1("aten::mm", {b, b}));
  EXPECT_TB_ERROR(kTypeError, "aten::mm: expected 2 arguments, got 1", Call1("aten::mm", {a}));
}

constexpr double kPi = 3.14159265358979323846;

// ---- activations -------------------------------------------------------------------------------

std::vector<float> ActivationInputs() {
  std::vector<float> v;
  for (int i = -60; i <= 60; ++i) v.push_back(static_cast<float>(i) * 0.1f);
  for (float x : {-20.f, -8.f, -0.001f, 0.f, 0.001f, 8.f, 20.f}) v.push_back(x);
  return v;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 10; ++i) {
    if (std::fabs(got[i] - want[i]) > tol * (1.0 + std::fabs(want[i]))) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", expected " << want[i];
      ++bad;
    }
  }
}

TEST(ActivationTest, Relu) {
  std::vector<float> x = ActivationInputs();
  Tensor t = Floats({static_cast<int64_t>(x.size())}, x);
  Tensor r = Call1("aten::relu", {t});
  EXPECT_EQ(r.shape(), t.shape());
  EXPECT_NE(r.data(), t.data());
  std::vector<float> got = Values<float>(r);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], std::max(x[i], 0.f)) << x[i];

  // Non-contiguous input: the result is in the input's logical order.
  Tensor m = Floats({2, 3}, {-1, 2, -3, 4, -5, 6}).transpose(0, 1);
  Tensor rm = Call1("aten::relu", {m});
  ASSERT_EQ(rm.shape(), IntArrayRef({3, 2}));
  EXPECT_EQ(Values<float>(rm), (std::vector<float>{0, 4, 2, 0, 0, 6}));

  Tensor bf =
      FromValues<uint16_t>({3}, DType::kBFloat16, {ToBf16(-1.5f), ToBf16(0.f), ToBf16(2.5f)});
  Tensor rb = Call1("aten::relu", {bf});
  EXPECT_EQ(rb.dtype(), DType::kBFloat16);
  std::vector<uint16_t> got_b = Values<uint16_t>(rb);
  EXPECT_EQ(FromBf16(got_b[0]), 0.f);
  EXPECT_EQ(FromBf16(got_b[2]), 2.5f);

  EXPECT_EQ(Call1("aten::relu", {Tensor::Empty({0}, DType::kFloat32)}).numel(), 0);
  Tensor b = FromValues<uint8_t>({1}, DType::kBool, {1});  // torch: not implemented for Bool
  EXPECT_TB_ERROR(kNotImplementedError, "aten::relu: dtype bool is not supported",
                  Call1("aten::relu", {b}));
}

TEST(ActivationTest, GeluNone) {
  std::vector<float> x = ActivationInputs();
  Tensor t = Floats({static_cast<int64_t>(x.size())}, x);
  Tensor g = Call1("aten::gelu", {t, "none"});
  std::vector<double> want;
  for (float v : x) want.push_back(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
  ExpectClose(Values<float>(g), want, 1e-5);
}

TEST(ActivationTest, GeluTanh) {
  std::vector<float> x = ActivationInputs();
  Tensor t = Floats({static_cast<int64_t>(x.size())}, x);
  Tensor g = Call1("aten::gelu", {t, "tanh"});
  const double k = std::sqrt(2.0 / kPi);
  std::vector<double> want;
  for (float f : x) {
    double v = f;
    want.push_back(0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))));
  }
  ExpectClose(Values<float>(g), want, 1e-5);

  // The two variants differ (by ~1e-4 at x = 2).
  Tensor two = Floats({1}, {2.f});
  float none = *Call1("aten::gelu", {two, "none"}).data_as<float>();
  float tanh = *Call1("aten::gelu", {two, "tanh"}).data_as<float>();
  EXPECT_GT(std::fabs(none - tanh), 1e-5f);
}

TEST(ActivationTest, GeluNonContiguousAndErrors) {
  Tensor m = Floats({2, 2}, {-1, 1, -2, 2}).transpose(0, 1);  // logical: -1 -2 1 2
  Tensor g = Call1("aten::gelu", {m, "none"});
  std::vector<double> want;
  for (double v : {-1.0, -2.0, 1.0, 2.0})
    want.push_back(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
  ExpectClose(Values<float>(g), want, 1e-5);

  Tensor t = Floats({1}, {1.f});
  std::string msg =
      EXPECT_TB_ERROR(kValueError, "aten::gelu: approximate must be 'none' or 'tanh', got 'erf'",
                      Call1("aten::gelu", {t, "erf"}));
  EXPECT_TRUE(Contains(msg, "'erf'")) << msg;
  EXPECT_TB_ERROR(kTypeError, "aten::gelu: expected 2 arguments, got 1", Call1("aten::gelu", {t}));
  EXPECT_TB_ERROR(kTypeError, "aten::gelu: argument 1 'approximate' expected str but got int",
                  Call1("aten::gelu", {t, 1}));
}

TEST(KernelCountersTest, GlobalCallsCountAsKernelCalls) {
  OpTable& g = OpTable::Global();
  OpId relu = *g.Find("aten::relu");
  g.ResetCounters();
  Tensor t = Floats({2}, {-1, 1});
  Call1("aten::relu", {t});
  Call1("aten::relu", {t});
  OpCounters c = g.Counters(relu);
  EXPECT_EQ(c.calls, 2u);
  EXPECT_EQ(c.kernel, 2u);
  EXPECT_EQ(c.fallback, 0u);
}

// ---- convolution gradients of zero-padded inputs ---------------------------------------------

// tensorbridge::convolution_backward_padded on the unpadded input equals
// aten::convolution_backward on the padded copy, its input gradient cropped back.
TEST(KernelsTest, PaddedConvolutionBackwardEqualsPaddingFirst) {
  const Tensor x = RandomFloats({2, 4, 7, 6}, 11), w = RandomFloats({4, 2, 3, 3}, 12);
  const std::vector<int64_t> stride{2, 1}, padding{1, 0}, dilation{1, 1};
  // (left, right) of the last dim, then of dim 2; the same as (left, right) per dim in order.
  const std::vector<int64_t> pads{0, 1, 2, 1}, extra{2, 1, 0, 1};
  Stack s{x, pads, 0.0};
  OpTable::Global().Call("aten::constant_pad_nd", s);
  const Tensor padded = s.at(0).to_tensor();
  Stack fwd{padded,    w, Value(), stride, padding, dilation, false, std::vector<int64_t>{0, 0},
            int64_t{2}};
  const Tensor y = Call1("aten::convolution", fwd);
  const Tensor g = RandomFloats(y.shape(), 13);
  const std::vector<bool> mask{true, true, true};
  Stack want{g,       padded,   w,     std::vector<int64_t>{4},    stride,
             padding, dilation, false, std::vector<int64_t>{0, 0}, int64_t{2},
             mask};
  OpTable::Global().Call("aten::convolution_backward", want);
  Stack got{g, x, w, stride, padding, dilation, int64_t{2}, mask, extra};
  OpTable::Global().Call("tensorbridge::convolution_backward_padded", got);
  ASSERT_EQ(got.size(), 3u);
  const std::vector<int64_t> crop{0, -1, -2, -1};
  Stack cropped{want.at(0).to_tensor(), crop, 0.0};
  OpTable::Global().Call("aten::constant_pad_nd", cropped);
  const std::vector<Tensor> pairs[] = {{got.at(0).to_tensor(), cropped.at(0).to_tensor()},
                                       {got.at(1).to_tensor(), want.at(1).to_tensor()},
                                       {got.at(2).to_tensor(), want.at(2).to_tensor()}};
  for (const auto& pair : pairs) {
    ASSERT_EQ(pair[0].shape(), pair[1].shape());
    const std::vector<float> a = Values<float>(pair[0]), b = Values<float>(pair[1]);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f) << i;
  }
  EXPECT_EQ(got.at(0).to_tensor().shape(), x.shape());
  // Negative or miscounted extra padding is an error naming the op.
  Stack bad{g, x, w, stride, padding, dilation, int64_t{2}, mask, std::vector<int64_t>{1, 1}};
  EXPECT_THROW(OpTable::Global().Call("tensorbridge::convolution_backward_padded", bad), Error);
}

// ---- oneDNN set-up -----------------------------------------------------------------------------

TEST(OneDnnTest, VersionAndIsa) {
  std::string version = OneDnnVersion();
  EXPECT_TRUE(std::regex_match(version, std::regex(R"(\d+\.\d+\.\d+)"))) << version;
  // Make sure oneDNN has dispatched at least once before asking what it chose.
  Call1("aten::mm", {RandomFloats({8, 8}, 1), RandomFloats({8, 8}, 2)});
  std::string isa = OneDnnEffectiveIsa();
  EXPECT_FALSE(isa.empty());
  const bool user_chose =
      std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr || std::getenv("DNNL_MAX_CPU_ISA") != nullptr;
  if (!user_chose) {
    EXPECT_TRUE(OneDnnIsaCapped());
  }
  if (OneDnnIsaCapped()) {
    EXPECT_NE(isa, "avx512_core_amx") << isa;
  }
  std::cout << "oneDNN " << version << ", effective ISA " << isa
            << (OneDnnIsaCapped() ? " (capped)" : "") << "\n";
}

}  // namespace
}  // namespace tb
