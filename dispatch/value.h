// The boxed calling convention: a Value holds one argument or result, a Stack holds a call's
// arguments and, after the call, its results.
#pragma once

#include <complex>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bridge/api.h"
#include "bridge/tensor.h"

namespace tb {

// A number as ATen's Scalar: bool, integer, floating point or complex.
//
// to_double() / to_int() of a complex number with a nonzero imaginary part raise torch's
// RuntimeError ("value cannot be converted to type double without overflow"), as
// c10::Scalar::to<double>() does: a kernel that reads a Scalar as a real number never drops
// an imaginary part silently. Complex kernels read to_complex().
class Scalar {
 public:
  Scalar() = default;
  Scalar(bool v) : kind_(Kind::kBool), i_(v) {}      // NOLINT
  Scalar(int64_t v) : kind_(Kind::kInt), i_(v) {}    // NOLINT
  Scalar(int v) : kind_(Kind::kInt), i_(v) {}        // NOLINT
  Scalar(double v) : kind_(Kind::kDouble), d_(v) {}  // NOLINT
  // NOLINTNEXTLINE(google-explicit-constructor)
  Scalar(std::complex<double> v) : kind_(Kind::kComplex), d_(v.real()), imag_(v.imag()) {}
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_integral() const { return kind_ == Kind::kInt; }
  bool is_floating_point() const { return kind_ == Kind::kDouble; }
  bool is_complex() const { return kind_ == Kind::kComplex; }
  double to_double() const {
    if (kind_ == Kind::kComplex) CheckReal("double");
    return kind_ == Kind::kDouble || kind_ == Kind::kComplex ? d_ : static_cast<double>(i_);
  }
  int64_t to_int() const {
    if (kind_ == Kind::kComplex) CheckReal("int64_t");
    return kind_ == Kind::kDouble || kind_ == Kind::kComplex ? static_cast<int64_t>(d_) : i_;
  }
  // Any kind as a complex number (real kinds with a zero imaginary part).
  std::complex<double> to_complex() const {
    if (kind_ == Kind::kComplex) return {d_, imag_};
    return {kind_ == Kind::kDouble ? d_ : static_cast<double>(i_), 0.0};
  }

 private:
  // RuntimeError unless the imaginary part is zero.
  TB_API void CheckReal(const char* type) const;

  enum class Kind : uint8_t { kBool, kInt, kDouble, kComplex } kind_ = Kind::kInt;
  int64_t i_ = 0;
  double d_ = 0;     // the real part of a complex number
  double imag_ = 0;  // the imaginary part of a complex number
};

class Value {
 public:
  enum class Tag : uint8_t {
    kNone,
    kBool,
    kInt,
    kDouble,
    kTensor,
    kTensorList,
    kOptionalTensorList,
    kIntList,
    kDoubleList,
    kBoolList,
    kString,
    kDType,
    kDevice,
    kComplex,
  };

  Value() = default;
  Value(std::nullopt_t) {}                       // NOLINT
  Value(bool v) : v_(v) {}                       // NOLINT
  Value(int64_t v) : v_(v) {}                    // NOLINT
  Value(int v) : v_(static_cast<int64_t>(v)) {}  // NOLINT
  Value(double v) : v_(v) {}                     // NOLINT
  Value(std::complex<double> v) : v_(v) {}       // NOLINT
  Value(Tensor v) : v_(std::move(v)) {}          // NOLINT
  Value(std::optional<Tensor> v) {               // NOLINT
    if (v) v_ = std::move(*v);
  }
  Value(std::vector<Tensor> v) : v_(std::move(v)) {}                 // NOLINT
  Value(std::vector<std::optional<Tensor>> v) : v_(std::move(v)) {}  // NOLINT
  Value(std::vector<int64_t> v) : v_(std::move(v)) {}                // NOLINT
  Value(std::vector<double> v) : v_(std::move(v)) {}                 // NOLINT
  Value(std::vector<bool> v) : v_(std::move(v)) {}                   // NOLINT
  Value(std::string v) : v_(std::move(v)) {}                         // NOLINT
  Value(const char* v) : v_(std::string(v)) {}                       // NOLINT
  Value(DType v) : v_(v) {}                                          // NOLINT
  Value(Device v) : v_(v) {}                                         // NOLINT
  Value(const Scalar& s) {                                           // NOLINT
    if (s.is_bool())
      v_ = s.to_int() != 0;
    else if (s.is_integral())
      v_ = s.to_int();
    else if (s.is_complex())
      v_ = s.to_complex();
    else
      v_ = s.to_double();
  }

  Tag tag() const { return static_cast<Tag>(v_.index()); }
  bool is_none() const { return tag() == Tag::kNone; }
  bool is_bool() const { return tag() == Tag::kBool; }
  bool is_int() const { return tag() == Tag::kInt; }
  bool is_double() const { return tag() == Tag::kDouble; }
  bool is_tensor() const { return tag() == Tag::kTensor; }
  bool is_complex() const { return tag() == Tag::kComplex; }
  // A number of any kind (bool, int, float, complex): what a Scalar argument takes.
  bool is_scalar() const { return is_bool() || is_int() || is_double() || is_complex(); }

  bool to_bool() const { return std::get<bool>(v_); }
  int64_t to_int() const { return std::get<int64_t>(v_); }
  double to_double() const {
    if (is_complex()) return to_scalar().to_double();  // RuntimeError for a nonzero imag part
    return is_double() ? std::get<double>(v_) : static_cast<double>(to_int());
  }
  Scalar to_scalar() const {
    if (is_bool()) return Scalar(to_bool());
    if (is_int()) return Scalar(to_int());
    if (is_complex()) return Scalar(to_complex());
    return Scalar(std::get<double>(v_));
  }
  std::complex<double> to_complex() const {
    if (is_complex()) return std::get<std::complex<double>>(v_);
    return {to_double(), 0.0};
  }
  const Tensor& to_tensor() const { return std::get<Tensor>(v_); }
  Tensor& to_tensor() { return std::get<Tensor>(v_); }
  const std::vector<Tensor>& to_tensor_list() const { return std::get<std::vector<Tensor>>(v_); }
  const std::vector<std::optional<Tensor>>& to_optional_tensor_list() const {
    return std::get<std::vector<std::optional<Tensor>>>(v_);
  }
  const std::vector<int64_t>& to_int_list() const { return std::get<std::vector<int64_t>>(v_); }
  const std::vector<double>& to_double_list() const { return std::get<std::vector<double>>(v_); }
  const std::vector<bool>& to_bool_list() const { return std::get<std::vector<bool>>(v_); }
  const std::string& to_string() const { return std::get<std::string>(v_); }
  DType to_dtype() const { return std::get<DType>(v_); }
  Device to_device() const { return std::get<Device>(v_); }

  // "Tensor", "int", "None", ... for error messages.
  TB_API const char* type_name() const;
  // A short readable form: "3", "0.5", "'tanh'", "[1, 2]", "Tensor[2, 3] float32", ...
  TB_API std::string Repr() const;

 private:
  std::variant<std::monostate, bool, int64_t, double, Tensor, std::vector<Tensor>,
               std::vector<std::optional<Tensor>>, std::vector<int64_t>, std::vector<double>,
               std::vector<bool>, std::string, DType, Device, std::complex<double>>
      v_;
};

using Stack = std::vector<Value>;

// A Python number passed where a Tensor is expected, as PyTorch wraps it: a 0-d tensor of
// int64 (int), float64 (float), complex128 (complex) or bool, marked as a wrapped number.
TB_API Tensor WrapNumber(const Value& number);

}  // namespace tb
