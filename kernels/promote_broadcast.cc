#include "kernels/promote_broadcast.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <omp.h>

#include "kernels/common_internal.h"
#include "kernels/cpu/simd_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"

namespace tb {
namespace {

enum class Category { kBool = 0, kInt = 1, kFloat = 2, kComplex = 3 };

Category CategoryOf(DType t) {
  if (t == DType::kBool) return Category::kBool;
  if (IsComplex(t)) return Category::kComplex;
  if (IsFloatingPoint(t)) return Category::kFloat;
  return Category::kInt;
}

bool IsUnsigned(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}

DType SignedOfBits(int bits) {
  switch (bits) {
    case 8: return DType::kInt8;
    case 16: return DType::kInt16;
    case 32: return DType::kInt32;
    default: return DType::kInt64;
  }
}

// out[b, j] = src[b, index[j]] for elements of type U, with `outer` rows of n (src) and
// index.size() (out) elements.
template <typename U>
void GatherElements(char* out, const char* src, const std::vector<int64_t>& index, int64_t outer,
                    int64_t n) {
  U* o = reinterpret_cast<U*>(out);
  const U* s = reinterpret_cast<const U*>(src);
  const int64_t m = static_cast<int64_t>(index.size());
  const int64_t* idx = index.data();
#pragma omp parallel for if (outer * m > (1 << 16)) schedule(static)
  for (int64_t b = 0; b < outer; ++b) {
    for (int64_t j = 0; j < m; ++j) o[b * m + j] = s[b * n + idx[j]];
  }
}

}  // namespace

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (IsStorageOnly(a) || IsStorageOnly(b)) {
    TB_THROW(TypeError) << "promote_types: " << DTypeName(a) << " and " << DTypeName(b)
                        << " do not promote (storage-only dtype)";
  }
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  Category ca = CategoryOf(a), cb = CategoryOf(b);
  if (ca == Category::kComplex || cb == Category::kComplex) {
    if (ca == Category::kComplex && cb == Category::kComplex) {
      return DTypeBits(a) >= DTypeBits(b) ? a : b;
    }
    DType c = ca == Category::kComplex ? a : b, o = ca == Category::kComplex ? b : a;
    return o == DType::kFloat64 ? DType::kComplex128 : c;
  }
  if (ca == Category::kFloat && cb == Category::kFloat) {
    if ((a == DType::kFloat16 && b == DType::kBFloat16) ||
        (a == DType::kBFloat16 && b == DType::kFloat16)) {
      return DType::kFloat32;
    }
    return DTypeBits(a) >= DTypeBits(b) ? a : b;
  }
  if (ca == Category::kFloat) return a;
  if (cb == Category::kFloat) return b;
  // Both integral.
  bool ua = IsUnsigned(a), ub = IsUnsigned(b);
  if (ua == ub) return DTypeBits(a) >= DTypeBits(b) ? a : b;
  DType u = ua ? a : b, s = ua ? b : a;
  if (DTypeBits(u) == 64) {
    TB_THROW(TypeError) << "promote_types: " << DTypeName(a) << " and " << DTypeName(b)
                        << " have no common type";
  }
  // A signed type wide enough for both.
  int bits = std::max(DTypeBits(s), 2 * DTypeBits(u));
  return SignedOfBits(bits);
}

PromotionOperand Operand(const Tensor& t) {
  return {t.dtype(), t.ndim() == 0, t.is_wrapped_number()};
}

DType ResultType(const std::vector<PromotionOperand>& operands) {
  std::optional<DType> dim, zero, wrapped;
  auto promote = [](std::optional<DType>& acc, DType t) { acc = acc ? PromoteTypes(*acc, t) : t; };
  for (const auto& o : operands) {
    if (o.wrapped) {
      // A Python number counts by category: float -> the default dtype, complex -> complex64.
      DType t = o.dtype;
      if (IsFloatingPoint(t)) t = DType::kFloat32;
      if (IsComplex(t)) t = DType::kComplex64;
      promote(wrapped, t);
    } else if (o.zero_dim) {
      promote(zero, o.dtype);
    } else {
      promote(dim, o.dtype);
    }
  }
  // torch's combine_categories(higher, lower).
  auto combine = [](std::optional<DType> higher,
                    std::optional<DType> lower) -> std::optional<DType> {
    if (!higher) return lower;
    if (!lower) return higher;
    Category ch = CategoryOf(*higher), cl = CategoryOf(*lower);
    if (ch == Category::kComplex) return higher;
    if (cl != Category::kComplex && ch == Category::kFloat) return higher;
    if (ch == Category::kBool || cl == Category::kFloat || cl == Category::kComplex) {
      // The lower class wins only by category: a float lower than an int tensor yields the
      // default dtype for wrapped numbers, or the zero-dim tensor's own type.
      return PromoteTypes(*higher, *lower);
    }
    return higher;
  };
  auto r = combine(dim, combine(zero, wrapped));
  TB_CHECK(r.has_value(), ValueError) << "result_type: no operands";
  return *r;
}

Dims BroadcastShapes(const std::vector<IntArrayRef>& shapes, const char* op) {
  size_t nd = 0;
  for (auto s : shapes) nd = std::max(nd, s.size());
  Dims out(nd, 1);
  for (auto s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      size_t d = nd - s.size() + i;
      int64_t x = s[i];
      if (x == out[d] || x == 1) continue;
      if (out[d] != 1) {
        std::string all;
        for (auto t : shapes) all += ShapeString(t) + " ";
        TB_THROW(ValueError) << op << ": shapes " << all << "cannot be broadcast together";
      }
      out[d] = x;
    }
  }
  return out;
}

// dst <- s where either is complex: real -> complex gives a zero imaginary part, complex ->
// real keeps the real part (bool: nonzero real or imaginary part), as torch.
void CopyCastComplex(const Tensor& dst, const Tensor& s) {
  auto complex_types = [](DType t, auto f) {
    if (t == DType::kComplex64) return f(std::complex<float>());
    if (t == DType::kComplex128) return f(std::complex<double>());
    TB_DECLINE << "copy: dtype " << DTypeName(t) << " is not supported";
  };
  if (IsComplex(dst.dtype()) && IsComplex(s.dtype())) {
    complex_types(dst.dtype(), [&](auto to) {
      using To = decltype(to);
      complex_types(s.dtype(), [&](auto from) {
        using From = decltype(from);
        kernels::Map<To, From>(
            dst, [](From v) { return To(v); }, s);
      });
    });
  } else if (IsComplex(dst.dtype())) {
    complex_types(dst.dtype(), [&](auto to) {
      using To = decltype(to);
      using R = typename To::value_type;
      TB_DISPATCH(s.dtype(), "copy", TB_TYPES_ALL, [&] {
        using From = scalar_t;
        kernels::Map<To, From>(
            dst, [](From v) { return To(kernels::Convert<R>(v), R(0)); }, s);
      });
    });
  } else {
    complex_types(s.dtype(), [&](auto from) {
      using From = decltype(from);
      TB_DISPATCH(dst.dtype(), "copy", TB_TYPES_ALL, [&] {
        using To = scalar_t;
        kernels::Map<To, From>(
            dst,
            [](From v) {
              if constexpr (std::is_same_v<To, bool>) {
                return v != From(0);
              } else {
                return kernels::Convert<To>(v.real());
              }
            },
            s);
      });
    });
  }
}

bool CopyContiguousRows(const Tensor& dst, const Tensor& src) {
  const int64_t nd = dst.ndim();
  if (nd == 0 || src.dtype() != dst.dtype() || IsSubByte(dst.dtype()) || src.ndim() != nd ||
      dst.stride(nd - 1) != 1 || src.stride(nd - 1) != 1 || dst.numel() == 0) {
    return false;
  }
  int64_t row = dst.size(nd - 1);
  int64_t d = nd - 1;  // dims [d, nd) form one row
  while (d > 0 && dst.stride(d - 1) == row && src.stride(d - 1) == row) row *= dst.size(--d);
  const int64_t item = dst.element_size();
  if (row * item < 64) return false;  // short rows: the element loop is as fast
  const int64_t rows = dst.numel() / row;
  char* pd = static_cast<char*>(dst.mutable_data());
  const char* ps = static_cast<const char*>(src.data());
  // Rows [begin, end): the first row's offsets from its index over dims [0, d), then an
  // odometer over those dims. Short rows as a typed loop the compiler vectorizes (a memcpy
  // call per 128-byte row costs more than the copy).
  const bool whole_rows = row * item >= 1024;
  std::vector<int64_t> size(static_cast<size_t>(d)), sd(size.size()), ss(size.size());
  for (int64_t k = 0; k < d; ++k) {
    size[k] = dst.size(k);
    sd[k] = dst.stride(k);
    ss[k] = src.stride(k);
  }
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(size.size(), 0);
    int64_t od = 0, os = 0;
    for (int64_t k = d - 1, r = begin; k >= 0; --k) {
      idx[k] = r % size[k];
      r /= size[k];
      od += idx[k] * sd[k];
      os += idx[k] * ss[k];
    }
    auto rows_of = [&](auto zero) {
      using T = decltype(zero);
      T* td = reinterpret_cast<T*>(pd);
      const T* ts = reinterpret_cast<const T*>(ps);
      const int64_t n = row * item / static_cast<int64_t>(sizeof(T));
      const int64_t scale = item / static_cast<int64_t>(sizeof(T));
      for (int64_t r = begin; r < end; ++r) {
        if (whole_rows) {
          std::memcpy(td + od * scale, ts + os * scale, static_cast<size_t>(n) * sizeof(T));
        } else {
          T* __restrict out = td + od * scale;
          const T* __restrict in = ts + os * scale;
          for (int64_t j = 0; j < n; ++j) out[j] = in[j];
        }
        for (int64_t k = d - 1; k >= 0; --k) {
          od += sd[k];
          os += ss[k];
          if (++idx[k] < size[k]) break;
          od -= idx[k] * sd[k];
          os -= idx[k] * ss[k];
          idx[k] = 0;
        }
      }
    };
    if (item % 8 == 0) {
      rows_of(uint64_t{0});
    } else if (item % 4 == 0) {
      rows_of(uint32_t{0});
    } else if (item % 2 == 0) {
      rows_of(uint16_t{0});
    } else {
      rows_of(uint8_t{0});
    }
  };
  if (dst.numel() <= 4 * kernels::kGrain) {
    run(0, rows);
    return true;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    run(rows * t / nt, rows * (t + 1) / nt);
  }
  return true;
}

// bfloat16 <-> float32 into a contiguous `dst` (autocast's casts): the bits shifted (rounding
// to nearest even, NaN kept quiet, as torch does) in the vector rows of kernels/cpu/simd.cc. False
// for other dtypes, or layouts that are not dense and alike.
namespace {
bool CastBFloat16(const Tensor& dst, const Tensor& src) {
  const DType from = src.dtype(), to = dst.dtype();
  const bool widen = from == DType::kBFloat16 && to == DType::kFloat32;
  const bool narrow = from == DType::kFloat32 && to == DType::kBFloat16;
  if ((!widen && !narrow) || dst.numel() == 0) return false;
  // One flat loop when both are laid out alike over dense memory (contiguous, or a permuted
  // result of _to_copy's preserve_format).
  if (!IsDense(dst) || !SameLayout(dst, src)) return false;
  const Tensor& s = src;
  const int64_t n = dst.numel();
  kernels::ForEachBlock(
      n, kernels::kGrain, n > 16 * kernels::kGrain, [&](int64_t begin, int64_t end) {
        if (widen) {
          kernels::simd::WidenBf16Row(static_cast<const uint16_t*>(s.data()) + begin,
                                      static_cast<float*>(dst.mutable_data()) + begin, end - begin);
        } else {
          kernels::simd::NarrowBf16Row(static_cast<const float*>(s.data()) + begin,
                                       static_cast<uint16_t*>(dst.mutable_data()) + begin,
                                       end - begin);
        }
      });
  return true;
}
}  // namespace

void CopyCast(const Tensor& dst, const Tensor& src) {
  Tensor s = src.expand(dst.shape());
  if (s.dtype() == dst.dtype()) {
    dst.copy_from(s);
    return;
  }
  if (IsComplex(dst.dtype()) || IsComplex(s.dtype())) {
    CopyCastComplex(dst, s);
    return;
  }
  if (CastBFloat16(dst, s)) return;
  TB_DISPATCH(dst.dtype(), "copy", TB_TYPES_ALL, [&] {
    using To = scalar_t;
    TB_DISPATCH(s.dtype(), "copy", TB_TYPES_ALL, [&] {
      using From = scalar_t;
      kernels::Map<To, From>(
          dst, [](From v) { return kernels::Convert<To>(v); }, s);
    });
  });
}

Tensor Cast(const Tensor& src, DType dtype) {
  if (src.dtype() == dtype) return src;
  Tensor out = Tensor::Empty(src.shape(), dtype);
  CopyCast(out, src);
  return out;
}

// A new contiguous tensor: `src` with dimension `dim` replaced by src[..., index[j], ...] for
// each j. Every index must already be valid.
Tensor GatherBlocks(const Tensor& src_in, int64_t dim, const std::vector<int64_t>& index) {
  Tensor src = src_in.contiguous();
  Dims shape(src.shape());
  const int64_t n = shape[dim];
  const int64_t m = static_cast<int64_t>(index.size());
  shape[dim] = m;
  Tensor out = Tensor::Empty(shape, src.dtype());
  if (out.numel() == 0) return out;
  int64_t outer = 1, inner = src.element_size();
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < src.ndim(); ++d) inner *= shape[d];
  const char* s = static_cast<const char*>(src.data());
  char* o = static_cast<char*>(out.data());
  switch (inner) {  // blocks of one element: typed loads instead of memcpy calls
    case 1: GatherElements<uint8_t>(o, s, index, outer, n); return out;
    case 2: GatherElements<uint16_t>(o, s, index, outer, n); return out;
    case 4: GatherElements<uint32_t>(o, s, index, outer, n); return out;
    case 8: GatherElements<uint64_t>(o, s, index, outer, n); return out;
    default: break;
  }
  const int64_t total = outer * m;
#pragma omp parallel for if (total * inner > (1 << 18)) schedule(static)
  for (int64_t k = 0; k < total; ++k) {
    const int64_t b = k / m, j = k % m;
    std::memcpy(o + k * inner, s + (b * n + index[j]) * inner, static_cast<size_t>(inner));
  }
  return out;
}

}  // namespace tb
