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

}  // namespace tb
