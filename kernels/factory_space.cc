// Factories beyond factory.cc: aten::eye (n and n x m), aten::logspace, and the overloads of
// linspace / logspace whose bounds are 0-d tensors (their values read, then the Scalar form
// runs through the table).
//
// logspace is torch's CPU kernel: base ** (start + step * i) for the first half of the steps
// and base ** (end - step * (steps - 1 - i)) for the second, in the result's type (double for
// integer results, whose values are then truncated; complex results in their complex type).
#include <cmath>
#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/factory_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

using kernels::CheckOptions;

Tensor EyeM(int64_t n, int64_t m, std::optional<DType> dtype, const Value& layout,
            const Value& device, const Value& /*pin_memory*/) {
  constexpr const char* kOp = "aten::eye";
  CheckOptions(kOp, layout, device);
  TB_CHECK(n >= 0, ValueError) << kOp << ": n must be greater or equal to 0, got " << n;
  TB_CHECK(m >= 0, ValueError) << kOp << ": m must be greater or equal to 0, got " << m;
  const DType dt = dtype.value_or(DType::kFloat32);
  Tensor out = Tensor::Zeros({n, m}, dt);
  const int64_t k = std::min(n, m);
  if (IsComplex(dt)) {  // a diagonal of 1 + 0i
    auto fill = [&](auto one) {
      auto* p = out.data_as<decltype(one)>();
      for (int64_t i = 0; i < k; ++i) p[i * m + i] = one;
    };
    if (dt == DType::kComplex64) {
      fill(std::complex<float>(1));
    } else {
      fill(std::complex<double>(1));
    }
    return out;
  }
  TB_DISPATCH(dt, kOp, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    T* p = out.data_as<T>();
    for (int64_t i = 0; i < k; ++i) p[i * m + i] = kernels::Convert<T>(1.0);
  });
  return out;
}

Tensor Eye(int64_t n, std::optional<DType> dtype, const Value& layout, const Value& device,
           const Value& pin_memory) {
  return EyeM(n, n, dtype, layout, device, pin_memory);
}

Tensor Logspace(const Scalar& start, const Scalar& end, int64_t steps, double base,
                std::optional<DType> dtype, const Value& layout, const Value& device,
                const Value& /*pin_memory*/) {
  constexpr const char* kOp = "aten::logspace";
  CheckOptions(kOp, layout, device);
  TB_CHECK(steps >= 0, ValueError) << kOp << ": number of steps must be non-negative";
  const bool complex_bounds = start.is_complex() || end.is_complex();
  const DType dt = dtype.value_or(complex_bounds ? DType::kComplex64 : DType::kFloat32);
  Tensor out = Tensor::Empty({steps}, dt);
  if (steps == 0) return out;
  if (IsComplex(dt)) {  // in the result's complex type
    kernels::ComplexSpace(out, start, end, steps, [base](auto v) {
      return std::pow(decltype(v)(static_cast<typename decltype(v)::value_type>(base)), v);
    });
    return out;
  }
  TB_CHECK(!complex_bounds, TypeError)
      << kOp << ": complex bounds need a complex dtype, got " << DTypeName(dt);
  TB_DISPATCH(dt, kOp, TB_TYPES_NUMERIC, [&] {
    using T = scalar_t;
    // float results compute in float, the others in double (integer bounds truncated
    // first for integer results, as torch), then convert.
    using C = std::conditional_t<std::is_same_v<T, float>, float, double>;
    T* p = out.data_as<T>();
    const bool integral = !kernels::kIsFloating<T>;
    const C a = integral ? static_cast<C>(start.to_int()) : static_cast<C>(start.to_double());
    const C b = integral ? static_cast<C>(end.to_int()) : static_cast<C>(end.to_double());
    const C bs = static_cast<C>(base);
    const C step = steps == 1 ? C(0) : (b - a) / static_cast<C>(steps - 1);
    const int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i) {
      if (steps == 1) {
        p[i] = kernels::Convert<T>(std::pow(bs, a));
        continue;
      }
      const C v = i < half ? std::pow(bs, a + step * static_cast<C>(i))
                           : std::pow(bs, b - step * static_cast<C>(steps - i - 1));
      p[i] = kernels::Convert<T>(v);
    }
  });
  return out;
}

// The value of a 0-d (or one-element) bound tensor as a Scalar.
Scalar BoundValue(const Tensor& t, const char* op) {
  TB_CHECK_SUPPORTED(t.device().is_host_accessible())
      << op << ": tensors on " << DeviceString(t.device())
      << " are not supported; tensorbridge computes on the CPU";
  TB_CHECK(t.ndim() == 0, ValueError)
      << op << ": start and end must be 0-dimensional tensors, got shape "
      << ShapeString(t.shape());
  if (IsFloatingPoint(t.dtype())) return Scalar(*Cast(t, DType::kFloat64).data_as<double>());
  if (IsComplex(t.dtype())) {
    return Scalar(*Cast(t, DType::kComplex128).data_as<std::complex<double>>());
  }
  TB_CHECK_SUPPORTED(IsIntegral(t.dtype(), /*include_bool=*/true))
      << op << ": bounds of dtype " << DTypeName(t.dtype()) << " are not supported";
  return Scalar(*Cast(t, DType::kInt64).data_as<int64_t>());
}

// A kernel for a Tensor-bound overload: bounds 0 and 1 read as Scalars, then `target` runs.
BoxedKernel WithScalarBounds(const char* target) {
  const OpId id = OpTable::Global().Intern(target);
  return [id](const OpInfo& op, Stack& s) {
    for (size_t i = 0; i < 2 && i < s.size(); ++i) {
      if (s[i].is_tensor()) s[i] = Value(BoundValue(s[i].to_tensor(), op.qualified.c_str()));
    }
    OpTable::Global().Call(id, s);
  };
}

}  // namespace

TB_REGISTER_KERNELS(factory_space) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::eye", cpu, Boxed<&Eye>(), TB_HERE);
  table.RegisterKernel("aten::eye.m", cpu, Boxed<&EyeM>(), TB_HERE);
  table.RegisterKernel("aten::logspace", cpu, Boxed<&Logspace>(), TB_HERE);
  for (const char* o : {"Tensor_Tensor", "Tensor_Scalar", "Scalar_Tensor"}) {
    table.RegisterKernel(std::string("aten::linspace.") + o, cpu,
                         WithScalarBounds("aten::linspace"), TB_HERE);
    table.RegisterKernel(std::string("aten::logspace.") + o, cpu,
                         WithScalarBounds("aten::logspace"), TB_HERE);
  }
}

}  // namespace tb
