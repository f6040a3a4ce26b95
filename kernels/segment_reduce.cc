// Segmented reductions: aten::segment_reduce (segments by lengths or by offsets) and
// aten::_segment_reduce_backward, as torch's CPU kernels compute them.
//
// The segments run along `axis` = lengths.dim() - 1 (lengths / offsets carry the leading
// dims of data); the result has data's shape with that dim replaced by the number of
// segments. Reductions: sum, prod, mean, max, min, each starting from `initial` when given
// (else 0, 1, 0, -inf, +inf); max / min let NaN win; the mean of an empty segment without
// `initial` is NaN. Steps round to the data's type. The backward of max / min shares the
// gradient among the elements equal to the result (NaN included), dividing the positive
// shares by their count, as torch does; prod recomputes the exclusive product where an
// element is 0 or NaN.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

enum class Red { kSum, kProd, kMean, kMax, kMin };

Red ParseReduce(const std::string& r, const char* op) {
  if (r == "sum") return Red::kSum;
  if (r == "prod") return Red::kProd;
  if (r == "mean") return Red::kMean;
  if (r == "max") return Red::kMax;
  if (r == "min") return Red::kMin;
  TB_THROW(ValueError) << op << ": unsupported reduction given! " << r;
}

// Where each segment starts and how long it is, per outer row: [outer][segment].
struct Segments {
  int64_t axis = 0, count = 0, outer = 1, inner = 1, len = 0;
  std::vector<int64_t> start, length;  // outer * count each
};

Segments Plan(const Tensor& data, const std::optional<Tensor>& lengths,
              const std::optional<Tensor>& offsets, int64_t axis, bool check_sum, const char* op) {
  TB_CHECK_SUPPORTED(data.device().is_host_accessible())
      << op << ": tensors on " << DeviceString(data.device())
      << " are not supported; tensorbridge computes on the CPU";
  TB_CHECK(lengths.has_value() != offsets.has_value(), ValueError)
      << op << ": exactly one of lengths or offsets must be given";
  const Tensor& seg = lengths ? *lengths : *offsets;
  TB_CHECK(seg.dtype() == DType::kInt64 || seg.dtype() == DType::kInt32, TypeError)
      << op << ": lengths / offsets must be int32 or int64, got " << DTypeName(seg.dtype());
  TB_CHECK(seg.ndim() >= 1 && data.ndim() >= seg.ndim(), ValueError)
      << op << ": lengths / offsets of shape " << ShapeString(seg.shape())
      << " do not fit data of shape " << ShapeString(data.shape());
  Segments s;
  s.axis = seg.ndim() - 1;
  TB_CHECK(WrapDim(axis, data.ndim(), op) == s.axis, ValueError)
      << op << ": axis " << axis << " must be lengths.dim() - 1 = " << s.axis;
  for (int64_t d = 0; d < s.axis; ++d) {
    TB_CHECK(seg.size(d) == data.size(d), ValueError)
        << op << ": lengths / offsets of shape " << ShapeString(seg.shape())
        << " do not match data of shape " << ShapeString(data.shape());
    s.outer *= data.size(d);
  }
  for (int64_t d = s.axis + 1; d < data.ndim(); ++d) s.inner *= data.size(d);
  s.len = data.size(s.axis);
  s.count = seg.size(-1) - (offsets ? 1 : 0);
  TB_CHECK(s.count >= 0, ValueError) << op << ": offsets must have at least one element";
  Tensor c = Cast(seg, DType::kInt64).contiguous();
  const int64_t* p = c.data_as<const int64_t>();
  const int64_t row = seg.size(-1);
  for (int64_t o = 0; o < s.outer; ++o) {
    int64_t cum = 0;
    for (int64_t i = 0; i < s.count; ++i) {
      const int64_t st = offsets ? p[o * row + i] : cum;
      const int64_t n = offsets ? p[o * row + i + 1] - p[o * row + i] : p[o * row + i];
      TB_CHECK(n >= 0, ValueError) << op << ": lengths cannot be negative";
      TB_CHECK(st >= 0 && st + n <= s.len, IndexError)
          << op << ": segment [" << st << ", " << st + n << ") is out of range for size " << s.len;
      s.start.push_back(st);
      s.length.push_back(n);
      cum += n;
    }
    if (check_sum && lengths) {
      TB_CHECK(cum == s.len, ValueError)
          << op << ": expected all rows of lengths along axis to sum to data.size(" << s.axis
          << ") = " << s.len << ", got " << cum;
    }
  }
  return s;
}

Tensor SegmentReduce(const Tensor& data, const std::string& reduce,
                     const std::optional<Tensor>& lengths, const std::optional<Tensor>& indices,
                     const std::optional<Tensor>& offsets, int64_t axis, bool unsafe,
                     const std::optional<Scalar>& initial) {
  constexpr const char* kOp = "aten::segment_reduce";
  TB_CHECK(!indices, NotImplementedError)
      << kOp << ": indices based reduction is not supported yet";
  const Red red = ParseReduce(reduce, kOp);
  const Segments s = Plan(data, lengths, offsets, axis, !unsafe, kOp);
  Tensor x = data.contiguous();
  Dims shape(data.shape());
  shape[s.axis] = s.count;
  Tensor out = Tensor::Empty(shape, data.dtype());
  TB_DISPATCH(data.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    constexpr Acc kInf = std::numeric_limits<Acc>::infinity();
    const T* xp = x.data_as<const T>();
    T* op = out.data_as<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t st = s.start[o * s.count + i], n = s.length[o * s.count + i];
        for (int64_t b = 0; b < s.inner; ++b) {
          T v;
          if (initial) {
            v = kernels::Convert<T>(initial->to_double());
          } else {
            v = kernels::Convert<T>(red == Red::kMax    ? -kInf
                                    : red == Red::kMin  ? kInf
                                    : red == Red::kProd ? Acc(1)
                                                        : Acc(0));
          }
          for (int64_t j = 0; j < n; ++j) {
            const T e = xp[(o * s.len + st + j) * s.inner + b];
            const Acc ea = static_cast<Acc>(e), va = static_cast<Acc>(v);
            switch (red) {
              case Red::kMax: v = std::isnan(ea) ? e : (ea > va ? e : v); break;
              case Red::kMin: v = std::isnan(ea) ? e : (ea < va ? e : v); break;
              case Red::kProd: v = static_cast<T>(va * ea); break;
              default: v = static_cast<T>(va + ea); break;
            }
          }
          if (red == Red::kMean) {
            if (n == 0 && !initial) {
              v = kernels::Convert<T>(std::numeric_limits<double>::quiet_NaN());
            } else if (n > 0 && !std::isnan(static_cast<Acc>(v))) {
              v = static_cast<T>(static_cast<Acc>(v) / static_cast<Acc>(n));
            }
          }
          op[(o * s.count + i) * s.inner + b] = v;
        }
      }
    }
  });
  return out;
}

Tensor SegmentReduceBackward(const Tensor& grad, const Tensor& output, const Tensor& data,
                             const std::string& reduce, const std::optional<Tensor>& lengths,
                             const std::optional<Tensor>& offsets, int64_t axis,
                             const std::optional<Scalar>& initial) {
  constexpr const char* kOp = "aten::_segment_reduce_backward";
  const Red red = ParseReduce(reduce, kOp);
  const Segments s = Plan(data, lengths, offsets, axis, false, kOp);
  TB_CHECK(grad.shape() == output.shape() && grad.numel() == s.outer * s.count * s.inner,
           ValueError)
      << kOp << ": grad of shape " << ShapeString(grad.shape()) << " and output of shape "
      << ShapeString(output.shape()) << " do not match the segments";
  Tensor x = data.contiguous();
  Tensor g = Cast(grad, data.dtype()).contiguous();
  Tensor y = Cast(output, data.dtype()).contiguous();
  Tensor gi = Tensor::Zeros(data.shape(), data.dtype());
  TB_DISPATCH(data.dtype(), kOp, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using Acc = kernels::opmath_t<T>;
    const T* xp = x.data_as<const T>();
    const T* gp = g.data_as<const T>();
    const T* yp = y.data_as<const T>();
    T* gip = gi.data_as<T>();
    const T init_prod = initial ? kernels::Convert<T>(initial->to_double()) : T(1.0f);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t st = s.start[o * s.count + i], n = s.length[o * s.count + i];
        if (n == 0) continue;
        for (int64_t b = 0; b < s.inner; ++b) {
          const int64_t oi = (o * s.count + i) * s.inner + b;
          auto at = [&](int64_t j) { return (o * s.len + st + j) * s.inner + b; };
          const Acc go = static_cast<Acc>(gp[oi]), yo = static_cast<Acc>(yp[oi]);
          if (red == Red::kMax || red == Red::kMin) {
            int64_t counter = 0;
            for (int64_t j = 0; j < n; ++j) {
              const Acc e = static_cast<Acc>(xp[at(j)]);
              if (std::isnan(e) || e == yo) {
                gip[at(j)] = gp[oi];
                ++counter;
              }
            }
            if (counter < 2) continue;
            for (int64_t j = 0; j < n; ++j) {
              const Acc v = static_cast<Acc>(gip[at(j)]);
              if (v > 0) gip[at(j)] = static_cast<T>(v / static_cast<Acc>(counter));
            }
          } else if (red == Red::kMean) {
            const T share = static_cast<T>(go / static_cast<Acc>(n));
            for (int64_t j = 0; j < n; ++j) gip[at(j)] = share;
          } else if (red == Red::kSum) {
            for (int64_t j = 0; j < n; ++j) gip[at(j)] = gp[oi];
          } else {
            const T gy = static_cast<T>(go * yo);
            for (int64_t j = 0; j < n; ++j) {
              const Acc e = static_cast<Acc>(xp[at(j)]);
              if (std::isnan(e) || e == 0) {
                T excl = init_prod;
                for (int64_t k = 0; k < n; ++k) {
                  if (k != j)
                    excl = static_cast<T>(static_cast<Acc>(excl) * static_cast<Acc>(xp[at(k)]));
                }
                gip[at(j)] = static_cast<T>(go * static_cast<Acc>(excl));
              } else {
                gip[at(j)] = static_cast<T>(static_cast<Acc>(gy) / e);
              }
            }
          }
        }
      }
    }
  });
  return gi;
}

}  // namespace

TB_REGISTER_KERNELS(segment_reduce) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::segment_reduce", cpu, Boxed<&SegmentReduce>(), TB_HERE);
  table.RegisterKernel("aten::_segment_reduce_backward", cpu, Boxed<&SegmentReduceBackward>(),
                       TB_HERE);
}

}  // namespace tb
