// Factories: aten::empty.memory_format, empty_strided, zeros, ones, full, scalar_tensor,
// empty_like, zeros_like, ones_like, full_like, new_empty, new_empty_strided, new_zeros, new_ones,
// new_full, arange (default, start, start_step), linspace.
//
// The dtype is the one given, else torch's default: float32 for zeros / ones / empty /
// scalar_tensor / linspace and for arange with a floating-point bound; int64 for integer
// fill values and integer aranges; bool for bool fill values. The *_like / new_* forms
// default to self's dtype. Only the CPU device and the strided layout are served.
// Random factories (rand, randn, randperm, ...) are deliberately not here: they go to
// PyTorch's own kernels through the fallback, to stay on torch's generator stream.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/factory_internal.h"
#include "kernels/layout.h"
#include "kernels/loops_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {

void kernels::FillScalar(const Tensor& t, const Scalar& fill) {
  if (t.numel() == 0) return;
  // A complex value fills a real tensor only without an imaginary part (RuntimeError).
  const Scalar value = fill.is_complex() && !IsComplex(t.dtype()) ? Scalar(fill.to_double()) : fill;
  if (!t.is_contiguous() && (IsSubByte(t.dtype()) || !IsDense(t))) {
    CopyCast(t, WrapNumber(Value(value)));
    return;
  }
  // Dense (its elements one run of memory from data()): the value converted once into the
  // first element, then its bytes repeated (a memset when they are all zero, else copies
  // doubling in length).
  const size_t item = static_cast<size_t>(DTypeSize(t.dtype())),
               total = item * static_cast<size_t>(t.numel());
  auto* p = static_cast<unsigned char*>(t.mutable_data());
  Tensor first = Tensor::Empty({}, t.dtype());
  CopyCast(first, WrapNumber(Value(value)));
  const auto* v = static_cast<const unsigned char*>(first.data());
  if (std::all_of(v, v + item, [](unsigned char b) { return b == 0; })) {
    std::memset(p, 0, total);
    return;
  }
  std::memcpy(p, v, item);
  for (size_t done = item; done < total;) {
    const size_t n = std::min(done, total - done);
    std::memcpy(p + done, p, n);
    done += n;
  }
}

namespace {

using kernels::CheckOptions;

// torch's dtype for a tensor made from a Python number.
DType DefaultDTypeFor(const Scalar& s) {
  if (s.is_bool()) return DType::kBool;
  if (s.is_integral()) return DType::kInt64;
  if (s.is_complex()) return DType::kComplex64;
  return DType::kFloat32;
}

Tensor Full(IntArrayRef size, const Scalar& value, DType dtype) {
  Tensor out = Tensor::Empty(size, dtype);
  kernels::FillScalar(out, value);
  return out;
}

// ---- from a size -----------------------------------------------------------------------------

Tensor Empty(const std::vector<int64_t>& size, std::optional<DType> dtype, const Value& layout,
             const Value& device, const Value& /*pin_memory*/, const Value& memory_format) {
  constexpr const char* kOp = "aten::empty";
  CheckOptions(kOp, layout, device);
  const MemoryFormat format = MemoryFormatArg(memory_format, kOp);
  TB_CHECK(format != MemoryFormat::kPreserve || memory_format.is_none(), ValueError)
      << kOp << ": memory_format preserve_format is not supported (there is nothing to preserve)";
  const DType dt = dtype.value_or(DType::kFloat32);
  if (format == MemoryFormat::kPreserve || format == MemoryFormat::kContiguous) {
    return Tensor::Empty(size, dt);
  }
  return EmptyDense(size, FormatStrides(size, format, kOp), dt);
}

Tensor EmptyStrided(const std::vector<int64_t>& size, const std::vector<int64_t>& stride,
                    std::optional<DType> dtype, const Value& layout, const Value& device,
                    const Value& /*pin_memory*/) {
  constexpr const char* kOp = "aten::empty_strided";
  CheckOptions(kOp, layout, device);
  TB_CHECK(size.size() == stride.size(), ValueError)
      << kOp << ": size " << ShapeString(size) << " and stride " << ShapeString(stride)
      << " differ in length";
  const DType dt = dtype.value_or(DType::kFloat32);
  const int64_t numel = ShapeNumel(size);
  int64_t extent = numel > 0 ? 1 : 0;  // elements the storage must hold
  for (size_t i = 0; i < size.size(); ++i) {
    TB_CHECK(stride[i] >= 0, ValueError)
        << kOp << ": negative strides are not supported, got " << ShapeString(stride);
    if (numel > 0) extent += (size[i] - 1) * stride[i];
  }
  if (IsSubByte(dt) || ContiguousStrides(size).ref() == IntArrayRef(stride) || numel == 0) {
    return Tensor::Empty(size, dt);
  }
  auto storage = Storage::Allocate(static_cast<size_t>(extent * DTypeSize(dt)));
  void* data = storage->data();
  return Tensor(std::move(storage), data, Dims(IntArrayRef(size)), Dims(IntArrayRef(stride)), dt,
                Device{});
}

Tensor Zeros(const std::vector<int64_t>& size, std::optional<DType> dtype, const Value& layout,
             const Value& device, const Value& /*pin_memory*/) {
  CheckOptions("aten::zeros", layout, device);
  return Tensor::Zeros(size, dtype.value_or(DType::kFloat32));
}

Tensor Ones(const std::vector<int64_t>& size, std::optional<DType> dtype, const Value& layout,
            const Value& device, const Value& /*pin_memory*/) {
  CheckOptions("aten::ones", layout, device);
  return Full(size, Scalar(int64_t{1}), dtype.value_or(DType::kFloat32));
}

Tensor FullOp(const std::vector<int64_t>& size, const Scalar& fill_value,
              std::optional<DType> dtype, const Value& layout, const Value& device,
              const Value& /*pin_memory*/) {
  CheckOptions("aten::full", layout, device);
  return Full(size, fill_value, dtype.value_or(DefaultDTypeFor(fill_value)));
}

Tensor ScalarTensor(const Scalar& s, std::optional<DType> dtype, const Value& layout,
                    const Value& device, const Value& /*pin_memory*/) {
  CheckOptions("aten::scalar_tensor", layout, device);
  return Full({}, s, dtype.value_or(DType::kFloat32));
}

// ---- like self -------------------------------------------------------------------------------

// A new tensor shaped like self, laid out as torch's empty_like for `memory_format`
// (kernels/layout.h), filled with `value` unless it is null.
Tensor Like(const Tensor& self, std::optional<DType> dtype, const Value& layout,
            const Value& device, const Value& memory_format, const Scalar* value, const char* op) {
  CheckOptions(op, layout, device);
  Tensor out =
      EmptyLike(self, dtype.value_or(self.dtype()), MemoryFormatArg(memory_format, op), op);
  if (value != nullptr) kernels::FillScalar(out, *value);
  return out;
}

Tensor EmptyLikeOp(const Tensor& self, std::optional<DType> dtype, const Value& layout,
                   const Value& device, const Value& /*pin_memory*/, const Value& memory_format) {
  return Like(self, dtype, layout, device, memory_format, nullptr, "aten::empty_like");
}

Tensor ZerosLike(const Tensor& self, std::optional<DType> dtype, const Value& layout,
                 const Value& device, const Value& /*pin_memory*/, const Value& memory_format) {
  const Scalar zero(int64_t{0});
  return Like(self, dtype, layout, device, memory_format, &zero, "aten::zeros_like");
}

Tensor OnesLike(const Tensor& self, std::optional<DType> dtype, const Value& layout,
                const Value& device, const Value& /*pin_memory*/, const Value& memory_format) {
  const Scalar one(int64_t{1});
  return Like(self, dtype, layout, device, memory_format, &one, "aten::ones_like");
}

Tensor FullLike(const Tensor& self, const Scalar& fill_value, std::optional<DType> dtype,
                const Value& layout, const Value& device, const Value& /*pin_memory*/,
                const Value& memory_format) {
  return Like(self, dtype, layout, device, memory_format, &fill_value, "aten::full_like");
}

Tensor NewEmpty(const Tensor& self, const std::vector<int64_t>& size, std::optional<DType> dtype,
                const Value& layout, const Value& device, const Value& /*pin_memory*/) {
  CheckOptions("aten::new_empty", layout, device);
  return Tensor::Empty(size, dtype.value_or(self.dtype()));
}

// The autograd engine's way to lay a gradient out like its input (AccumulateGrad).
Tensor NewEmptyStrided(const Tensor& self, const std::vector<int64_t>& size,
                       const std::vector<int64_t>& stride, std::optional<DType> dtype,
                       const Value& layout, const Value& device, const Value& pin_memory) {
  return EmptyStrided(size, stride, dtype.value_or(self.dtype()), layout, device, pin_memory);
}

Tensor NewZeros(const Tensor& self, const std::vector<int64_t>& size, std::optional<DType> dtype,
                const Value& layout, const Value& device, const Value& /*pin_memory*/) {
  CheckOptions("aten::new_zeros", layout, device);
  return Tensor::Zeros(size, dtype.value_or(self.dtype()));
}

Tensor NewOnes(const Tensor& self, const std::vector<int64_t>& size, std::optional<DType> dtype,
               const Value& layout, const Value& device, const Value& /*pin_memory*/) {
  CheckOptions("aten::new_ones", layout, device);
  return Full(size, Scalar(int64_t{1}), dtype.value_or(self.dtype()));
}

Tensor NewFull(const Tensor& self, const std::vector<int64_t>& size, const Scalar& fill_value,
               std::optional<DType> dtype, const Value& layout, const Value& device,
               const Value& /*pin_memory*/) {
  CheckOptions("aten::new_full", layout, device);
  return Full(size, fill_value, dtype.value_or(self.dtype()));
}

// ---- ranges ----------------------------------------------------------------------------------

// p[i] = start + step * i, computed in Acc.
template <typename T, typename Acc>
void FillRange(T* p, int64_t n, Acc start, Acc step) {
#pragma omp parallel for if (n > (1 << 16)) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + step * static_cast<Acc>(i));
}

// torch's arange on the CPU: bounds and step are read in the accumulate type (double for
// float / double, float for the 16-bit floats, int64 for the integers); the length is
// computed in double, except for int64 results, where it is exact integer arithmetic.
Tensor ArangeImpl(const Scalar& start, const Scalar& end, const Scalar& step,
                  std::optional<DType> dtype, const Value& layout, const Value& device) {
  constexpr const char* kOp = "aten::arange";
  CheckOptions(kOp, layout, device);
  const bool integral =
      !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  const DType dt = dtype.value_or(integral ? DType::kInt64 : DType::kFloat32);
  Tensor out;
  TB_DISPATCH(dt, kOp, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using AccD = std::conditional_t<kernels::kIsReducedFloat<T>, float,
                                    std::conditional_t<kernels::kIsFloating<T>, double, int64_t>>;
    auto read = [](const Scalar& s) -> AccD {
      if constexpr (std::is_integral_v<AccD>) return s.to_int();
      return static_cast<AccD>(s.to_double());
    };
    const AccD xstart = read(start), xend = read(end), xstep = read(step);
    TB_CHECK(xstep > 0 || xstep < 0, ValueError) << kOp << ": step must be nonzero";
    TB_CHECK(std::isfinite(static_cast<double>(xstart)) && std::isfinite(static_cast<double>(xend)),
             ValueError)
        << kOp << ": unsupported range: " << static_cast<double>(xstart) << " -> "
        << static_cast<double>(xend);
    TB_CHECK((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart), ValueError)
        << kOp << ": upper bound and larger bound inconsistent with step sign";
    double size_d;
    if constexpr (std::is_same_v<T, int64_t>) {
      const int64_t sgn = (xstep > 0) - (xstep < 0);
      // The element count in integers, as torch's arange computes it for integral steps.
      // NOLINTNEXTLINE(bugprone-integer-division)
      size_d = static_cast<double>((xend - xstart + xstep - sgn) / xstep);
    } else {
      size_d = std::ceil((end.to_double() - start.to_double()) / step.to_double());
    }
    TB_CHECK(size_d >= 0 && size_d <= 9.2e18, ValueError)
        << kOp << ": invalid size, possible overflow? (" << size_d << " elements)";
    const int64_t n = static_cast<int64_t>(size_d);
    out = Tensor::Empty({n}, dt);
    FillRange(out.data_as<T>(), n, xstart, xstep);
  });
  return out;
}

Tensor Arange(const Scalar& end, std::optional<DType> dtype, const Value& layout,
              const Value& device, const Value& /*pin_memory*/) {
  return ArangeImpl(Scalar(int64_t{0}), end, Scalar(int64_t{1}), dtype, layout, device);
}

Tensor ArangeStart(const Scalar& start, const Scalar& end, std::optional<DType> dtype,
                   const Value& layout, const Value& device, const Value& /*pin_memory*/) {
  return ArangeImpl(start, end, Scalar(int64_t{1}), dtype, layout, device);
}

Tensor ArangeStartStep(const Scalar& start, const Scalar& end, const Scalar& step,
                       std::optional<DType> dtype, const Value& layout, const Value& device,
                       const Value& /*pin_memory*/) {
  return ArangeImpl(start, end, step, dtype, layout, device);
}

// torch's linspace on the CPU: the first half counts up from start, the second half down
// from end; integer results use a double step.
Tensor Linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<DType> dtype,
                const Value& layout, const Value& device, const Value& /*pin_memory*/) {
  constexpr const char* kOp = "aten::linspace";
  CheckOptions(kOp, layout, device);
  TB_CHECK(steps >= 0, ValueError) << kOp << ": number of steps must be non-negative";
  // Complex bounds without a dtype: torch's default complex dtype.
  const bool complex_bounds = start.is_complex() || end.is_complex();
  const DType dt = dtype.value_or(complex_bounds ? DType::kComplex64 : DType::kFloat32);
  Tensor out = Tensor::Empty({steps}, dt);
  if (steps == 0) return out;
  if (steps == 1) {
    kernels::FillScalar(out, start);
    return out;
  }
  if (IsComplex(dt)) {  // the step in the result's complex type, as torch's CPU kernel
    kernels::ComplexSpace(out, start, end, steps, [](auto v) { return v; });
    return out;
  }
  TB_CHECK(!complex_bounds, TypeError)
      << kOp << ": complex bounds need a complex dtype, got " << DTypeName(dt);
  TB_DISPATCH(dt, kOp, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    using Step = std::conditional_t<kernels::kIsFloating<T>, kernels::opmath_t<T>, double>;
    auto read = [](const Scalar& s) -> T {
      if (s.is_floating_point()) return kernels::Convert<T>(s.to_double());
      return kernels::Convert<T>(s.to_int());
    };
    const Step a = static_cast<Step>(read(start)), b = static_cast<Step>(read(end));
    Step step = (b - a) / static_cast<Step>(steps - 1);
    if constexpr (kernels::kIsReducedFloat<T>) step = static_cast<float>(T(step));
    const int64_t half = steps / 2;
    T* p = out.data_as<T>();
    for (int64_t i = 0; i < steps; ++i) {
      const Step v =
          i < half ? a + step * static_cast<Step>(i) : b - step * static_cast<Step>(steps - i - 1);
      p[i] = static_cast<T>(v);
    }
  });
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(factory) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::empty.memory_format", cpu, Boxed<&Empty>(), TB_HERE);
  table.RegisterKernel("aten::empty_strided", cpu, Boxed<&EmptyStrided>(), TB_HERE);
  table.RegisterKernel("aten::zeros", cpu, Boxed<&Zeros>(), TB_HERE);
  table.RegisterKernel("aten::ones", cpu, Boxed<&Ones>(), TB_HERE);
  table.RegisterKernel("aten::full", cpu, Boxed<&FullOp>(), TB_HERE);
  table.RegisterKernel("aten::scalar_tensor", cpu, Boxed<&ScalarTensor>(), TB_HERE);
  table.RegisterKernel("aten::empty_like", cpu, Boxed<&EmptyLikeOp>(), TB_HERE);
  table.RegisterKernel("aten::zeros_like", cpu, Boxed<&ZerosLike>(), TB_HERE);
  table.RegisterKernel("aten::ones_like", cpu, Boxed<&OnesLike>(), TB_HERE);
  table.RegisterKernel("aten::full_like", cpu, Boxed<&FullLike>(), TB_HERE);
  table.RegisterKernel("aten::new_empty", cpu, Boxed<&NewEmpty>(), TB_HERE);
  table.RegisterKernel("aten::new_empty_strided", cpu, Boxed<&NewEmptyStrided>(), TB_HERE);
  table.RegisterKernel("aten::new_zeros", cpu, Boxed<&NewZeros>(), TB_HERE);
  table.RegisterKernel("aten::new_ones", cpu, Boxed<&NewOnes>(), TB_HERE);
  table.RegisterKernel("aten::new_full", cpu, Boxed<&NewFull>(), TB_HERE);
  table.RegisterKernel("aten::arange", cpu, Boxed<&Arange>(), TB_HERE);
  table.RegisterKernel("aten::arange.start", cpu, Boxed<&ArangeStart>(), TB_HERE);
  table.RegisterKernel("aten::arange.start_step", cpu, Boxed<&ArangeStartStep>(), TB_HERE);
  table.RegisterKernel("aten::linspace", cpu, Boxed<&Linspace>(), TB_HERE);
}

}  // namespace tb
