#include "dispatch/value.h"

namespace tb {

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
  }
  return "?";
}

Tensor WrapNumber(const Value& number) {
  Tensor t;
  if (number.is_bool()) {
    t = Tensor::Empty({}, DType::kBool);
    *t.data_as<bool>() = number.to_bool();
  } else if (number.is_int()) {
    t = Tensor::Empty({}, DType::kInt64);
    *t.data_as<int64_t>() = number.to_int();
  } else {
    t = Tensor::Empty({}, DType::kFloat64);
    *t.data_as<double>() = number.to_double();
  }
  t.set_wrapped_number(true);
  return t;
}

}  // namespace tb
