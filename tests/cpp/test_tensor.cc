// Tests for bridge/tensor.h and bridge/storage.h: construction, views, copies, edge shapes.
// Dims, IntArrayRef, DType, Device, errors and the shape helpers: test_bridge_basics.cc.
#include "bridge/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::ErrorOf;

// ---- helpers ---------------------------------------------------------------------------------

// A float32 tensor of `shape` holding 0, 1, 2, ... in row-major order.
Tensor Arange(IntArrayRef shape) {
  Tensor t = Tensor::Empty(shape, DType::kFloat32);
  auto* p = static_cast<float*>(t.mutable_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

// The element at `index`, read through the tensor's strides.
float At(const Tensor& t, std::initializer_list<int64_t> index) {
  EXPECT_EQ(static_cast<int64_t>(index.size()), t.ndim());
  int64_t offset = 0, d = 0;
  for (int64_t i : index) offset += i * t.strides()[d++];
  return t.data_as<const float>()[offset];
}

// The float32 elements of `t` in row-major order of its shape.
std::vector<float> Values(const Tensor& t) { return testing::Values<float>(t); }

std::vector<int64_t> Vec(IntArrayRef r) { return r.vec(); }

const char* Bytes(const Tensor& t) { return static_cast<const char*>(t.data()); }

// ---- Storage -----------------------------------------------------------------------------------

void CountRelease(void* context) noexcept { ++*static_cast<int*>(context); }

TEST(StorageTest, AllocateIsAlignedAndZeroed) {
  auto s = Storage::Allocate(100, /*zero=*/true);
  ASSERT_NE(s->data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data()) % Storage::kAlignment, 0u);
  EXPECT_EQ(s->nbytes(), 100u);
  EXPECT_FALSE(s->is_foreign());
  EXPECT_TRUE(s->device().is_cpu());
  const auto* p = static_cast<const unsigned char*>(s->data());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(p[i], 0) << i;
  auto empty = Storage::Allocate(0);
  EXPECT_EQ(empty->data(), nullptr);
  EXPECT_EQ(empty->nbytes(), 0u);
}

TEST(StorageTest, WrapReleasesOnceAfterLastTensor) {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  int released = 0;
  {
    auto s = Storage::Wrap(buf, sizeof(buf), Device{}, &released, &CountRelease);
    EXPECT_TRUE(s->is_foreign());
    Tensor t(s, buf, {2, 3}, {3, 1}, DType::kFloat32, Device{});
    s.reset();
    Tensor v = t.transpose(0, 1);
    t = Tensor();
    EXPECT_EQ(released, 0);
    EXPECT_EQ(At(v, {2, 1}), 5.f);
  }
  EXPECT_EQ(released, 1);
  // A null release function is allowed (static data).
  { auto s = Storage::Wrap(buf, sizeof(buf), Device{}, nullptr, nullptr); }
  EXPECT_EQ(released, 1);
}

// ---- construction and properties ---------------------------------------------------------------

TEST(TensorTest, EmptyZerosAndProperties) {
  Tensor z = Tensor::Zeros({2, 3}, DType::kFloat64);
  EXPECT_TRUE(z.defined());
  EXPECT_EQ(z.ndim(), 2);
  EXPECT_EQ(Vec(z.shape()), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Vec(z.strides()), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(z.size(-1), 3);
  EXPECT_EQ(z.stride(0), 3);
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.element_size(), 8);
  EXPECT_EQ(z.nbytes(), 48);
  EXPECT_EQ(z.dtype(), DType::kFloat64);
  EXPECT_TRUE(z.device().is_cpu());
  EXPECT_FALSE(z.read_only());
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.data(), z.storage()->data());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(z.data_as<double>()[i], 0.0);
  EXPECT_FALSE(Tensor().defined());

  Tensor packed = Tensor::Empty({3}, DType::kFloat4_e2m1fn);
  EXPECT_EQ(packed.nbytes(), 2);  // 3 x 4 bits, packed
  EXPECT_EQ(packed.storage()->nbytes(), 2u);

  std::string s = z.with_read_only(true).ToString();
  EXPECT_NE(s.find("[2, 3]"), std::string::npos) << s;
  EXPECT_NE(s.find("float64"), std::string::npos) << s;
  EXPECT_NE(s.find("cpu"), std::string::npos) << s;
  EXPECT_NE(s.find("read_only"), std::string::npos) << s;
}

TEST(TensorTest, TensorViewBorrowsDescription) {
  static_assert(!std::is_constructible_v<TensorView, Tensor&&>,
                "a TensorView must not be made from a temporary");
  Tensor t = Arange({3, 4});
  Tensor tt = t.transpose(0, 1);
  TensorView v(tt);
  EXPECT_EQ(v.data(), t.data());
  EXPECT_EQ(Vec(v.shape()), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(Vec(v.strides()), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(v.ndim(), 2);
  EXPECT_EQ(v.numel(), 12);
  EXPECT_EQ(v.dtype(), DType::kFloat32);
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_FALSE(v.read_only());
  EXPECT_EQ(v.data_as<float>()[5], 5.f);
  TensorView c(t);
  EXPECT_TRUE(c.is_contiguous());
}

// ---- views -------------------------------------------------------------------------------------

TEST(TensorViewOpsTest, SliceWithStepAndNegativeStart) {
  Tensor t = Arange({4, 6});
  Tensor s = t.slice(1, 1, 6, 2);
  EXPECT_EQ(s.storage(), t.storage());
  EXPECT_EQ(Vec(s.shape()), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(Vec(s.strides()), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(Bytes(s), Bytes(t) + 1 * sizeof(float));
  EXPECT_EQ(Values(s), (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));

  Tensor n = t.slice(-1, -3, std::nullopt);  // the last three columns
  EXPECT_EQ(Vec(n.shape()), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(Bytes(n), Bytes(t) + 3 * sizeof(float));
  EXPECT_EQ(At(n, {1, 0}), 9.f);

  Tensor rows = t.slice(0, -100, -1, 2);  // start clamps to 0; rows 0 and 2
  EXPECT_EQ(Vec(rows.shape()), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(Vec(rows.strides()), (std::vector<int64_t>{12, 1}));
  EXPECT_EQ(At(rows, {1, 0}), 12.f);

  Tensor empty = t.slice(0, 3, 1);
  EXPECT_EQ(Vec(empty.shape()), (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(empty.numel(), 0);

  // Writes through the slice land in the base tensor.
  static_cast<float*>(s.mutable_data())[s.stride(0) * 2 + s.stride(1) * 1] = -1.f;
  EXPECT_EQ(At(t, {2, 3}), -1.f);

  EXPECT_TB_ERROR(kValueError, "slice: step must be positive, got 0", t.slice(0, 0, 2, 0));
  EXPECT_TB_ERROR(kValueError, "slice: step must be positive, got -1", t.slice(0, 0, 2, -1));
  EXPECT_TB_ERROR(kIndexError,
                  "slice: dimension 2 out of range for a tensor of 2 dimensions (expected",
                  t.slice(2, 0, 2));
}

TEST(TensorViewOpsTest, Select) {
  Tensor t = Arange({4, 6});
  Tensor last = t.select(0, -1);
  EXPECT_EQ(last.storage(), t.storage());
  EXPECT_EQ(Vec(last.shape()), (std::vector<int64_t>{6}));
  EXPECT_EQ(Bytes(last), Bytes(t) + 18 * sizeof(float));
  EXPECT_EQ(Values(last), (std::vector<float>{18, 19, 20, 21, 22, 23}));

  Tensor col = t.select(1, 2);
  EXPECT_EQ(Vec(col.shape()), (std::vector<int64_t>{4}));
  EXPECT_EQ(Vec(col.strides()), (std::vector<int64_t>{6}));
  EXPECT_EQ(Values(col), (std::vector<float>{2, 8, 14, 20}));

  Tensor scalar = col.select(0, -2);
  EXPECT_EQ(scalar.ndim(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(*scalar.data_as<float>(), 14.f);

  EXPECT_TB_ERROR(kIndexError, "select: index 4 out of range for dimension 0 of size 4",
                  t.select(0, 4));
  EXPECT_TB_ERROR(kIndexError, "select: index -5 out of range for dimension 0 of size 4",
                  t.select(0, -5));
  EXPECT_TB_ERROR(kIndexError,
                  "select: dimension 2 out of range for a tensor of 2 dimensions (expected",
                  t.select(2, 0));
  EXPECT_TB_ERROR(kIndexError, "select: cannot select from a 0-d tensor", scalar.select(0, 0));
}

TEST(TensorViewOpsTest, TransposeAndPermute) {
  Tensor t = Arange({2, 3, 4});
  Tensor tr = t.transpose(0, -1);
  EXPECT_EQ(tr.storage(), t.storage());
  EXPECT_EQ(tr.data(), t.data());
  EXPECT_EQ(Vec(tr.shape()), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(Vec(tr.strides()), (std::vector<int64_t>{1, 4, 12}));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(At(tr, {3, 2, 1}), 23.f);
  EXPECT_EQ(At(tr, {1, 2, 0}), 9.f);

  Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.data(), t.data());
  EXPECT_EQ(Vec(p.shape()), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ(Vec(p.strides()), (std::vector<int64_t>{1, 12, 4}));
  EXPECT_EQ(At(p, {3, 1, 2}), 23.f);
  EXPECT_EQ(At(p, {1, 0, 2}), 9.f);

  Tensor neg = t.permute({-1, -3, -2});
  EXPECT_EQ(Vec(neg.strides()), (std::vector<int64_t>{1, 12, 4}));

  EXPECT_TB_ERROR(kValueError, "permute: dimension 0 repeats in [0, 0, 1]", t.permute({0, 0, 1}));
  EXPECT_TB_ERROR(kValueError, "permute: got 2 dimensions for a tensor of 3", t.permute({0, 1}));
  EXPECT_TB_ERROR(kIndexError, "permute: dimension 3 out of range for a tensor of 3 dimensions",
                  t.permute({0, 1, 3}));
  EXPECT_TB_ERROR(kIndexError, "transpose: dimension 3 out of range for a tensor of 3 dimensions",
                  t.transpose(0, 3));
}

TEST(TensorViewOpsTest, ExpandUsesZeroStrides) {
  Tensor t = Arange({3, 1});
  Tensor e = t.expand({2, 3, 4});
  EXPECT_EQ(e.storage(), t.storage());
  EXPECT_EQ(e.data(), t.data());
  EXPECT_EQ(Vec(e.shape()), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(Vec(e.strides()), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(e.numel(), 24);
  EXPECT_EQ(At(e, {1, 2, 3}), 2.f);
  EXPECT_EQ(At(e, {0, 1, 0}), 1.f);

  Tensor same = t.expand({-1, 5});
  EXPECT_EQ(Vec(same.shape()), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(Vec(same.strides()), (std::vector<int64_t>{1, 0}));

  Tensor c = e.contiguous();  // materialises the broadcast
  EXPECT_NE(c.data(), e.data());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(Values(c), Values(e));

  EXPECT_TB_ERROR(kValueError,
                  "expand: size 3 of dimension 0 cannot expand to 4 ([3, 1] -> [4, 4])",
                  t.expand({4, 4}));
  EXPECT_TB_ERROR(kValueError, "expand: cannot expand [3, 1] to [4] (fewer dimensions)",
                  t.expand({4}));
  EXPECT_TB_ERROR(kValueError, "expand: -1 not allowed in a new leading dimension",
                  t.expand({-1, 3, 1}));
}

TEST(TensorViewOpsTest, SqueezeAndUnsqueeze) {
  Tensor t = Arange({1, 3, 1, 2});
  Tensor all = t.squeeze();
  EXPECT_EQ(all.data(), t.data());
  EXPECT_EQ(Vec(all.shape()), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Vec(all.strides()), (std::vector<int64_t>{2, 1}));

  Tensor first = t.squeeze(0);
  EXPECT_EQ(Vec(first.shape()), (std::vector<int64_t>{3, 1, 2}));
  Tensor third = t.squeeze(-2);
  EXPECT_EQ(Vec(third.shape()), (std::vector<int64_t>{1, 3, 2}));
  Tensor kept = t.squeeze(1);  // size 3: unchanged
  EXPECT_EQ(Vec(kept.shape()), (std::vector<int64_t>{1, 3, 1, 2}));
  EXPECT_TB_ERROR(kIndexError, "squeeze: dimension 4 out of range for a tensor of 4 dimensions",
                  t.squeeze(4));

  Tensor u0 = all.unsqueeze(0);
  EXPECT_EQ(u0.data(), t.data());
  EXPECT_EQ(Vec(u0.shape()), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(Vec(u0.strides()), (std::vector<int64_t>{6, 2, 1}));
  EXPECT_TRUE(u0.is_contiguous());
  Tensor ulast = all.unsqueeze(-1);
  EXPECT_EQ(Vec(ulast.shape()), (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(Vec(ulast.strides()), (std::vector<int64_t>{2, 1, 1}));
  Tensor umid = all.unsqueeze(1);
  EXPECT_EQ(Vec(umid.shape()), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(Vec(umid.strides()), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(Values(umid), Values(all));
  EXPECT_TB_ERROR(kIndexError, "unsqueeze: dimension 3 out of range for a tensor of 3 dimensions",
                  all.unsqueeze(3));
  EXPECT_TB_ERROR(kIndexError, "unsqueeze: dimension -4 out of range for a tensor of 3 dimensions",
                  all.unsqueeze(-4));
}

TEST(TensorViewOpsTest, AsStrided) {
  Tensor t = Arange({12});
  Tensor a = t.as_strided({3, 2}, {2, 3}, 1);
  EXPECT_EQ(a.storage(), t.storage());
  EXPECT_EQ(Bytes(a), Bytes(t) + sizeof(float));
  EXPECT_EQ(Values(a), (std::vector<float>{1, 4, 3, 6, 5, 8}));

  // The last reachable element is index 11: offset 1 + 2*2 + 1*3 = 8 is fine, and so is the
  // whole buffer as one row.
  Tensor whole = t.as_strided({12}, {1}, 0);
  EXPECT_EQ(Values(whole), Values(t));

  // Offsets are relative to the tensor's first element.
  Tensor tail = t.slice(0, 6, std::nullopt);
  Tensor b = tail.as_strided({2, 2}, {1, 2}, -2);
  EXPECT_EQ(Values(b), (std::vector<float>{4, 6, 5, 7}));

  std::string msg = EXPECT_TB_ERROR(
      kValueError, "as_strided: shape [3, 4] with strides [4, 1] and offset 1 reaches",
      t.as_strided({3, 4}, {4, 1}, 1));  // reaches 12
  EXPECT_NE(msg.find("outside the storage"), std::string::npos) << msg;
  EXPECT_TB_ERROR(kValueError,
                  "as_strided: shape [2] with strides [1] and offset -1 reaches outside",
                  t.as_strided({2}, {1}, -1));
  EXPECT_TB_ERROR(kValueError,
                  "as_strided: shape [2] with strides [1] and offset -7 reaches outside",
                  tail.as_strided({2}, {1}, -7));
  EXPECT_TB_ERROR(kValueError,
                  "as_strided: shape [6] with strides [-1] and offset 4 reaches outside",
                  t.as_strided({6}, {-1}, 4));  // reaches index -1
  EXPECT_TB_ERROR(kValueError, "as_strided: shape [6] and strides [1, 1] differ in length",
                  t.as_strided({6}, {1, 1}));  // length mismatch
  // An empty view is never out of range.
  Tensor none = t.as_strided({0, 5}, {100, 100}, 50);
  EXPECT_EQ(none.numel(), 0);
}

// as_strided checks the view against the storage only when the storage's extent is known
// (non-zero size and data). A size-0 tensor of our own has neither, so it accepts any view:
// the result claims elements at a null data pointer, and reading them crashes.
TEST(TensorViewOpsTest, AsStridedOnAnEmptyStorageIsOutOfRange) {
  Tensor empty = Tensor::Empty({0}, DType::kFloat32);
  ASSERT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.as_strided({0, 3}, {3, 1}).numel(), 0);  // fine: no elements
  Tensor bad;
  EXPECT_TB_ERROR(kValueError, "as_strided: shape [4] reaches outside a tensor with no memory",
                  bad = empty.as_strided({4}, {1}));
  if (bad.defined()) {
    EXPECT_NE(bad.data(), nullptr) << "a 4-element view with a null data pointer";
  }
}

TEST(TensorViewOpsTest, DiagonalWithOffsets) {
  Tensor t = Arange({3, 4});
  Tensor d = t.diagonal();
  EXPECT_EQ(d.storage(), t.storage());
  EXPECT_EQ(d.data(), t.data());
  EXPECT_EQ(Vec(d.shape()), (std::vector<int64_t>{3}));
  EXPECT_EQ(Vec(d.strides()), (std::vector<int64_t>{5}));
  EXPECT_EQ(Values(d), (std::vector<float>{0, 5, 10}));

  Tensor up = t.diagonal(1);
  EXPECT_EQ(Bytes(up), Bytes(t) + 1 * sizeof(float));
  EXPECT_EQ(Values(up), (std::vector<float>{1, 6, 11}));

  Tensor down = t.diagonal(-1);
  EXPECT_EQ(Bytes(down), Bytes(t) + 4 * sizeof(float));
  EXPECT_EQ(Values(down), (std::vector<float>{4, 9}));

  Tensor swapped = t.diagonal(0, 1, 0);  // dims reversed: the same elements
  EXPECT_EQ(Values(swapped), (std::vector<float>{0, 5, 10}));

  EXPECT_EQ(t.diagonal(4).numel(), 0);
  EXPECT_EQ(t.diagonal(-3).numel(), 0);

  Tensor batched = Arange({2, 2, 2});
  Tensor bd = batched.diagonal(0, 1, 2);
  EXPECT_EQ(Vec(bd.shape()), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values(bd), (std::vector<float>{0, 3, 4, 7}));

  EXPECT_TB_ERROR(kValueError, "diagonal: dim1 and dim2 are both 1", t.diagonal(0, 1, 1));
  EXPECT_TB_ERROR(kValueError, "diagonal: needs at least 2 dimensions, got 1",
                  Arange({3}).diagonal());
  EXPECT_TB_ERROR(kIndexError, "diagonal: dimension 2 out of range for a tensor of 2 dimensions",
                  t.diagonal(0, 0, 2));
}

TEST(TensorViewOpsTest, ViewAndReshape) {
  Tensor t = Arange({2, 3, 4});
  Tensor v = t.view({6, 4});
  EXPECT_EQ(v.storage(), t.storage());
  EXPECT_EQ(v.data(), t.data());
  EXPECT_EQ(Vec(v.strides()), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(Vec(t.view({-1}).shape()), (std::vector<int64_t>{24}));
  EXPECT_EQ(Vec(t.view({4, -1}).shape()), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(Vec(t.view({1, 24, 1}).strides()), (std::vector<int64_t>{24, 1, 1}));

  // Non-contiguous but viewable: rows 0 and 2 of a [4, 6] matrix, split along the columns.
  Tensor rows = Arange({4, 6}).slice(0, 0, 4, 2);
  Tensor split = rows.view({2, 2, 3});
  EXPECT_EQ(Vec(split.strides()), (std::vector<int64_t>{12, 3, 1}));
  EXPECT_EQ(split.data(), rows.data());
  EXPECT_EQ(Values(split), Values(rows));

  // A transposed tensor can still split its contiguous innermost dimension.
  Tensor tr = t.transpose(0, 1);  // [3, 2, 4] strides [4, 12, 1]
  Tensor tv = tr.view({3, 2, 2, 2});
  EXPECT_EQ(Vec(tv.strides()), (std::vector<int64_t>{4, 12, 2, 1}));
  EXPECT_EQ(Values(tv), Values(tr));

  // ... but not flatten.
  std::string msg = EXPECT_TB_ERROR(
      kValueError, "view: a tensor of shape [3, 2, 4] and strides [4, 12, 1] cannot be",
      tr.view({24}));
  EXPECT_NE(msg.find("reshape"), std::string::npos) << msg;

  Tensor r = tr.reshape({24});  // copies
  EXPECT_NE(r.storage(), t.storage());
  EXPECT_NE(r.data(), t.data());
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_EQ(Values(r), Values(tr));

  Tensor rv = t.reshape({4, 6});  // a view when possible
  EXPECT_EQ(rv.data(), t.data());
  EXPECT_EQ(rv.storage(), t.storage());

  EXPECT_TB_ERROR(kValueError, "view: shape [5, 5] is invalid for 24 elements", t.view({5, 5}));
  EXPECT_TB_ERROR(kValueError, "view: only one dimension can be -1 in [-1, -1]", t.view({-1, -1}));
  EXPECT_TB_ERROR(kValueError, "view: shape [5, -1] is invalid for 24 elements", t.view({5, -1}));
  EXPECT_TB_ERROR(kValueError, "reshape: shape [7, -1] is invalid for 24 elements",
                  t.reshape({7, -1}));
  EXPECT_TB_ERROR(kValueError, "view: invalid size in [-2, 12]", t.view({-2, 12}));
}

// ---- copies --------------------------------------------------------------------------------

TEST(TensorCopyTest, ContiguousReturnsSameDataWhenAlreadyContiguous) {
  Tensor t = Arange({3, 4});
  Tensor c = t.contiguous();
  EXPECT_EQ(c.data(), t.data());
  EXPECT_EQ(c.storage(), t.storage());

  Tensor tr = t.transpose(0, 1);
  Tensor ct = tr.contiguous();
  EXPECT_NE(ct.data(), t.data());
  EXPECT_NE(ct.storage(), t.storage());
  EXPECT_TRUE(ct.is_contiguous());
  EXPECT_EQ(Vec(ct.shape()), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(Values(ct), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(ct.data_as<float>()[1], 4.f);  // laid out row-major in memory

  // Size-1 dimensions with odd strides are still contiguous: no copy.
  Tensor odd = t.as_strided({1, 12}, {999, 1});
  EXPECT_TRUE(odd.is_contiguous());
  EXPECT_EQ(odd.contiguous().data(), t.data());
}

TEST(TensorCopyTest, CloneIsIndependentAndWritable) {
  Tensor t = Arange({2, 3}).with_read_only(true);
  Tensor c = t.clone();
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_NE(c.data(), t.data());
  EXPECT_FALSE(c.read_only());
  EXPECT_EQ(Values(c), Values(t));
  static_cast<float*>(c.mutable_data())[0] = 42.f;
  EXPECT_EQ(At(t, {0, 0}), 0.f);

  Tensor diag = Arange({3, 3}).diagonal();
  EXPECT_EQ(Values(diag.clone()), (std::vector<float>{0, 4, 8}));
}

TEST(TensorCopyTest, CopyFromBroadcasts) {
  Tensor dst = Tensor::Zeros({2, 3}, DType::kFloat32);
  Tensor row = Arange({3});
  dst.copy_from(row);
  EXPECT_EQ(Values(dst), (std::vector<float>{0, 1, 2, 0, 1, 2}));

  Tensor col = Arange({2, 1});
  dst.copy_from(col);
  EXPECT_EQ(Values(dst), (std::vector<float>{0, 0, 0, 1, 1, 1}));

  Tensor same = Arange({2, 3});
  dst.copy_from(same);
  EXPECT_EQ(Values(dst), (std::vector<float>{0, 1, 2, 3, 4, 5}));

  // Into a non-contiguous destination: the transpose of a [3, 2] buffer.
  Tensor base = Tensor::Zeros({3, 2}, DType::kFloat32);
  base.transpose(0, 1).copy_from(same);
  EXPECT_EQ(Values(base), (std::vector<float>{0, 3, 1, 4, 2, 5}));

  // Scalar source, 0-d.
  Tensor s = Arange({4}).select(0, 3);
  dst.copy_from(s);
  EXPECT_EQ(Values(dst), std::vector<float>(6, 3.f));

  EXPECT_TB_ERROR(kTypeError, "copy_from: dtype float64 into float32 needs a converting copy",
                  dst.copy_from(Tensor::Zeros({2, 3}, DType::kFloat64)));
  EXPECT_TB_ERROR(kValueError, "expand: size 4 of dimension 0 cannot expand to 3 ([4] -> [2, 3])",
                  dst.copy_from(Arange({4})));
  EXPECT_TB_ERROR(kBufferError, "cannot write to a read-only tensor of shape [2, 3] (float32); its",
                  dst.with_read_only(true).copy_from(same));
}

// contiguous() of strided layouts in each element width, checked element by element against
// the source read through its strides: permuted dims (runs that merge and runs that do not),
// a broadcast (stride 0) innermost dim, step slices, and a row-contiguous innermost dim.
TEST(TensorCopyTest, ContiguousOfStridedLayoutsInEveryElementWidth) {
  for (DType dt :
       {DType::kUInt8, DType::kInt16, DType::kFloat32, DType::kFloat64, DType::kComplex128}) {
    const int64_t w = DTypeSize(dt);
    Tensor base = Tensor::Empty({2, 2, 32, 2, 32}, dt);
    auto* bytes = static_cast<unsigned char*>(base.mutable_data());
    for (int64_t i = 0; i < base.numel() * w; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
    const std::vector<Tensor> sources = {
        base.permute({0, 1, 3, 2, 4}),                            // inner runs of 32 elements
        base.permute({4, 3, 2, 1, 0}),                            // every stride reversed
        base.slice(4, 0, 32, 3).slice(2, 1, 31, 2),               // steps
        base.select(4, 5).unsqueeze(3).expand({2, 2, 32, 6, 2}),  // broadcast innermost dim
        base.slice(2, 0, 5),                                      // merged outer dims
    };
    for (const Tensor& src : sources) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " " + ShapeString(src.shape()) + " strides " +
                   ShapeString(src.strides()));
      Tensor c = src.contiguous();
      ASSERT_TRUE(c.is_contiguous());
      ASSERT_EQ(Vec(c.shape()), Vec(src.shape()));
      const char* in = Bytes(src);
      const char* out = Bytes(c);
      Dims index(static_cast<size_t>(src.ndim()), 0);
      for (int64_t i = 0; i < src.numel(); ++i) {
        int64_t offset = 0;
        for (int64_t d = 0; d < src.ndim(); ++d) offset += index[d] * src.strides()[d];
        ASSERT_EQ(std::memcmp(out + i * w, in + offset * w, static_cast<size_t>(w)), 0)
            << "element " << i;
        for (int64_t d = src.ndim() - 1; d >= 0; --d) {
          if (++index[d] < src.shape()[d]) break;
          index[d] = 0;
        }
      }
    }
  }
}

// ---- edge shapes ---------------------------------------------------------------------------

TEST(TensorEdgeTest, ZeroDimTensor) {
  Tensor t = Tensor::Empty({}, DType::kFloat32);
  EXPECT_EQ(t.ndim(), 0);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.nbytes(), 4);
  EXPECT_TRUE(t.is_contiguous());
  *static_cast<float*>(t.mutable_data()) = 7.f;
  Tensor c = t.clone();
  EXPECT_EQ(c.ndim(), 0);
  EXPECT_EQ(*c.data_as<float>(), 7.f);
  EXPECT_EQ(t.contiguous().data(), t.data());
  Tensor v = t.view({1, 1});
  EXPECT_EQ(Vec(v.shape()), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(v.data(), t.data());
  EXPECT_EQ(t.unsqueeze(0).numel(), 1);
  EXPECT_EQ(t.unsqueeze(-1).ndim(), 1);
  EXPECT_EQ(t.squeeze().ndim(), 0);
  EXPECT_EQ(t.transpose(0, -1).ndim(), 0);
  EXPECT_EQ(Vec(t.expand({3}).strides()), (std::vector<int64_t>{0}));
  EXPECT_EQ(Values(t.expand({2, 2})), std::vector<float>(4, 7.f));
  EXPECT_EQ(v.view({}).ndim(), 0);
  EXPECT_TB_ERROR(kIndexError, "slice: cannot slice a 0-d tensor", t.slice(0, 0, 1));
  EXPECT_TB_ERROR(kIndexError, "select: cannot select from a 0-d tensor", t.select(0, 0));
}

// A 0-d tensor has no dimension 0 to ask the size or stride of (torch: IndexError). WrapDim
// accepts dims 0 and -1 for 0-d tensors, so size()/stride() read past the end of the shape.
TEST(TensorEdgeTest, ZeroDimSizeAndStrideAreIndexErrors) {
  Tensor s = Arange({5}).select(0, 2);
  ASSERT_EQ(s.ndim(), 0);
  int64_t stale = -1;
  EXPECT_TB_ERROR(kIndexError, "size: a 0-d tensor has no dimensions", stale = s.size(0));
  EXPECT_EQ(stale, -1) << "size(0) of a 0-d tensor read past its empty shape and returned "
                       << stale;
  EXPECT_TB_ERROR(kIndexError, "size: a 0-d tensor has no dimensions", s.size(-1));
  EXPECT_TB_ERROR(kIndexError, "stride: a 0-d tensor has no dimensions", s.stride(0));
}

TEST(TensorEdgeTest, SizeZeroTensors) {
  Tensor t = Tensor::Empty({0, 3}, DType::kFloat32);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0);
  EXPECT_EQ(t.data(), nullptr);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(Vec(t.strides()), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(t.contiguous().data(), t.data());
  Tensor c = t.clone();
  EXPECT_EQ(c.numel(), 0);
  EXPECT_EQ(Vec(c.shape()), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(Vec(t.view({3, 0}).shape()), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(Vec(t.reshape({0}).shape()), (std::vector<int64_t>{0}));
  EXPECT_EQ(Vec(t.transpose(0, 1).shape()), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(t.select(1, 2).numel(), 0);
  EXPECT_EQ(Vec(t.expand({2, 0, 3}).shape()), (std::vector<int64_t>{2, 0, 3}));
  t.copy_from(Arange({3}));  // nothing to copy, and no error
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(Vec(t.view({-1}).shape()), (std::vector<int64_t>{0}));
  EXPECT_TB_ERROR(kValueError, "view: shape [-1, 0] is invalid for 0 elements",
                  t.view({-1, 0}));  // -1 could be any size
  Tensor e = Arange({4}).slice(0, 2, 2);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.clone().numel(), 0);
}

TEST(TensorEdgeTest, NegativeStridesOverForeignBuffer) {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  auto storage = Storage::Wrap(buf, sizeof(buf), Device{}, nullptr, nullptr);
  Tensor rev(storage, buf + 5, {6}, {-1}, DType::kFloat32, Device{});
  EXPECT_EQ(rev.storage()->data(), static_cast<void*>(buf));
  EXPECT_FALSE(rev.is_contiguous());
  EXPECT_EQ(Values(rev), (std::vector<float>{5, 4, 3, 2, 1, 0}));

  Tensor s = rev.slice(0, 1, 5, 2);  // elements 4, 2
  EXPECT_EQ(Vec(s.strides()), (std::vector<int64_t>{-2}));
  EXPECT_EQ(s.data(), static_cast<void*>(buf + 4));
  EXPECT_EQ(Values(s), (std::vector<float>{4, 2}));

  Tensor c = rev.contiguous();
  EXPECT_NE(c.data(), rev.data());
  EXPECT_EQ(Vec(c.strides()), (std::vector<int64_t>{1}));
  EXPECT_EQ(Values(c), (std::vector<float>{5, 4, 3, 2, 1, 0}));

  // 2-D, rows reversed, through as_strided on the forward tensor.
  Tensor fwd(storage, buf, {6}, {1}, DType::kFloat32, Device{});
  Tensor flipped = fwd.as_strided({2, 3}, {-3, 1}, 3);
  EXPECT_EQ(flipped.data(), static_cast<void*>(buf + 3));
  EXPECT_EQ(Values(flipped), (std::vector<float>{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(Values(flipped.clone()), (std::vector<float>{3, 4, 5, 0, 1, 2}));
  EXPECT_TB_ERROR(kValueError, "as_strided: shape [3, 3] with strides [-3, 1] and offset 3 reaches",
                  fwd.as_strided({3, 3}, {-3, 1}, 3));

  // Reversed rows, and both axes reversed, viewed and copied.
  Tensor both = fwd.as_strided({2, 3}, {-3, -1}, 5);
  EXPECT_EQ(Values(both), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  Tensor dst = Tensor::Zeros({2, 3}, DType::kFloat32);
  dst.copy_from(both);
  EXPECT_EQ(Values(dst), (std::vector<float>{5, 4, 3, 2, 1, 0}));

  // copy_from into a negative-stride destination writes the foreign buffer.
  rev.copy_from(Arange({6}));
  EXPECT_EQ(buf[0], 5.f);
  EXPECT_EQ(buf[5], 0.f);
}

TEST(TensorEdgeTest, ReadOnly) {
  Tensor t = Arange({2, 3});
  Tensor ro = t.with_read_only(true);
  EXPECT_TRUE(ro.read_only());
  EXPECT_FALSE(t.read_only());
  EXPECT_EQ(ro.data(), t.data());
  std::string msg = EXPECT_TB_ERROR(
      kBufferError, "cannot write to a read-only tensor of shape [2, 3] (float32); its",
      ro.mutable_data());
  EXPECT_NE(msg.find("read-only"), std::string::npos) << msg;
  try {
    ro.mutable_data();
    FAIL() << "mutable_data() on a read-only tensor did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBufferError);
  }
  // Views inherit the flag.
  EXPECT_TRUE(ro.transpose(0, 1).read_only());
  EXPECT_TRUE(ro.slice(1, 0, 2).read_only());
  EXPECT_TRUE(ro.select(0, 1).read_only());
  EXPECT_TRUE(ro.view({6}).read_only());
  EXPECT_TB_ERROR(kBufferError,
                  "cannot write to a read-only tensor of shape [3] (float32); its source",
                  ro.select(0, 1).mutable_data());
  // Contiguous of a contiguous read-only tensor is the same read-only tensor.
  EXPECT_TRUE(ro.contiguous().read_only());
  EXPECT_FALSE(ro.transpose(0, 1).contiguous().read_only());
  EXPECT_EQ(ro.with_read_only(false).mutable_data(), t.data());
}

// Element counts that fit in int64 but whose bytes do not are refused (the product would
// overflow), for new tensors and for the size of a broadcast view.
TEST(TensorEdgeTest, ByteCountsPastInt64AreValueErrors) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_TB_ERROR(kValueError, "a tensor of shape [9223372036854775807] and dtype float32 has",
                  Tensor::Empty({big}, DType::kFloat32));
  EXPECT_TB_ERROR(kValueError, "has more than 2^60 bytes", Tensor::Zeros({big / 2}, DType::kInt64));
  Tensor one = Tensor::Zeros({1}, DType::kFloat64);
  EXPECT_TB_ERROR(kValueError, "has more than 2^60 bytes", one.expand({big}).nbytes());
}

TEST(TensorEdgeTest, IndexErrorsForBadDims) {
  Tensor t = Arange({2, 3});
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[&] { t.size(2); }, "size: dimension 2 out of range for a tensor of 2 dimensions"},
      {[&] { t.size(-3); }, "size: dimension -3 out of range for a tensor of 2 dimensions"},
      {[&] { t.stride(5); }, "stride: dimension 5 out of range for a tensor of 2 dimensions"},
      {[&] { t.slice(-3, 0, 1); }, "slice: dimension -3 out of range for a tensor of 2"},
      {[&] { t.select(2, 0); }, "select: dimension 2 out of range for a tensor of 2"},
      {[&] { t.transpose(0, 2); }, "transpose: dimension 2 out of range for a tensor of 2"},
      {[&] { t.unsqueeze(4); }, "unsqueeze: dimension 4 out of range for a tensor of 3"},
      {[&] { t.squeeze(-3); }, "squeeze: dimension -3 out of range for a tensor of 2"},
      {[&] { t.diagonal(0, 0, -3); }, "diagonal: dimension -3 out of range for a tensor of 2"},
  };
  for (const auto& [fn, message] : cases) ErrorOf(fn, ErrorKind::kIndexError, message);
}

TEST(TensorEdgeTest, SubByteViewsAreNotImplemented) {
  Tensor t = Tensor::Zeros({4}, DType::kFloat4_e2m1fn);
  EXPECT_TB_ERROR(kNotImplementedError,
                  "slice: views of the packed sub-byte dtype float4_e2m1fn are not",
                  t.slice(0, 0, 2));
  EXPECT_TB_ERROR(kNotImplementedError,
                  "view: views of the packed sub-byte dtype float4_e2m1fn are not supported",
                  t.view({2, 2}));
  Tensor c = t.clone();  // contiguous packed clone is fine
  EXPECT_EQ(c.nbytes(), 2);
  EXPECT_NE(c.data(), t.data());
}

TEST(TensorEdgeTest, ThirtyTwoDimensions) {
  std::vector<int64_t> shape(32, 1);
  shape[0] = 2;
  shape[15] = 3;
  shape[31] = 2;
  Tensor t = Arange(shape);
  EXPECT_EQ(t.ndim(), 32);
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.stride(0), 6);
  EXPECT_EQ(t.stride(15), 2);
  EXPECT_EQ(t.stride(31), 1);
  EXPECT_TRUE(t.is_contiguous());

  Tensor copy = t;  // Dims on the heap are copied
  EXPECT_EQ(copy.shape(), t.shape());
  EXPECT_NE(copy.shape().data(), t.shape().data());
  Tensor moved = std::move(copy);
  EXPECT_EQ(moved.shape(), t.shape());

  Tensor tr = t.transpose(0, 31);
  EXPECT_EQ(tr.size(0), 2);
  EXPECT_EQ(tr.stride(0), 1);
  EXPECT_EQ(tr.stride(31), 6);
  EXPECT_FALSE(tr.is_contiguous());

  Dims rev(32);
  for (int64_t i = 0; i < 32; ++i) rev[i] = 31 - i;
  Tensor p = t.permute(rev);
  EXPECT_EQ(p.size(0), 2);
  EXPECT_EQ(p.size(16), 3);
  EXPECT_EQ(p.size(31), 2);

  Tensor sq = t.squeeze();
  EXPECT_EQ(Vec(sq.shape()), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(Values(sq), Values(t));
  Tensor flat = t.view({12});
  EXPECT_EQ(flat.data(), t.data());
  Tensor back = flat.view(shape);
  EXPECT_EQ(back.ndim(), 32);
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(back.strides(), t.strides());

  Tensor c = tr.contiguous();
  EXPECT_EQ(c.ndim(), 32);
  EXPECT_EQ(Values(c), Values(tr));
  EXPECT_EQ(t.unsqueeze(32).ndim(), 33);
  EXPECT_EQ(t.select(15, 1).ndim(), 31);
  EXPECT_EQ(*t.select(15, 2).select(0, 1).select(-1, 1).data_as<float>(), 11.f);
}

}  // namespace
}  // namespace tb
