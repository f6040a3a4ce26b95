// ATen function schemas, as PyTorch writes them:
//   aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
// Parsed from the text torch prints (dispatch/aten_schemas.txt, generated from torch and
// embedded in the library), so the table's schemas are PyTorch's own.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bridge/api.h"
#include "dispatch/op_name.h"
#include "dispatch/value.h"

namespace tb {

// What an argument holds. Lists are marked by Type::list; "?" by Type::optional.
enum class TypeKind : uint8_t {
  kTensor,
  kInt,  // int and SymInt
  kFloat,
  kBool,
  kScalar,
  kScalarType,
  kString,
  kDevice,
  kLayout,
  kMemoryFormat,
  kGenerator,
  kOther,  // complex, Any, Dict(...), Storage, ... (not checked)
};

struct ArgType {
  TypeKind kind = TypeKind::kOther;
  bool list = false;              // "int[]", "Tensor[]"
  int64_t list_size = 0;          // N in "int[N]" (0: any length)
  bool optional = false;          // "Tensor?", "int[1]?"
  bool element_optional = false;  // "Tensor?[]"
  bool is_write = false;          // alias annotation with "!": the op writes to it
  std::string text;               // as torch writes it: "Tensor(a!)", "int[1]?"
};

struct Argument {
  std::string name;
  ArgType type;
  bool kwarg_only = false;
  std::optional<std::string> default_text;  // as torch writes it: "1", "None", "[0, 0]"
  std::optional<Value> default_value;       // parsed, when it has a default
};

class TB_API FunctionSchema {
 public:
  // Parses torch's text form; ValueError with the position on malformed text.
  static FunctionSchema Parse(std::string_view text);

  const OpName& name() const { return name_; }
  const std::vector<Argument>& arguments() const { return arguments_; }
  const std::vector<Argument>& returns() const { return returns_; }
  // True when some argument is written to (in-place and out= ops).
  bool is_mutable() const;
  // Reassembled from the parsed parts, in torch's format (equal to str(torch schema)).
  std::string ToString() const;

  // Binds a call: positional arguments in order, then keywords by name; fills defaults;
  // checks each value against its type. TypeError/ValueError name the op and the argument.
  Stack Bind(Stack positional, std::vector<std::pair<std::string, Value>> keywords) const;
  // Checks and normalises one argument value (as Bind does for each).
  Value CheckArgument(size_t index, Value v) const;

 private:
  OpName name_;
  std::vector<Argument> arguments_;
  std::vector<Argument> returns_;
  std::string returns_text_;
};

// The schema torch gives `qualified` ("aten::add.Tensor"), from the embedded table; null when
// torch has no such op. Thread-safe; parsed once, on first use.
TB_API const FunctionSchema* FindAtenSchema(std::string_view qualified);
// Every name in the embedded table, and whether torch tags it core.
TB_API std::vector<std::pair<std::string, bool>> AtenSchemaNames();

}  // namespace tb
