#include "dispatch/value.h"

#include <cmath>
#include <sstream>

namespace tb {

void Scalar::CheckReal(const char* type) const {
  TB_CHECK(imag_ == 0, RuntimeError)
      << "value cannot be converted to type " << type << " without overflow: (" << d_
      << (std::signbit(imag_) ? "" : "+") << imag_ << "j) has a nonzero imaginary part";
}

const char* Value::type_name() const {
  switch (tag()) {
    case Tag::kNone: return "None";
    case Tag::kBool: return "bool";
    case Tag::kInt: return "int";
    case Tag::kDouble: return "float";
    case Tag::kTensor: return "Tensor";
    case Tag::kTensorList: return "Tensor[]";
    case Tag::kOptionalTensorList: return "Tensor?[]";
    case Tag::kIntList: return "int[]";
    case Tag::kDoubleList: return "float[]";
    case Tag::kBoolList: return "bool[]";
    case Tag::kString: return "str";
    case Tag::kDType: return "ScalarType";
    case Tag::kDevice: return "Device";
    case Tag::kComplex: return "complex";
  }
  return "?";
}

std::string Value::Repr() const {
  auto list = [](const auto& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  switch (tag()) {
    case Tag::kNone: return "None";
    case Tag::kBool: return to_bool() ? "True" : "False";
    case Tag::kInt: return std::to_string(to_int());
    case Tag::kDouble: {
      std::ostringstream os;
      os << to_double();
      return os.str();
    }
    case Tag::kTensor: {
      const Tensor& t = to_tensor();
      if (!t.defined()) return "None";
      return "Tensor" + ShapeString(t.shape()) + " " + std::string(DTypeName(t.dtype()));
    }
    case Tag::kIntList: return list(to_int_list());
    case Tag::kString: return "'" + to_string() + "'";
    case Tag::kDType: return std::string(DTypeName(to_dtype()));
    case Tag::kDevice: return DeviceString(to_device());
    case Tag::kComplex: {
      const std::complex<double> c = to_complex();
      std::ostringstream os;
      os << "(" << c.real() << (std::signbit(c.imag()) ? "" : "+") << c.imag() << "j)";
      return os.str();
    }
    default: return type_name();
  }
}

Tensor WrapNumber(const Value& number) {
  Tensor t;
  if (number.is_bool()) {
    t = Tensor::Empty({}, DType::kBool);
    *t.data_as<bool>() = number.to_bool();
  } else if (number.is_int()) {
    t = Tensor::Empty({}, DType::kInt64);
    *t.data_as<int64_t>() = number.to_int();
  } else if (number.is_complex()) {
    t = Tensor::Empty({}, DType::kComplex128);
    *t.data_as<std::complex<double>>() = number.to_complex();
  } else {
    t = Tensor::Empty({}, DType::kFloat64);
    *t.data_as<double>() = number.to_double();
  }
  t.set_wrapped_number(true);
  return t;
}

}  // namespace tb
