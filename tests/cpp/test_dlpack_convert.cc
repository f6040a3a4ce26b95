// Tests for interop/dlpack_convert.h: import of hand-built managed tensors (versioned and
// legacy), every validation rule, the dtype mapping, and export.
#include "interop/dlpack_convert.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/cpp/test_util.h"

namespace tb {
namespace {

// ---- a producer with a counting deleter ------------------------------------------------------

// How many times any producer deleter ran (reset by the fixture).
int g_deleted = 0;

// What a producer hands out: the managed struct plus the arrays it points into. Allocated
// on the heap and freed by its deleter, as a real producer's would be, so that a use after
// the deleter ran shows up under AddressSanitizer.
template <typename Managed>
struct Producer {
  Managed managed{};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::vector<unsigned char> bytes;
};

template <typename Managed>
void CountingDeleter(Managed* self) {
  ++g_deleted;
  delete static_cast<Producer<Managed>*>(self->manager_ctx);
}

struct Spec {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: null strides
  DLDataType dtype{kDLFloat, 32, 1};
  size_t nbytes = 0;  // buffer size; 0: numel * element bytes
  uint64_t byte_offset = 0;
  bool null_data = false;
  DLDevice device{kDLCPU, 0};
};

template <typename Managed>
Producer<Managed>* MakeProducer(const Spec& spec) {
  auto* p = new Producer<Managed>();
  p->shape = spec.shape;
  p->strides = spec.strides;
  size_t nbytes = spec.nbytes;
  if (nbytes == 0) {
    int64_t numel = 1;
    for (int64_t s : spec.shape) numel *= s;
    nbytes = static_cast<size_t>(numel * spec.dtype.bits / 8);
  }
  p->bytes.resize(nbytes);
  DLTensor& dl = p->managed.dl_tensor;
  dl.data = spec.null_data ? nullptr : p->bytes.data();
  dl.device = spec.device;
  dl.ndim = static_cast<int32_t>(spec.shape.size());
  dl.dtype = spec.dtype;
  dl.shape = p->shape.data();
  dl.strides = spec.strides.empty() ? nullptr : p->strides.data();
  dl.byte_offset = spec.byte_offset;
  p->managed.manager_ctx = p;
  p->managed.deleter = &CountingDeleter<Managed>;
  return p;
}

Producer<DLManagedTensorVersioned>* MakeVersioned(const Spec& spec, uint64_t flags = 0) {
  auto* p = MakeProducer<DLManagedTensorVersioned>(spec);
  p->managed.version = DLPackVersion{TB_DLPACK_MAJOR_VERSION, TB_DLPACK_MINOR_VERSION};
  p->managed.flags = flags;
  return p;
}

Producer<DLManagedTensor>* MakeLegacy(const Spec& spec) {
  return MakeProducer<DLManagedTensor>(spec);
}

// Fills a producer's buffer with float32 0, 1, 2, ...
template <typename P>
float* FillFloats(P* p) {
  auto* f = reinterpret_cast<float*>(p->bytes.data());
  for (size_t i = 0; i < p->bytes.size() / sizeof(float); ++i) f[i] = static_cast<float>(i);
  return f;
}

std::vector<int64_t> Vec(IntArrayRef r) { return r.vec(); }

// The float32 elements of `t` in row-major order of its shape.
std::vector<float> Values(const Tensor& t) { return testing::Values<float>(t); }

Tensor Arange(IntArrayRef shape) {
  Tensor t = Tensor::Empty(shape, DType::kFloat32);
  auto* p = static_cast<float*>(t.mutable_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

class DLPackTest : public ::testing::Test {
 protected:
  void SetUp() override { g_deleted = 0; }
};

// ---- import: ownership -----------------------------------------------------------------------

TEST_F(DLPackTest, VersionedImportDescribesTheTensor) {
  auto* p = MakeVersioned({{2, 3}, {3, 1}});
  float* data = FillFloats(p);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.data(), static_cast<void*>(data));
  EXPECT_EQ(Vec(t.shape()), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Vec(t.strides()), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_FALSE(t.read_only());
  EXPECT_TRUE(t.storage()->is_foreign());
  EXPECT_EQ(t.storage()->data(), static_cast<void*>(data));
  EXPECT_EQ(t.storage()->nbytes(), 24u);
  EXPECT_EQ(Values(t), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // Writable: writes reach the producer's memory.
  static_cast<float*>(t.mutable_data())[4] = 40.f;
  EXPECT_EQ(data[4], 40.f);
  t = Tensor();
  EXPECT_EQ(g_deleted, 1);
}

TEST_F(DLPackTest, VersionedDeleterRunsOnceAfterTheLastView) {
  auto* p = MakeVersioned({{2, 3}, {}});
  FillFloats(p);
  Tensor t = ImportDLPack(&p->managed);
  Tensor tr = t.transpose(0, 1);
  Tensor row = t.select(0, 1);
  Tensor copy = t;
  t = Tensor();
  EXPECT_EQ(g_deleted, 0);
  EXPECT_EQ(Values(row), (std::vector<float>{3, 4, 5}));
  copy = Tensor();
  tr = Tensor();
  EXPECT_EQ(g_deleted, 0);
  EXPECT_EQ(Values(row), (std::vector<float>{3, 4, 5}));
  row = Tensor();
  EXPECT_EQ(g_deleted, 1);
}

TEST_F(DLPackTest, LegacyDeleterRunsOnceAfterTheLastView) {
  auto* p = MakeLegacy({{4}, {1}});
  float* data = FillFloats(p);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.data(), static_cast<void*>(data));
  EXPECT_FALSE(t.read_only());  // legacy tensors have no flags
  Tensor view = t.slice(0, 1, 3);
  t = Tensor();
  EXPECT_EQ(g_deleted, 0);
  EXPECT_EQ(Values(view), (std::vector<float>{1, 2}));
  view = Tensor();
  EXPECT_EQ(g_deleted, 1);
}

TEST_F(DLPackTest, NullDeleterIsAllowed) {
  auto* p = MakeVersioned({{2}, {}});
  p->managed.deleter = nullptr;
  { Tensor t = ImportDLPack(&p->managed); }
  EXPECT_EQ(g_deleted, 0);
  delete p;
}

// ---- import: validation ----------------------------------------------------------------------

TEST_F(DLPackTest, MajorVersion2IsRefusedAndDeletedWithoutReadingTheTensor) {
  auto* p = MakeVersioned({{2, 3}, {}});
  p->managed.version = DLPackVersion{2, 0};
  p->managed.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;  // garbage, as far as v1 goes
  // The layout after the deleter is unknown for another major version: garbage that would
  // crash (or fail validation differently) if it were read.
  std::memset(&p->managed.dl_tensor, 0xAB, sizeof(DLTensor));
  std::string msg = EXPECT_TB_ERROR(kBufferError, "DLPack version 2.0 is not supported",
                                    ImportDLPack(&p->managed));
  EXPECT_NE(msg.find("2.0"), std::string::npos) << msg;
  EXPECT_EQ(g_deleted, 1);
}

TEST_F(DLPackTest, MajorVersion0IsRefused) {
  auto* p = MakeVersioned({{2}, {}});
  p->managed.version = DLPackVersion{0, 8};
  EXPECT_TB_ERROR(kBufferError, "DLPack version 0.8 is not supported", ImportDLPack(&p->managed));
  EXPECT_EQ(g_deleted, 1);
}

TEST_F(DLPackTest, NewerMinorVersionIsAccepted) {
  auto* p = MakeVersioned({{2}, {}});
  p->managed.version = DLPackVersion{1, 99};
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.numel(), 2);
  t = Tensor();
  EXPECT_EQ(g_deleted, 1);
}

TEST_F(DLPackTest, UnknownDTypeCodeIsRefusedAndDeleted) {
  Spec spec{{2, 3}, {}};
  spec.dtype = DLDataType{99, 32, 1};
  auto* p = MakeVersioned(spec);
  std::string msg =
      EXPECT_TB_ERROR(kBufferError, "DLPack dtype (code=99, bits=32, lanes=1) is not supported",
                      ImportDLPack(&p->managed));
  EXPECT_NE(msg.find("code=99"), std::string::npos) << msg;
  EXPECT_EQ(g_deleted, 1);

  spec.dtype = DLDataType{kDLOpaqueHandle, 64, 1};
  auto* q = MakeLegacy(spec);
  EXPECT_TB_ERROR(kBufferError, "DLPack dtype (code=3, bits=64, lanes=1) is not supported",
                  ImportDLPack(&q->managed));
  EXPECT_EQ(g_deleted, 2);

  spec.dtype = DLDataType{kDLFloat, 24, 1};  // a known code with unknown bits
  auto* r = MakeVersioned(spec);
  EXPECT_TB_ERROR(kBufferError,
                  "DLPack dtype (code=2, bits=24, lanes=1) is not supported (lanes must be",
                  ImportDLPack(&r->managed));
  EXPECT_EQ(g_deleted, 3);
}

TEST_F(DLPackTest, LanesOtherThanOneAreRefused) {
  Spec spec{{4}, {}};
  spec.dtype = DLDataType{kDLFloat, 32, 4};
  auto* p = MakeVersioned(spec);
  std::string msg =
      EXPECT_TB_ERROR(kBufferError, "DLPack dtype (code=2, bits=32, lanes=4) is not supported",
                      ImportDLPack(&p->managed));
  EXPECT_NE(msg.find("lanes=4"), std::string::npos) << msg;
  EXPECT_EQ(g_deleted, 1);
  spec.dtype = DLDataType{kDLFloat, 32, 0};
  auto* q = MakeLegacy(spec);
  EXPECT_TB_ERROR(kBufferError, "DLPack dtype (code=2, bits=32, lanes=0) is not supported",
                  ImportDLPack(&q->managed));
  EXPECT_EQ(g_deleted, 2);
}

TEST_F(DLPackTest, NullStridesMeanCContiguous) {
  auto* p = MakeVersioned({{2, 3, 4}, {}});
  FillFloats(p);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(Vec(t.strides()), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(Values(t.select(1, 2).select(0, 1)), (std::vector<float>{20, 21, 22, 23}));
}

TEST_F(DLPackTest, NegativeStridesAreAccepted) {
  // A [2, 3] view with its rows reversed: the first element is row 1 of the buffer.
  Spec spec{{2, 3}, {-3, 1}};
  spec.byte_offset = 3 * sizeof(float);
  auto* p = MakeVersioned(spec);
  float* data = FillFloats(p);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.data(), static_cast<void*>(data + 3));
  EXPECT_EQ(Vec(t.strides()), (std::vector<int64_t>{-3, 1}));
  EXPECT_EQ(Values(t), (std::vector<float>{3, 4, 5, 0, 1, 2}));
  // The storage covers exactly the bytes the view reaches.
  EXPECT_EQ(t.storage()->data(), static_cast<void*>(data));
  EXPECT_EQ(t.storage()->nbytes(), 24u);
  EXPECT_EQ(Values(t.contiguous()), (std::vector<float>{3, 4, 5, 0, 1, 2}));

  // 1-D reversed.
  Spec rev{{6}, {-1}};
  rev.byte_offset = 5 * sizeof(float);
  auto* q = MakeLegacy(rev);
  FillFloats(q);
  Tensor r = ImportDLPack(&q->managed);
  EXPECT_EQ(Values(r), (std::vector<float>{5, 4, 3, 2, 1, 0}));
}

TEST_F(DLPackTest, SizeZeroWithNullDataIsAccepted) {
  Spec spec{{0, 3}, {}};
  spec.null_data = true;
  auto* p = MakeVersioned(spec);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.data(), nullptr);
  EXPECT_EQ(Vec(t.shape()), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(t.clone().numel(), 0);
  EXPECT_EQ(g_deleted, 0);
  t = Tensor();
  EXPECT_EQ(g_deleted, 1);
}

TEST_F(DLPackTest, NullDataWithElementsIsRefused) {
  Spec spec{{2, 3}, {}};
  spec.null_data = true;
  auto* p = MakeVersioned(spec);
  std::string msg =
      EXPECT_TB_ERROR(kBufferError, "DLPack tensor of shape [2, 3] has a null data pointer",
                      ImportDLPack(&p->managed));
  EXPECT_NE(msg.find("null data"), std::string::npos) << msg;
  EXPECT_EQ(g_deleted, 1);
  auto* q = MakeLegacy(spec);
  EXPECT_TB_ERROR(kBufferError, "DLPack tensor of shape [2, 3] has a null data pointer",
                  ImportDLPack(&q->managed));
  EXPECT_EQ(g_deleted, 2);
}

// A byte offset that carries the address past the end of the address space (a producer's
// garbage, or -1 stored in the unsigned field) is refused, for empty and non-empty tensors,
// and so are negative strides that reach below address 0.
TEST_F(DLPackTest, ByteOffsetsWrappingTheAddressSpaceAreRefused) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{4}, std::vector<int64_t>{0}}) {
    Spec spec{shape, {}};
    spec.nbytes = 16;
    spec.byte_offset = UINT64_MAX;
    auto* p = MakeVersioned(spec);
    EXPECT_TB_ERROR(kBufferError, "reaches past the end of the address space",
                    ImportDLPack(&p->managed));
  }
  EXPECT_EQ(g_deleted, 2);
  Spec below{{3}, {-(int64_t{1} << 58)}};  // 2^59 bytes below the first byte
  below.dtype = DLDataType{kDLUInt, 8, 1};
  below.nbytes = 16;
  auto* q = MakeLegacy(below);
  EXPECT_TB_ERROR(kBufferError, "reaches past the end of the address space",
                  ImportDLPack(&q->managed));
  EXPECT_EQ(g_deleted, 3);
}

TEST_F(DLPackTest, MalformedShapesAndDevicesAreRefused) {
  auto* neg_ndim = MakeVersioned({{2}, {}});
  neg_ndim->managed.dl_tensor.ndim = -1;
  EXPECT_TB_ERROR(kBufferError, "DLPack tensor has negative ndim -1",
                  ImportDLPack(&neg_ndim->managed));
  EXPECT_EQ(g_deleted, 1);

  auto* null_shape = MakeVersioned({{2}, {}});
  null_shape->managed.dl_tensor.shape = nullptr;
  EXPECT_TB_ERROR(kBufferError, "DLPack tensor has null shape", ImportDLPack(&null_shape->managed));
  EXPECT_EQ(g_deleted, 2);

  Spec neg_size{{2, -3}, {}};
  neg_size.nbytes = 8;
  auto* p = MakeLegacy(neg_size);
  EXPECT_TB_ERROR(kBufferError, "DLPack tensor has negative size in [2, -3]",
                  ImportDLPack(&p->managed));
  EXPECT_EQ(g_deleted, 3);

  Spec bad_device{{2}, {}};
  bad_device.device = DLDevice{static_cast<DLDeviceType>(5), 0};  // no device 5 in DLPack
  auto* q = MakeVersioned(bad_device);
  EXPECT_TB_ERROR(kBufferError, "DLPack device type 5 is not known", ImportDLPack(&q->managed));
  EXPECT_EQ(g_deleted, 4);

  EXPECT_TB_ERROR(kBufferError, "null DLManagedTensorVersioned",
                  ImportDLPack(static_cast<DLManagedTensorVersioned*>(nullptr)));
  EXPECT_TB_ERROR(kBufferError, "null DLManagedTensor",
                  ImportDLPack(static_cast<DLManagedTensor*>(nullptr)));
  EXPECT_EQ(g_deleted, 4);
}

// The header promises a BufferError for every refused import; a shape whose element count
// overflows int64 comes back as the ValueError of ShapeNumel instead.
TEST_F(DLPackTest, OverflowingShapeIsABufferError) {
  Spec spec{{int64_t{1} << 40, int64_t{1} << 40}, {}};
  spec.nbytes = 16;
  auto* p = MakeVersioned(spec);
  EXPECT_TB_ERROR(kBufferError, "has more than 2^63 elements", ImportDLPack(&p->managed));
  EXPECT_EQ(g_deleted, 1);
}

// Strides whose reach does not fit in int64 (a producer's garbage) are refused, not wrapped:
// the storage extent computed from them would be wrong.
TEST_F(DLPackTest, StridesReachingPastInt64AreABufferError) {
  for (int64_t stride : {int64_t{1} << 62, -(int64_t{1} << 62), INT64_MIN}) {
    Spec spec{{3}, {stride}};
    spec.nbytes = 16;
    auto* p = MakeVersioned(spec);
    EXPECT_TB_ERROR(kBufferError, "reaches past the int64 byte range", ImportDLPack(&p->managed));
  }
  EXPECT_EQ(g_deleted, 3);
  // Without elements the strides reach nothing: accepted.
  Spec empty{{0, 3}, {INT64_MIN, INT64_MAX}};
  empty.nbytes = 4;
  auto* q = MakeVersioned(empty);
  {
    Tensor t = ImportDLPack(&q->managed);
    EXPECT_EQ(t.numel(), 0);
    EXPECT_EQ(t.storage()->nbytes(), 0u);
  }
  EXPECT_EQ(g_deleted, 4);
}

TEST_F(DLPackTest, ReadOnlyFlagMakesAReadOnlyTensor) {
  auto* p = MakeVersioned({{3}, {}}, DLPACK_FLAG_BITMASK_READ_ONLY);
  float* data = FillFloats(p);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_TRUE(t.read_only());
  EXPECT_EQ(t.data(), static_cast<void*>(data));
  EXPECT_TB_ERROR(kBufferError,
                  "cannot write to a read-only tensor of shape [3] (float32); its source",
                  t.mutable_data());
  EXPECT_TRUE(t.slice(0, 1, 3).read_only());
  EXPECT_FALSE(t.clone().read_only());
  EXPECT_EQ(Values(t), (std::vector<float>{0, 1, 2}));
}

TEST_F(DLPackTest, ByteOffsetIsApplied) {
  Spec spec{{3}, {}};
  spec.nbytes = 8 * sizeof(float);
  spec.byte_offset = 2 * sizeof(float);
  auto* p = MakeVersioned(spec);
  float* data = FillFloats(p);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.data(), static_cast<void*>(data + 2));
  EXPECT_EQ(Values(t), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(t.storage()->data(), static_cast<void*>(data + 2));
  EXPECT_EQ(t.storage()->nbytes(), 12u);
}

TEST_F(DLPackTest, OtherDevicesAreWrappedNotCopied) {
  Spec spec{{4}, {}};
  spec.device = DLDevice{kDLCUDA, 1};
  auto* p = MakeVersioned(spec);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.device().type, DeviceType::kCUDA);
  EXPECT_EQ(t.device().index, 1);
  EXPECT_EQ(t.storage()->device(), t.device());
  EXPECT_EQ(t.slice(0, 1, 3).device(), t.device());
  EXPECT_TB_ERROR(kNotImplementedError,
                  "clone: copying memory on device cuda:1 is not supported; tensorbridge",
                  t.clone());
  DLDevice back = DeviceToDLPack(t.device());
  EXPECT_EQ(back.device_type, kDLCUDA);
  EXPECT_EQ(back.device_id, 1);
}

// ---- dtypes ----------------------------------------------------------------------------------

TEST(DLPackDTypeTest, EveryDTypeRoundTrips) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType d = static_cast<DType>(i);
    DLDataType dl = DTypeToDLPack(d);
    EXPECT_EQ(dl.lanes, 1) << DTypeName(d);
    EXPECT_EQ(dl.bits, DTypeBits(d)) << DTypeName(d);
    DType back;
    ASSERT_TRUE(DTypeFromDLPack(dl, &back)) << DTypeName(d);
    EXPECT_EQ(back, d) << DTypeName(d);
  }
}

TEST(DLPackDTypeTest, Codes) {
  struct Case {
    DType dtype;
    int code;
    int bits;
  };
  const Case cases[] = {
      {DType::kBool, 6, 8},
      {DType::kUInt8, 1, 8},
      {DType::kInt8, 0, 8},
      {DType::kInt16, 0, 16},
      {DType::kInt32, 0, 32},
      {DType::kInt64, 0, 64},
      {DType::kUInt16, 1, 16},
      {DType::kUInt32, 1, 32},
      {DType::kUInt64, 1, 64},
      {DType::kFloat16, 2, 16},
      {DType::kBFloat16, 4, 16},
      {DType::kFloat32, 2, 32},
      {DType::kFloat64, 2, 64},
      {DType::kComplex64, 5, 64},
      {DType::kComplex128, 5, 128},
      {DType::kFloat8_e3m4, 7, 8},
      {DType::kFloat8_e4m3, 8, 8},
      {DType::kFloat8_e4m3b11fnuz, 9, 8},
      {DType::kFloat8_e4m3fn, 10, 8},
      {DType::kFloat8_e4m3fnuz, 11, 8},
      {DType::kFloat8_e5m2, 12, 8},
      {DType::kFloat8_e5m2fnuz, 13, 8},
      {DType::kFloat8_e8m0fnu, 14, 8},
      {DType::kFloat6_e2m3fn, 15, 6},
      {DType::kFloat6_e3m2fn, 16, 6},
      {DType::kFloat4_e2m1fn, 17, 4},
  };
  static_assert(sizeof(cases) / sizeof(cases[0]) == kNumDTypes, "one case per dtype");
  for (const Case& c : cases) {
    DLDataType dl = DTypeToDLPack(c.dtype);
    EXPECT_EQ(dl.code, c.code) << DTypeName(c.dtype);
    EXPECT_EQ(dl.bits, c.bits) << DTypeName(c.dtype);
    DType got;
    ASSERT_TRUE(DTypeFromDLPack(
        DLDataType{static_cast<uint8_t>(c.code), static_cast<uint8_t>(c.bits), 1}, &got))
        << DTypeName(c.dtype);
    EXPECT_EQ(got, c.dtype);
  }
  DType unused;
  EXPECT_FALSE(DTypeFromDLPack(DLDataType{kDLBool, 1, 1}, &unused));
  EXPECT_FALSE(DTypeFromDLPack(DLDataType{kDLFloat, 8, 1}, &unused));
  EXPECT_FALSE(DTypeFromDLPack(DLDataType{kDLBfloat, 32, 1}, &unused));
  EXPECT_FALSE(DTypeFromDLPack(DLDataType{kDLFloat4_e2m1fn, 8, 1}, &unused));
  EXPECT_FALSE(DTypeFromDLPack(DLDataType{kDLFloat, 32, 2}, &unused));
  EXPECT_FALSE(DTypeFromDLPack(DLDataType{18, 8, 1}, &unused));
}

TEST_F(DLPackTest, StorageOnlyAndBoolDTypesImport) {
  Spec bf{{4}, {}};
  bf.dtype = DLDataType{kDLBfloat, 16, 1};
  auto* p = MakeVersioned(bf);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.dtype(), DType::kBFloat16);
  EXPECT_EQ(t.nbytes(), 8);

  Spec f8{{2, 2}, {}};
  f8.dtype = DLDataType{kDLFloat8_e4m3fn, 8, 1};
  auto* q = MakeVersioned(f8);
  Tensor u = ImportDLPack(&q->managed);
  EXPECT_EQ(u.dtype(), DType::kFloat8_e4m3fn);
  EXPECT_EQ(u.transpose(0, 1).stride(0), 1);  // storage-only types still view

  Spec b{{3}, {}};
  b.dtype = DLDataType{kDLBool, 8, 1};
  auto* r = MakeLegacy(b);
  EXPECT_EQ(ImportDLPack(&r->managed).dtype(), DType::kBool);
}

TEST_F(DLPackTest, PackedSubByteImportsAndPaddedIsRefused) {
  Spec packed{{4}, {}};
  packed.dtype = DLDataType{kDLFloat4_e2m1fn, 4, 1};
  packed.nbytes = 2;
  auto* p = MakeVersioned(packed);
  Tensor t = ImportDLPack(&p->managed);
  EXPECT_EQ(t.dtype(), DType::kFloat4_e2m1fn);
  EXPECT_EQ(t.nbytes(), 2);
  EXPECT_EQ(t.storage()->nbytes(), 2u);
  t = Tensor();
  EXPECT_EQ(g_deleted, 1);

  auto* padded = MakeVersioned(packed, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  std::string msg = EXPECT_TB_ERROR(
      kBufferError, "DLPack tensor of float4_e2m1fn is padded (IS_SUBBYTE_TYPE_PADDED);",
      ImportDLPack(&padded->managed));
  EXPECT_NE(msg.find("PADDED"), std::string::npos) << msg;
  EXPECT_EQ(g_deleted, 2);

  Spec six = packed;
  six.dtype = DLDataType{kDLFloat6_e3m2fn, 6, 1};
  auto* padded6 = MakeVersioned(six, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  EXPECT_TB_ERROR(kBufferError,
                  "DLPack tensor of float6_e3m2fn is padded (IS_SUBBYTE_TYPE_PADDED);",
                  ImportDLPack(&padded6->managed));
  EXPECT_EQ(g_deleted, 3);

  // Strided sub-byte tensors cannot be described in packed storage.
  Spec strided{{2, 2}, {1, 2}};
  strided.dtype = DLDataType{kDLFloat4_e2m1fn, 4, 1};
  strided.nbytes = 2;
  auto* s = MakeVersioned(strided);
  EXPECT_TB_ERROR(kBufferError,
                  "DLPack tensor of packed sub-byte dtype float4_e2m1fn must be compact,",
                  ImportDLPack(&s->managed));
  EXPECT_EQ(g_deleted, 4);

  // The padded flag means nothing for byte-sized types.
  auto* f = MakeVersioned({{2}, {}}, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  EXPECT_EQ(ImportDLPack(&f->managed).numel(), 2);
  EXPECT_EQ(g_deleted, 5);
}

// A size-1 dimension's stride never moves to another element, so a packed sub-byte tensor
// with an arbitrary stride there is still compact (PyTorch's is_contiguous() ignores it too).
// The import compares strides with ContiguousStrides() exactly and refuses it.
TEST_F(DLPackTest, PackedSubByteWithAnySizeOneStrideIsCompact) {
  Spec spec{{1, 4}, {1, 1}};
  spec.dtype = DLDataType{kDLFloat4_e2m1fn, 4, 1};
  spec.nbytes = 2;
  auto* p = MakeVersioned(spec);
  Tensor t;
  try {
    t = ImportDLPack(&p->managed);
  } catch (const Error& e) {
    ADD_FAILURE() << "refused: " << e.message();
  }
  EXPECT_EQ(t.nbytes(), 2);
  t = Tensor();
  EXPECT_EQ(g_deleted, 1);
}

// ---- ImportDLTensor (borrowed) -----------------------------------------------------------------

TEST(DLPackBorrowTest, ImportDLTensorUsesTheOwnerStorage) {
  Tensor owner = Arange({2, 3});
  int64_t shape[2] = {3, 2};
  int64_t strides[2] = {1, 3};
  DLTensor dl{};
  dl.data = owner.data();
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = DLDataType{kDLFloat, 32, 1};
  dl.shape = shape;
  dl.strides = strides;
  Tensor t = ImportDLTensor(dl, owner.storage(), /*read_only=*/true);
  EXPECT_EQ(t.storage(), owner.storage());
  EXPECT_EQ(t.data(), owner.data());
  EXPECT_TRUE(t.read_only());
  EXPECT_EQ(Values(t), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  dl.dtype.lanes = 2;
  EXPECT_TB_ERROR(kBufferError,
                  "DLPack dtype (code=2, bits=32, lanes=2) is not supported (lanes must be",
                  ImportDLTensor(dl, owner.storage(), false));
}

// ---- export ------------------------------------------------------------------------------------

TEST_F(DLPackTest, ExportVersionedHoldsAStorageReference) {
  Tensor t = Arange({2, 3});
  const void* data = t.data();
  DLManagedTensorVersioned* m = ExportDLPackVersioned(t);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->version.major, static_cast<uint32_t>(TB_DLPACK_MAJOR_VERSION));
  EXPECT_EQ(m->version.minor, static_cast<uint32_t>(TB_DLPACK_MINOR_VERSION));
  EXPECT_EQ(m->flags, 0u);
  const DLTensor& dl = m->dl_tensor;
  EXPECT_EQ(dl.data, data);
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.device.device_id, 0);
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  EXPECT_EQ(dl.dtype.bits, 32);
  EXPECT_EQ(dl.dtype.lanes, 1);
  EXPECT_EQ(std::vector<int64_t>(dl.shape, dl.shape + 2), (std::vector<int64_t>{2, 3}));
  ASSERT_NE(dl.strides, nullptr);
  EXPECT_EQ(std::vector<int64_t>(dl.strides, dl.strides + 2), (std::vector<int64_t>{3, 1}));
  ASSERT_NE(m->deleter, nullptr);

  std::weak_ptr<Storage> storage = t.storage();
  t = Tensor();  // the export keeps the memory alive
  EXPECT_FALSE(storage.expired());
  const float* f = static_cast<const float*>(dl.data);
  EXPECT_EQ(f[5], 5.f);
  m->deleter(m);  // frees it
  EXPECT_TRUE(storage.expired());
}

TEST_F(DLPackTest, ExportOfAnImportKeepsTheProducerAlive) {
  auto* p = MakeVersioned({{4}, {}});
  float* data = FillFloats(p);
  Tensor t = ImportDLPack(&p->managed);
  DLManagedTensorVersioned* m = ExportDLPackVersioned(t.slice(0, 1, 4));
  EXPECT_EQ(m->dl_tensor.data, static_cast<void*>(data + 1));
  t = Tensor();
  EXPECT_EQ(g_deleted, 0);  // the export still references the import's storage
  EXPECT_EQ(static_cast<const float*>(m->dl_tensor.data)[2], 3.f);
  m->deleter(m);
  EXPECT_EQ(g_deleted, 1);  // releasing the export released the producer, once

  // Legacy export of a legacy import: the same chain.
  auto* q = MakeLegacy({{2}, {}});
  Tensor u = ImportDLPack(&q->managed);
  DLManagedTensor* lm = ExportDLPackLegacy(u);
  u = Tensor();
  EXPECT_EQ(g_deleted, 1);
  lm->deleter(lm);
  EXPECT_EQ(g_deleted, 2);
}

TEST_F(DLPackTest, ExportGivesSizeOneDimsCompactStrides) {
  Tensor base = Arange({12});
  Tensor t = base.as_strided({3, 1, 4}, {4, 99, 1});
  ASSERT_EQ(t.stride(1), 99);
  DLManagedTensorVersioned* m = ExportDLPackVersioned(t);
  EXPECT_EQ(std::vector<int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 3),
            (std::vector<int64_t>{4, 4, 1}));
  m->deleter(m);

  // Other strides are exported as they are, transposed and negative included.
  Tensor tr = base.view({3, 4}).transpose(0, 1);
  m = ExportDLPackVersioned(tr);
  EXPECT_EQ(std::vector<int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 2),
            (std::vector<int64_t>{1, 4}));
  m->deleter(m);
  Tensor rev = base.as_strided({1, 12}, {7, -1}, 11);
  m = ExportDLPackVersioned(rev);
  EXPECT_EQ(std::vector<int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 2),
            (std::vector<int64_t>{12, -1}));
  EXPECT_EQ(m->dl_tensor.data, static_cast<const void*>(base.data_as<float>() + 11));
  // The source tensor's own strides are untouched.
  EXPECT_EQ(rev.stride(0), 7);
  m->deleter(m);
}

TEST_F(DLPackTest, ExportWithCopySetsIsCopied) {
  Tensor t = Arange({3, 2}).transpose(0, 1);
  DLManagedTensorVersioned* m = ExportDLPackVersioned(t, /*copy=*/true);
  EXPECT_EQ(m->flags, static_cast<uint64_t>(DLPACK_FLAG_BITMASK_IS_COPIED));
  EXPECT_NE(m->dl_tensor.data, t.data());
  EXPECT_EQ(std::vector<int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 2),
            (std::vector<int64_t>{3, 1}));
  const float* f = static_cast<const float*>(m->dl_tensor.data);
  EXPECT_EQ(std::vector<float>(f, f + 6), (std::vector<float>{0, 2, 4, 1, 3, 5}));
  m->deleter(m);

  // A copy of a read-only tensor is the consumer's to write.
  m = ExportDLPackVersioned(Arange({2}).with_read_only(true), /*copy=*/true);
  EXPECT_EQ(m->flags, static_cast<uint64_t>(DLPACK_FLAG_BITMASK_IS_COPIED));
  m->deleter(m);
}

TEST_F(DLPackTest, ReadOnlyExports) {
  Tensor ro = Arange({2}).with_read_only(true);
  DLManagedTensorVersioned* m = ExportDLPackVersioned(ro);
  EXPECT_EQ(m->flags, static_cast<uint64_t>(DLPACK_FLAG_BITMASK_READ_ONLY));
  EXPECT_EQ(m->dl_tensor.data, ro.data());
  m->deleter(m);

  std::string msg = EXPECT_TB_ERROR(
      kBufferError, "a read-only tensor cannot be exported through the legacy DLPack",
      ExportDLPackLegacy(ro));
  EXPECT_NE(msg.find("read-only"), std::string::npos) << msg;
  EXPECT_TB_ERROR(kBufferError, "cannot export an undefined tensor",
                  ExportDLPackVersioned(Tensor()));
}

TEST_F(DLPackTest, ExportLegacy) {
  Tensor t = Arange({2, 2});
  DLManagedTensor* m = ExportDLPackLegacy(t);
  EXPECT_EQ(m->dl_tensor.data, t.data());
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(std::vector<int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 2),
            (std::vector<int64_t>{2, 1}));
  std::weak_ptr<Storage> storage = t.storage();
  t = Tensor();
  EXPECT_FALSE(storage.expired());
  m->deleter(m);
  EXPECT_TRUE(storage.expired());
}

TEST_F(DLPackTest, ImportOfOurOwnExportRoundTrips) {
  Tensor t = Arange({3, 4}).slice(1, 1, 4, 2);  // strided
  Tensor back = ImportDLPack(ExportDLPackVersioned(t));
  EXPECT_EQ(back.data(), t.data());
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(back.strides(), t.strides());
  EXPECT_EQ(back.dtype(), t.dtype());
  EXPECT_FALSE(back.read_only());
  EXPECT_EQ(Values(back), Values(t));

  Tensor ro = Arange({5}).with_read_only(true);
  Tensor ro_back = ImportDLPack(ExportDLPackVersioned(ro));
  EXPECT_EQ(ro_back.data(), ro.data());
  EXPECT_TRUE(ro_back.read_only());

  Tensor legacy_back = ImportDLPack(ExportDLPackLegacy(t));
  EXPECT_EQ(legacy_back.data(), t.data());
  EXPECT_EQ(legacy_back.strides(), t.strides());

  // The round trip keeps the memory alive by itself.
  std::weak_ptr<Storage> storage = t.storage();
  t = Tensor();
  legacy_back = Tensor();
  EXPECT_FALSE(storage.expired());
  EXPECT_EQ(Values(back), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  back = Tensor();
  EXPECT_TRUE(storage.expired());

  // Sub-byte and 0-d tensors too.
  Tensor packed = Tensor::Zeros({5}, DType::kFloat4_e2m1fn);
  Tensor packed_back = ImportDLPack(ExportDLPackVersioned(packed));
  EXPECT_EQ(packed_back.dtype(), DType::kFloat4_e2m1fn);
  EXPECT_EQ(packed_back.nbytes(), 3);
  EXPECT_EQ(packed_back.data(), packed.data());
  Tensor scalar = Arange({4}).select(0, 2);
  Tensor scalar_back = ImportDLPack(ExportDLPackVersioned(scalar));
  EXPECT_EQ(scalar_back.ndim(), 0);
  EXPECT_EQ(*scalar_back.data_as<float>(), 2.f);
}

}  // namespace
}  // namespace tb
