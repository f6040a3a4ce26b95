#include "dispatch/op_name.h"

#include "bridge/error.h"

namespace tb {

OpName OpName::Parse(std::string_view qualified) {
  size_t ns = qualified.find("::");
  if (ns == std::string_view::npos || ns == 0 || ns + 2 >= qualified.size()) {
    TB_THROW(ValueError) << "operator name '" << qualified
                         << "' must look like 'aten::add' or 'aten::add.Tensor'";
  }
  size_t dot = qualified.find('.', ns + 2);
  if (dot == ns + 2 || (dot != std::string_view::npos && dot + 1 == qualified.size())) {
    TB_THROW(ValueError) << "operator name '" << qualified
                         << "' has an empty operator or overload name";
  }
  OpName op;
  if (dot == std::string_view::npos) {
    op.name = std::string(qualified);
  } else {
    op.name = std::string(qualified.substr(0, dot));
    op.overload = std::string(qualified.substr(dot + 1));
    // "aten::gelu.default" is torch's spelling of the default overload.
    if (op.overload == "default") op.overload.clear();
  }
  return op;
}

std::string OpName::ToString() const { return overload.empty() ? name : name + "." + overload; }

}  // namespace tb
