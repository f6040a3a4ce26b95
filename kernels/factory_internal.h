// Private helpers shared by the factory kernels (factory.cc, factory_space.cc) and the kernels
// that fill (copy.cc's fill_, pad.cc).
#pragma once

#include <complex>
#include <cstdint>

#include "bridge/tensor.h"
#include "dispatch/value.h"

namespace tb::kernels {

// Every element of `t` set to `value` converted to t's dtype (a complex value's real part for
// a real tensor): a dense tensor as a memset or repeated copies of the converted bytes, others
// element by element (factory.cc).
void FillScalar(const Tensor& t, const Scalar& value);

// torch's CPU linspace / logspace for a complex64 / complex128 `out` of `steps` (>= 1)
// elements: the step (end - start) / (steps - 1) in the result's complex type, the first half
// of the values counted up from start and the second half down from end (one step: start),
// each written as f(value) (the value itself for linspace, base ** value for logspace). `f`
// takes and returns the result's std::complex type.
template <typename F>
void ComplexSpace(const Tensor& out, const Scalar& start, const Scalar& end, int64_t steps, F f) {
  auto fill = [&](auto zero) {
    using T = decltype(zero);
    using R = typename T::value_type;
    auto read = [](const Scalar& s) {
      const std::complex<double> c = s.to_complex();
      return T(static_cast<R>(c.real()), static_cast<R>(c.imag()));
    };
    const T a = read(start), b = read(end);
    T* p = out.data_as<T>();
    if (steps == 1) {
      p[0] = f(a);
      return;
    }
    const T step = (b - a) / static_cast<R>(steps - 1);
    const int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i) {
      p[i] = f(i < half ? a + step * static_cast<R>(i) : b - step * static_cast<R>(steps - i - 1));
    }
  };
  if (out.dtype() == DType::kComplex64) {
    fill(std::complex<float>());
  } else {
    fill(std::complex<double>());
  }
}

}  // namespace tb::kernels
