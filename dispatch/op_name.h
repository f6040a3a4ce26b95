// Operator names: "aten::add.Tensor" is {name "aten::add", overload "Tensor"}.
// Names are interned to a small OpId when first seen, so that a call never hashes a
// string twice.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bridge/api.h"

namespace tb {

struct OpName {
  std::string name;      // "aten::add"
  std::string overload;  // "Tensor"; empty for the default overload

  // Parses "ns::op" or "ns::op.overload"; ValueError when there is no namespace.
  TB_API static OpName Parse(std::string_view qualified);
  // "aten::add.Tensor" (or "aten::gelu" for the default overload).
  TB_API std::string ToString() const;

  friend bool operator==(const OpName& a, const OpName& b) {
    return a.name == b.name && a.overload == b.overload;
  }
};

using OpId = uint32_t;

}  // namespace tb
