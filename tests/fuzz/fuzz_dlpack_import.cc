// libFuzzer target for the DLPack importer (interop/dlpack_convert.cc): the input bytes become a
// versioned or legacy managed tensor (version, flags, ndim, shape, strides, dtype, device, byte
// offset, null pointers) over a 4 KiB buffer. Every input must end in a tb::Error or in a tensor
// that describes exactly what was given; the deleter runs exactly once either way; an accepted
// layout that lies inside the buffer is read element by element (AddressSanitizer checks the
// reads). Built by tests/fuzz/CMakeLists.txt with clang (-fsanitize=fuzzer,address,undefined).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "bridge/error.h"
#include "interop/dlpack_convert.h"

namespace {

constexpr size_t kBufferBytes = 4096;
constexpr int kMaxDims = 8;

// Reads the fuzzer's bytes as fields, zero once they run out.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  template <typename T>
  T Get() {
    T v{};
    const size_t n = std::min(sizeof(T), static_cast<size_t>(end_ - p_));
    std::memcpy(&v, p_, n);
    p_ += n;
    return v;
  }
  // A small number most of the time, any value sometimes: valid layouts stay common.
  int64_t Dim(int64_t small) {
    const uint8_t mode = Get<uint8_t>();
    if (mode < 224) return static_cast<int64_t>(mode % small) - (mode >= 200 ? small / 2 : 0);
    return Get<int64_t>();
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

struct Fields {
  bool versioned;
  DLPackVersion version;
  uint64_t flags;
  int32_t ndim;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
  bool null_shape, null_strides, null_data, null_deleter;
  DLDataType dtype;
  DLDevice device;
  uint64_t byte_offset;
  size_t base;
};

int g_deleted = 0;
template <typename Managed>
void CountingDeleter(Managed*) {
  ++g_deleted;
}

// A broken promise of the importer: reported with the reason, then a crash libFuzzer records.
[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_dlpack_import: %s\n", what);
  std::abort();
}

template <typename Managed>
void Run(const Fields& f, unsigned char* buffer) {
  Managed m{};
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    m.version = f.version;
    m.flags = f.flags;
  }
  m.deleter = f.null_deleter ? nullptr : &CountingDeleter<Managed>;
  DLTensor& t = m.dl_tensor;
  t.data = f.null_data ? nullptr : buffer + f.base;
  t.device = f.device;
  t.ndim = f.ndim;
  t.dtype = f.dtype;
  t.shape = f.null_shape ? nullptr : const_cast<int64_t*>(f.shape);
  t.strides = f.null_strides ? nullptr : const_cast<int64_t*>(f.strides);
  t.byte_offset = f.byte_offset;
  g_deleted = 0;
  const int want_deleted = f.null_deleter ? 0 : 1;
  {
    tb::Tensor out;
    try {
      out = tb::ImportDLPack(&m);
    } catch (const tb::Error&) {
      if (g_deleted != want_deleted) Fail("refused, and the deleter did not run once");
      return;
    }
    if (g_deleted != 0) Fail("accepted, and the deleter already ran");
    if (out.ndim() != f.ndim) Fail("ndim");
    int64_t numel = 1;
    bool huge = false;
    for (int i = 0; i < f.ndim; ++i) {
      if (out.size(i) != f.shape[i]) Fail("shape");
      if (!f.null_strides && f.shape[i] > 1 && out.stride(i) != f.strides[i]) Fail("strides");
      huge |= __builtin_mul_overflow(numel, f.shape[i], &numel);
    }
    if (numel > 0 && out.data() != static_cast<char*>(t.data) + f.byte_offset) Fail("data");
    // Read every element of a CPU layout of at most 2^16 elements inside the buffer.
    const int64_t item = (f.dtype.bits + 7) / 8;
    if (!huge && numel > 0 && numel <= (1 << 16) && f.device.device_type == kDLCPU &&
        f.dtype.bits % 8 == 0 && f.byte_offset < kBufferBytes) {
      int64_t lo = 0, hi = 0;
      for (int i = 0; i < f.ndim; ++i) {
        int64_t reach;
        huge |= __builtin_mul_overflow(out.size(i) - 1, out.stride(i), &reach) ||
                __builtin_mul_overflow(reach, item, &reach) ||
                __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
      }
      const int64_t start = static_cast<int64_t>(f.base) + static_cast<int64_t>(f.byte_offset);
      if (!huge && start + lo >= 0 && start + hi + item <= static_cast<int64_t>(kBufferBytes)) {
        std::vector<int64_t> index(f.ndim, 0);
        volatile unsigned sum = 0;
        for (int64_t e = 0; e < numel; ++e) {
          int64_t off = 0;
          for (int i = 0; i < f.ndim; ++i) off += index[i] * out.stride(i) * item;
          sum = sum + static_cast<const unsigned char*>(out.data())[off];
          for (int i = f.ndim - 1; i >= 0 && ++index[i] == out.size(i); --i) index[i] = 0;
        }
      }
    }
  }
  if (g_deleted != want_deleted) Fail("accepted, and the deleter did not run once at release");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static unsigned char* buffer = [] {
    auto* b = static_cast<unsigned char*>(std::aligned_alloc(64, kBufferBytes));
    for (size_t i = 0; i < kBufferBytes; ++i) b[i] = static_cast<unsigned char>(i * 131);
    return b;
  }();
  Reader r(data, size);
  Fields f{};
  const uint8_t head = r.Get<uint8_t>();
  f.versioned = head & 1;
  f.null_shape = (head & 0x0e) == 0x0e;
  f.null_strides = head & 0x10;
  f.null_data = (head & 0x60) == 0x60;
  f.null_deleter = head & 0x80 && r.Get<uint8_t>() < 16;
  const uint8_t v = r.Get<uint8_t>();
  f.version = v < 240 ? DLPackVersion{1, v % 4u} : DLPackVersion{r.Get<uint32_t>(), 0};
  f.flags = r.Get<uint8_t>() < 240 ? r.Get<uint8_t>() % 4u : r.Get<uint64_t>();
  const uint8_t nd = r.Get<uint8_t>();
  // The shape array holds kMaxDims entries: a producer's ndim never runs past its own array.
  f.ndim = nd < 250 ? nd % (kMaxDims + 1) : -static_cast<int32_t>(r.Get<uint16_t>() + 1);
  for (int i = 0; i < kMaxDims; ++i) f.shape[i] = r.Dim(6);
  for (int i = 0; i < kMaxDims; ++i) f.strides[i] = r.Dim(24);
  const uint8_t dt = r.Get<uint8_t>();
  static const DLDataType kTypes[] = {
      {kDLFloat, 32, 1},  {kDLFloat, 64, 1},    {kDLInt, 8, 1},
      {kDLInt, 64, 1},    {kDLUInt, 16, 1},     {kDLBool, 8, 1},
      {kDLBfloat, 16, 1}, {kDLComplex, 128, 1}, {kDLFloat4_e2m1fn, 4, 1}};
  f.dtype = dt < 224 ? kTypes[dt % (sizeof(kTypes) / sizeof(kTypes[0]))]
                     : DLDataType{r.Get<uint8_t>(), r.Get<uint8_t>(), r.Get<uint16_t>()};
  const uint8_t dev = r.Get<uint8_t>();
  f.device = dev < 224 ? DLDevice{kDLCPU, 0}
                       : DLDevice{static_cast<DLDeviceType>(r.Get<int32_t>()), r.Get<int32_t>()};
  const uint8_t off = r.Get<uint8_t>();
  f.byte_offset = off < 224 ? off % 64u : r.Get<uint64_t>();
  f.base = 1024 + r.Get<uint16_t>() % 2048u;
  if (f.versioned) {
    Run<DLManagedTensorVersioned>(f, buffer);
  } else {
    Run<DLManagedTensor>(f, buffer);
  }
  return 0;
}
