#include "interop/dlpack_convert.h"

#include <cstdint>
#include <utility>

namespace tb {
namespace {

struct DTypeCode {
  DType dtype;
  uint8_t code;
  uint8_t bits;
};

constexpr DTypeCode kDTypeCodes[] = {
    {DType::kBool, kDLBool, 8},
    {DType::kUInt8, kDLUInt, 8},
    {DType::kInt8, kDLInt, 8},
    {DType::kInt16, kDLInt, 16},
    {DType::kInt32, kDLInt, 32},
    {DType::kInt64, kDLInt, 64},
    {DType::kUInt16, kDLUInt, 16},
    {DType::kUInt32, kDLUInt, 32},
    {DType::kUInt64, kDLUInt, 64},
    {DType::kFloat16, kDLFloat, 16},
    {DType::kBFloat16, kDLBfloat, 16},
    {DType::kFloat32, kDLFloat, 32},
    {DType::kFloat64, kDLFloat, 64},
    {DType::kComplex64, kDLComplex, 64},
    {DType::kComplex128, kDLComplex, 128},
    {DType::kFloat8_e3m4, kDLFloat8_e3m4, 8},
    {DType::kFloat8_e4m3, kDLFloat8_e4m3, 8},
    {DType::kFloat8_e4m3b11fnuz, kDLFloat8_e4m3b11fnuz, 8},
    {DType::kFloat8_e4m3fn, kDLFloat8_e4m3fn, 8},
    {DType::kFloat8_e4m3fnuz, kDLFloat8_e4m3fnuz, 8},
    {DType::kFloat8_e5m2, kDLFloat8_e5m2, 8},
    {DType::kFloat8_e5m2fnuz, kDLFloat8_e5m2fnuz, 8},
    {DType::kFloat8_e8m0fnu, kDLFloat8_e8m0fnu, 8},
    {DType::kFloat6_e2m3fn, kDLFloat6_e2m3fn, 6},
    {DType::kFloat6_e3m2fn, kDLFloat6_e3m2fn, 6},
    {DType::kFloat4_e2m1fn, kDLFloat4_e2m1fn, 4},
};

// kDTypeCodes as a direct lookup, [code][BitsIndex(bits)]: the index of the entry, or -1.
constexpr int kNumCodes = 18;
constexpr int kNumBits = 7;

constexpr int BitsIndex(int bits) {
  switch (bits) {
    case 4: return 0;
    case 6: return 1;
    case 8: return 2;
    case 16: return 3;
    case 32: return 4;
    case 64: return 5;
    case 128: return 6;
    default: return -1;
  }
}

struct DTypeTable {
  int8_t entry[kNumCodes][kNumBits];
};

constexpr DTypeTable MakeDTypeTable() {
  DTypeTable t{};
  for (auto& row : t.entry) {
    for (auto& e : row) e = -1;
  }
  for (size_t i = 0; i < sizeof(kDTypeCodes) / sizeof(kDTypeCodes[0]); ++i) {
    t.entry[kDTypeCodes[i].code][BitsIndex(kDTypeCodes[i].bits)] = static_cast<int8_t>(i);
  }
  return t;
}

constexpr DTypeTable kDTypeTable = MakeDTypeTable();

std::string DLDataTypeString(DLDataType dl) {
  return "(code=" + std::to_string(dl.code) + ", bits=" + std::to_string(dl.bits) +
         ", lanes=" + std::to_string(dl.lanes) + ")";
}

// The DLPack side of an imported tensor's ownership, one template for both managed structs:
// the storage's release function calls the producer's deleter, once.
template <typename Managed>
void ReleaseManaged(void* context) noexcept {
  auto* managed = static_cast<Managed*>(context);
  if (managed->deleter != nullptr) managed->deleter(managed);
}

// Calls the deleter when an import is refused before a Storage took ownership.
template <typename Managed>
struct DeleteOnFailure {
  Managed* managed;
  ~DeleteOnFailure() {
    if (managed != nullptr) ReleaseManaged<Managed>(managed);
  }
};

// Validates `dl` and describes it as a Tensor over `storage` (made by `make_storage` from the
// data base and the byte extent, once the tensor is known to be valid). This runs on every
// import: two passes over the dimensions, no temporaries on the heap.
template <typename MakeStorage>
Tensor DescribeDLTensor(const DLTensor& dl, bool read_only, MakeStorage&& make_storage) {
  if (dl.ndim < 0) TB_THROW(BufferError) << "DLPack tensor has negative ndim " << dl.ndim;
  DType dtype;
  if (!DTypeFromDLPack(dl.dtype, &dtype)) {
    TB_THROW(BufferError) << "DLPack dtype " << DLDataTypeString(dl.dtype)
                          << " is not supported (lanes must be 1; known codes 0-17)";
  }
  if (!IsKnownDeviceType(static_cast<int32_t>(dl.device.device_type))) {
    TB_THROW(BufferError) << "DLPack device type " << static_cast<int>(dl.device.device_type)
                          << " is not known";
  }
  const size_t nd = static_cast<size_t>(dl.ndim);
  if (nd > 0 && dl.shape == nullptr) TB_THROW(BufferError) << "DLPack tensor has null shape";
  Dims shape(IntArrayRef(dl.shape, nd));
  Dims strides(nd);
  int64_t numel = 1;
  bool negative = false, count_overflow = false;
  for (size_t i = 0; i < nd; ++i) {  // left to right, as ShapeNumel counts
    negative |= shape[i] < 0;
    count_overflow |= __builtin_mul_overflow(numel, shape[i], &numel);
  }
  int64_t expected = 1;      // the compact stride of dimension i
  int64_t elo = 0, ehi = 0;  // element offsets of the lowest and highest elements reached
  bool compact = true, extent_overflow = false;
  for (size_t i = nd; i-- > 0;) {
    const int64_t size = shape[i];
    const int64_t stride = dl.strides != nullptr ? dl.strides[i] : expected;
    strides[i] = stride;
    compact &= size == 1 || stride == expected;
    if (size > 1) {
      int64_t reach;  // (size - 1) * stride: what this dimension adds to the extent
      extent_overflow |= __builtin_mul_overflow(size - 1, stride, &reach);
      int64_t& end = reach < 0 ? elo : ehi;
      extent_overflow |= __builtin_add_overflow(end, reach, &end);
      // Wraps only when the element count overflows or is zero: refused, or unused.
      (void)__builtin_mul_overflow(expected, size, &expected);
    }
  }
  if (negative) {
    TB_THROW(BufferError) << "DLPack tensor has negative size in " << ShapeString(shape);
  }
  if (count_overflow) {
    TB_THROW(BufferError) << "DLPack tensor refused: shape " << ShapeString(shape)
                          << " has more than 2^63 elements";
  }
  if (IsSubByte(dtype) && numel > 1 && !compact) {
    TB_THROW(BufferError) << "DLPack tensor of packed sub-byte dtype " << DTypeName(dtype)
                          << " must be compact, got strides " << ShapeString(strides);
  }
  if (numel > 0 && dl.data == nullptr) {
    TB_THROW(BufferError) << "DLPack tensor of shape " << ShapeString(shape)
                          << " has a null data pointer";
  }
  // The byte range [lo, hi) that the view touches, relative to its first element; empty when
  // there are no elements.
  const int64_t bits = DTypeBits(dtype);
  int64_t lo = 0, hi = 0;
  if (numel > 0) {
    extent_overflow |= __builtin_mul_overflow(elo, bits, &lo) ||
                       __builtin_add_overflow(ehi, 1, &hi) ||
                       __builtin_mul_overflow(hi, bits, &hi) || __builtin_add_overflow(hi, 7, &hi);
    if (extent_overflow) {
      TB_THROW(BufferError) << "DLPack tensor of shape " << ShapeString(shape) << " and strides "
                            << ShapeString(strides) << " reaches past the int64 byte range";
    }
    lo /= 8;
    hi /= 8;
  }
  // The first element's address and the range the view reaches, computed on integers: a byte
  // offset or extent that wraps around the address space is refused, not turned into a
  // pointer (that arithmetic would be undefined).
  const auto base = reinterpret_cast<uintptr_t>(dl.data);
  uintptr_t first_addr = 0, lo_addr = 0, hi_addr = 0;
  bool wraps = __builtin_add_overflow(base, dl.byte_offset, &first_addr);
  if (numel > 0) {
    // lo <= 0 <= hi; the unsigned negation is exact even for INT64_MIN.
    wraps |=
        __builtin_sub_overflow(first_addr, uintptr_t{0} - static_cast<uintptr_t>(lo), &lo_addr) ||
        __builtin_add_overflow(first_addr, static_cast<uintptr_t>(hi), &hi_addr);
  }
  if (wraps) {
    TB_THROW(BufferError) << "DLPack tensor of shape " << ShapeString(shape) << " at address "
                          << base << " with byte_offset " << dl.byte_offset
                          << " reaches past the end of the address space";
  }
  char* first = numel == 0 && dl.data == nullptr ? nullptr : reinterpret_cast<char*>(first_addr);
  Device device{static_cast<DeviceType>(dl.device.device_type), dl.device.device_id};
  std::shared_ptr<Storage> storage =
      make_storage(numel > 0 ? reinterpret_cast<char*>(lo_addr) : first,
                   static_cast<size_t>(hi_addr - lo_addr), device);
  return Tensor(std::move(storage), first, std::move(shape), std::move(strides), dtype, device,
                read_only);
}

template <typename Managed>
Tensor ImportManaged(Managed* managed, bool read_only) {
  DeleteOnFailure<Managed> guard{managed};
  Tensor t = DescribeDLTensor(
      managed->dl_tensor, read_only, [&](void* base, size_t nbytes, Device device) {
        auto s = Storage::Wrap(base, nbytes, device, managed, &ReleaseManaged<Managed>);
        guard.managed = nullptr;  // the storage owns it now
        return s;
      });
  return t;
}

// What an exported managed tensor keeps alive: a reference to the tensor's storage, plus the
// shape and strides arrays the DLTensor points into. One allocation.
template <typename Managed>
struct ExportHolder {
  Managed managed{};
  std::shared_ptr<Storage> storage;
  Dims shape;
  Dims strides;
};

template <typename Managed>
void DeleteExport(Managed* self) {
  delete static_cast<ExportHolder<Managed>*>(self->manager_ctx);
}

template <typename Managed>
ExportHolder<Managed>* MakeExport(const Tensor& tensor) {
  TB_CHECK(tensor.defined(), BufferError) << "cannot export an undefined tensor";
  auto* h = new ExportHolder<Managed>();
  h->storage = tensor.storage();
  h->shape = tensor.shape();
  h->strides = tensor.strides();
  // Size-1 dimensions get the stride a compact layout would give them: their stride is
  // meaningless, and consumers that test contiguity by comparing strides trip on odd ones.
  int64_t compact = 1;
  for (size_t i = h->shape.size(); i-- > 0;) {
    const int64_t size = h->shape[i];
    if (size == 1) h->strides[i] = compact;
    // Wraps only for tensors without elements, whose strides say nothing.
    if (size > 1) (void)__builtin_mul_overflow(compact, size, &compact);
  }
  DLTensor& dl = h->managed.dl_tensor;
  dl.data = tensor.data();
  dl.device = DeviceToDLPack(tensor.device());
  dl.ndim = static_cast<int32_t>(tensor.ndim());
  dl.dtype = DTypeToDLPack(tensor.dtype());
  dl.shape = h->shape.data();
  dl.strides = h->strides.data();
  dl.byte_offset = 0;
  h->managed.manager_ctx = h;
  h->managed.deleter = &DeleteExport<Managed>;
  return h;
}

}  // namespace

bool DTypeFromDLPack(DLDataType dl, DType* out) {
  const int bits = BitsIndex(dl.bits);
  if (dl.lanes != 1 || dl.code >= kNumCodes || bits < 0) return false;
  const int i = kDTypeTable.entry[dl.code][bits];
  if (i < 0) return false;
  *out = kDTypeCodes[i].dtype;
  return true;
}

DLDataType DTypeToDLPack(DType dtype) {
  for (const auto& e : kDTypeCodes) {
    if (e.dtype == dtype) return DLDataType{e.code, e.bits, 1};
  }
  TB_ICHECK(false) << "dtype without a DLPack code";
  return {};
}

DLDevice DeviceToDLPack(Device device) {
  return DLDevice{static_cast<DLDeviceType>(device.type), device.index};
}

Tensor ImportDLPack(DLManagedTensorVersioned* managed) {
  TB_CHECK(managed != nullptr, BufferError) << "null DLManagedTensorVersioned";
  if (managed->version.major != TB_DLPACK_MAJOR_VERSION) {
    // Only the deleter may be touched: the rest of the layout is unknown.
    uint32_t major = managed->version.major, minor = managed->version.minor;
    ReleaseManaged<DLManagedTensorVersioned>(managed);
    TB_THROW(BufferError) << "DLPack version " << major << "." << minor
                          << " is not supported (tensorbridge reads major version "
                          << TB_DLPACK_MAJOR_VERSION << ")";
  }
  if ((managed->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0) {
    DType dtype;
    if (DTypeFromDLPack(managed->dl_tensor.dtype, &dtype) && IsSubByte(dtype)) {
      ReleaseManaged<DLManagedTensorVersioned>(managed);
      TB_THROW(BufferError) << "DLPack tensor of " << DTypeName(dtype)
                            << " is padded (IS_SUBBYTE_TYPE_PADDED); tensorbridge stores "
                               "sub-byte types packed only";
    }
  }
  bool read_only = (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return ImportManaged(managed, read_only);
}

Tensor ImportDLPack(DLManagedTensor* managed) {
  TB_CHECK(managed != nullptr, BufferError) << "null DLManagedTensor";
  return ImportManaged(managed, /*read_only=*/false);
}

Tensor ImportDLTensor(const DLTensor& tensor, std::shared_ptr<Storage> owner, bool read_only) {
  return DescribeDLTensor(tensor, read_only,
                          [&](void*, size_t, Device) { return std::move(owner); });
}

DLManagedTensorVersioned* ExportDLPackVersioned(const Tensor& tensor, bool copy) {
  // Not `copy ? tensor.clone() : tensor`: that copies `tensor` into a temporary.
  auto* h = copy ? MakeExport<DLManagedTensorVersioned>(tensor.clone())
                 : MakeExport<DLManagedTensorVersioned>(tensor);
  h->managed.version = DLPackVersion{TB_DLPACK_MAJOR_VERSION, TB_DLPACK_MINOR_VERSION};
  h->managed.flags = 0;
  if (copy) h->managed.flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  if (tensor.read_only() && !copy) h->managed.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  return &h->managed;
}

DLManagedTensor* ExportDLPackLegacy(const Tensor& tensor, bool immutable_consumer) {
  if (tensor.read_only() && !immutable_consumer) {
    TB_THROW(BufferError) << "a read-only tensor cannot be exported through the legacy DLPack "
                             "protocol, which cannot mark it read-only; ask for "
                             "max_version=(1, 0) or newer, or copy=True";
  }
  return &MakeExport<DLManagedTensor>(tensor)->managed;
}

}  // namespace tb
