#include "dispatch/schema.h"

#include <cctype>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "bridge/error.h"

namespace tb {

// The embedded text of dispatch/aten_schemas.txt (a generated source, see CMakeLists.txt).
extern const char* const kAtenSchemasText[];
extern const size_t kAtenSchemasTextChunks;

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

[[noreturn]] void Malformed(std::string_view text, std::string_view why) {
  TB_THROW(ValueError) << "malformed schema '" << text << "': " << why;
}

// Splits at commas that are not inside (), [] or quotes.
std::vector<std::string_view> SplitTopLevel(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  int depth = 0;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') quoted = !quoted;
    if (quoted) continue;
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == sep && depth == 0) {
      out.push_back(Trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  auto last = Trim(s.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

// Position of the matching close bracket for the open bracket at `open`.
size_t MatchClose(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(' || s[i] == '[') ++depth;
    if (s[i] == ')' || s[i] == ']') {
      if (--depth == 0) return i;
    }
  }
  return std::string_view::npos;
}

ArgType ParseType(std::string_view text, std::string_view schema) {
  ArgType t;
  t.text = std::string(text);
  size_t i = 0;
  while (i < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' || text[i] == '.')) {
    ++i;
  }
  std::string_view base = text.substr(0, i);
  static const std::unordered_map<std::string_view, TypeKind> kinds = {
      {"Tensor", TypeKind::kTensor},
      {"int", TypeKind::kInt},
      {"SymInt", TypeKind::kInt},
      {"float", TypeKind::kFloat},
      {"bool", TypeKind::kBool},
      {"Scalar", TypeKind::kScalar},
      {"ScalarType", TypeKind::kScalarType},
      {"str", TypeKind::kString},
      {"Device", TypeKind::kDevice},
      {"Layout", TypeKind::kLayout},
      {"MemoryFormat", TypeKind::kMemoryFormat},
      {"Generator", TypeKind::kGenerator},
  };
  auto it = kinds.find(base);
  t.kind = it == kinds.end() ? TypeKind::kOther : it->second;
  // Suffixes, in any of torch's orders: (alias) [N] (alias) ? [] ?
  while (i < text.size()) {
    char c = text[i];
    if (c == '(') {
      size_t close = MatchClose(text, i);
      if (close == std::string_view::npos) Malformed(schema, "unclosed '(' in a type");
      std::string_view inner = text.substr(i + 1, close - i - 1);
      if (t.kind == TypeKind::kTensor && inner.find('!') != std::string_view::npos) {
        t.is_write = true;
      }
      if (t.kind != TypeKind::kTensor) t.kind = TypeKind::kOther;  // Dict(...), Future(...)
      i = close + 1;
    } else if (c == '[') {
      size_t close = MatchClose(text, i);
      if (close == std::string_view::npos) Malformed(schema, "unclosed '[' in a type");
      if (t.optional) {
        t.element_optional = true;  // "Tensor?[]"
        t.optional = false;
      }
      t.list = true;
      std::string_view n = text.substr(i + 1, close - i - 1);
      t.list_size = n.empty() ? 0 : std::strtoll(std::string(n).c_str(), nullptr, 10);
      i = close + 1;
    } else if (c == '?') {
      t.optional = true;
      ++i;
    } else {
      t.kind = TypeKind::kOther;
      break;
    }
  }
  return t;
}

// torch's ScalarType numbering, for defaults such as "ScalarType? dtype=4".
std::optional<DType> DTypeFromTorchCode(int64_t code) {
  switch (code) {
    case 0: return DType::kUInt8;
    case 1: return DType::kInt8;
    case 2: return DType::kInt16;
    case 3: return DType::kInt32;
    case 4: return DType::kInt64;
    case 5: return DType::kFloat16;
    case 6: return DType::kFloat32;
    case 7: return DType::kFloat64;
    case 9: return DType::kComplex64;
    case 10: return DType::kComplex128;
    case 11: return DType::kBool;
    case 15: return DType::kBFloat16;
    default: return std::nullopt;
  }
}

bool LooksFloat(std::string_view s) {
  return s.find_first_of(".eE") != std::string_view::npos &&
         s.find("inf") == std::string_view::npos;
}

std::optional<Value> ParseDefault(std::string_view text, const ArgType& type) {
  if (text == "None") return Value();
  if (text == "True") return Value(true);
  if (text == "False") return Value(false);
  if (text.size() >= 2 && text.front() == '"')
    return Value(std::string(text.substr(1, text.size() - 2)));
  if (!text.empty() && text.front() == '[') {
    auto items = SplitTopLevel(text.substr(1, text.size() - 2), ',');
    if (items.size() == 1 && items[0].empty()) items.clear();
    if (type.kind == TypeKind::kFloat) {
      std::vector<double> v;
      v.reserve(items.size());
      for (auto x : items) v.push_back(std::strtod(std::string(x).c_str(), nullptr));
      return Value(std::move(v));
    }
    if (type.kind == TypeKind::kBool) {
      std::vector<bool> v;
      v.reserve(items.size());
      for (auto x : items) v.push_back(x == "True");
      return Value(std::move(v));
    }
    if (type.kind == TypeKind::kTensor) return Value(std::vector<Tensor>());
    std::vector<int64_t> v;
    v.reserve(items.size());
    for (auto x : items) v.push_back(std::strtoll(std::string(x).c_str(), nullptr, 10));
    return Value(std::move(v));
  }
  std::string s(text);
  char* end = nullptr;
  switch (type.kind) {
    case TypeKind::kInt: {
      int64_t v = std::strtoll(s.c_str(), &end, 10);
      if (*end != '\0') return Value(s);  // a named constant
      if (type.list) {
        return Value(std::vector<int64_t>(type.list_size > 0 ? type.list_size : 1, v));
      }
      return Value(v);
    }
    case TypeKind::kFloat: return Value(std::strtod(s.c_str(), nullptr));
    case TypeKind::kScalar:
      if (LooksFloat(s)) return Value(std::strtod(s.c_str(), nullptr));
      return Value(static_cast<int64_t>(std::strtoll(s.c_str(), nullptr, 10)));
    case TypeKind::kScalarType: {
      int64_t code = std::strtoll(s.c_str(), &end, 10);
      if (*end == '\0') {
        if (auto d = DTypeFromTorchCode(code)) return Value(*d);
      }
      if (s == "long") return Value(DType::kInt64);
      return Value(s);
    }
    default: return Value(s);  // Layout, MemoryFormat, ...: by name
  }
}

Argument ParseArgument(std::string_view text, bool kwarg_only, std::string_view schema) {
  Argument arg;
  arg.kwarg_only = kwarg_only;
  // "type name=default": '=' outside brackets and quotes.
  auto parts = SplitTopLevel(text, '=');
  std::string_view decl = parts[0];
  if (parts.size() > 2) Malformed(schema, "more than one '=' in an argument");
  size_t space = std::string_view::npos;
  int depth = 0;
  for (size_t i = 0; i < decl.size(); ++i) {
    if (decl[i] == '(' || decl[i] == '[') ++depth;
    if (decl[i] == ')' || decl[i] == ']') --depth;
    if (decl[i] == ' ' && depth == 0) space = i;
  }
  if (space == std::string_view::npos) {
    arg.type = ParseType(decl, schema);  // unnamed (returns)
  } else {
    arg.type = ParseType(Trim(decl.substr(0, space)), schema);
    arg.name = std::string(Trim(decl.substr(space + 1)));
  }
  if (parts.size() == 2) {
    arg.default_text = std::string(parts[1]);
    arg.default_value = ParseDefault(parts[1], arg.type);
  }
  return arg;
}

}  // namespace

FunctionSchema FunctionSchema::Parse(std::string_view text) {
  text = Trim(text);
  FunctionSchema s;
  size_t open = text.find('(');
  if (open == std::string_view::npos) Malformed(text, "no '('");
  s.name_ = OpName::Parse(text.substr(0, open));
  size_t close = MatchClose(text, open);
  if (close == std::string_view::npos) Malformed(text, "unbalanced parentheses");
  bool kwarg_only = false;
  for (std::string_view a : SplitTopLevel(text.substr(open + 1, close - open - 1), ',')) {
    if (a.empty()) Malformed(text, "empty argument");
    if (a == "*") {
      kwarg_only = true;
      continue;
    }
    s.arguments_.push_back(ParseArgument(a, kwarg_only, text));
  }
  std::string_view rest = Trim(text.substr(close + 1));
  if (rest.substr(0, 2) != "->") Malformed(text, "no '->' before the returns");
  std::string_view ret = Trim(rest.substr(2));
  s.returns_text_ = std::string(ret);
  if (!ret.empty() && ret.front() == '(' && MatchClose(ret, 0) == ret.size() - 1) {
    for (std::string_view r : SplitTopLevel(ret.substr(1, ret.size() - 2), ',')) {
      if (!r.empty()) s.returns_.push_back(ParseArgument(r, false, text));
    }
  } else {
    s.returns_.push_back(ParseArgument(ret, false, text));
  }
  return s;
}

bool FunctionSchema::is_mutable() const {
  for (const auto& a : arguments_) {
    if (a.type.is_write) return true;
  }
  return false;
}

std::string FunctionSchema::ToString() const {
  std::ostringstream os;
  os << name_.ToString() << "(";
  bool kw = false;
  for (size_t i = 0; i < arguments_.size(); ++i) {
    const Argument& a = arguments_[i];
    if (i) os << ", ";
    if (a.kwarg_only && !kw) {
      os << "*, ";
      kw = true;
    }
    os << a.type.text << " " << a.name;
    if (a.default_text) os << "=" << *a.default_text;
  }
  os << ") -> ";
  const bool tuple = !returns_text_.empty() && returns_text_.front() == '(';
  if (tuple) os << "(";
  for (size_t i = 0; i < returns_.size(); ++i) {
    if (i) os << ", ";
    os << returns_[i].type.text;
    if (!returns_[i].name.empty()) os << " " << returns_[i].name;
  }
  if (tuple) os << ")";
  return os.str();
}

namespace {

// The value of a 0-d tensor in host memory as a number (bool, int, float or complex), or
// nullopt (other shapes, devices, and the 16-bit and sub-byte dtypes).
std::optional<Value> TensorNumber(const Tensor& t) {
  if (!t.defined() || t.ndim() != 0 || !t.device().is_host_accessible()) return std::nullopt;
  switch (t.dtype()) {
    case DType::kBool: return Value(*t.data_as<const bool>());
    case DType::kUInt8: return Value(static_cast<int64_t>(*t.data_as<const uint8_t>()));
    case DType::kInt8: return Value(static_cast<int64_t>(*t.data_as<const int8_t>()));
    case DType::kInt16: return Value(static_cast<int64_t>(*t.data_as<const int16_t>()));
    case DType::kInt32: return Value(static_cast<int64_t>(*t.data_as<const int32_t>()));
    case DType::kInt64: return Value(*t.data_as<const int64_t>());
    case DType::kFloat32: return Value(static_cast<double>(*t.data_as<const float>()));
    case DType::kFloat64: return Value(*t.data_as<const double>());
    case DType::kComplex64: {
      const std::complex<float> c = *t.data_as<const std::complex<float>>();
      return Value(std::complex<double>(c.real(), c.imag()));
    }
    case DType::kComplex128: return Value(*t.data_as<const std::complex<double>>());
    default: return std::nullopt;
  }
}

[[noreturn]] void BadArg(const FunctionSchema& s, const Argument& a, const Value& v) {
  TB_THROW(TypeError) << s.name().ToString() << ": argument '" << a.name << "' must be "
                      << a.type.text << ", not " << v.type_name();
}

// Checks `v` against `a`'s type and normalises it (an int for int[2] becomes [n, n], ...).
Value Check(const FunctionSchema& s, const Argument& a, Value v) {
  const ArgType& t = a.type;
  if (v.is_none()) {
    if (t.optional || t.kind == TypeKind::kOther) return v;
    BadArg(s, a, v);
  }
  switch (t.kind) {
    case TypeKind::kTensor:
      if (!t.list) {
        if (v.is_scalar()) return Value(WrapNumber(v));  // as torch does for `x + 2`
        if (!v.is_tensor()) BadArg(s, a, v);
      } else if (t.element_optional) {
        if (v.tag() == Value::Tag::kTensorList) {
          std::vector<std::optional<Tensor>> opt(v.to_tensor_list().begin(),
                                                 v.to_tensor_list().end());
          return Value(std::move(opt));
        }
        if (v.tag() != Value::Tag::kOptionalTensorList) BadArg(s, a, v);
      } else if (v.tag() != Value::Tag::kTensorList) {
        // An empty Python list arrives as an empty int list.
        if (v.tag() == Value::Tag::kIntList && v.to_int_list().empty())
          return Value(std::vector<Tensor>());
        BadArg(s, a, v);
      }
      return v;
    case TypeKind::kInt:
      if (!t.list) {
        if (!(v.is_int() || v.is_bool())) BadArg(s, a, v);
        return v.is_bool() ? Value(static_cast<int64_t>(v.to_bool())) : v;
      }
      if (v.is_int()) {
        return Value(std::vector<int64_t>(t.list_size > 0 ? t.list_size : 1, v.to_int()));
      }
      if (v.tag() != Value::Tag::kIntList) BadArg(s, a, v);
      if (t.list_size > 1 && v.to_int_list().size() == 1) {
        return Value(std::vector<int64_t>(t.list_size, v.to_int_list()[0]));
      }
      return v;
    case TypeKind::kFloat:
      if (!t.list) {
        if (!(v.is_double() || v.is_int() || v.is_bool())) BadArg(s, a, v);
        return Value(v.is_bool() ? static_cast<double>(v.to_bool()) : v.to_double());
      }
      if (v.tag() == Value::Tag::kIntList) {
        return Value(std::vector<double>(v.to_int_list().begin(), v.to_int_list().end()));
      }
      if (v.tag() != Value::Tag::kDoubleList) BadArg(s, a, v);
      return v;
    case TypeKind::kBool:
      if (t.list) {
        if (v.tag() != Value::Tag::kBoolList) BadArg(s, a, v);
      } else if (!v.is_bool()) {
        BadArg(s, a, v);
      }
      return v;
    case TypeKind::kScalar:
      if (v.is_tensor()) {
        // A one-element (0-d) CPU tensor stands for its value, as in torch's argument parser.
        if (auto n = TensorNumber(v.to_tensor())) return *n;
      }
      if (!v.is_scalar()) BadArg(s, a, v);
      return v;
    case TypeKind::kScalarType:
      if (v.tag() != Value::Tag::kDType) BadArg(s, a, v);
      return v;
    case TypeKind::kString:
      if (v.tag() != Value::Tag::kString) BadArg(s, a, v);
      return v;
    case TypeKind::kDevice:
      if (v.tag() == Value::Tag::kString) {
        const std::string& d = v.to_string();
        if (d == "cpu" || d == "cpu:0") return Value(Device{});
        TB_THROW(NotImplementedError)
            << s.name().ToString() << ": argument '" << a.name << "': device '" << d
            << "' is not supported (the table's kernels run on the cpu)";
      }
      if (v.tag() != Value::Tag::kDevice) BadArg(s, a, v);
      return v;
    case TypeKind::kGenerator:
      TB_THROW(NotImplementedError) << s.name().ToString() << ": argument '" << a.name
                                    << "': explicit generators are not supported";
    case TypeKind::kLayout:
    case TypeKind::kMemoryFormat:
    case TypeKind::kOther: return v;
  }
  return v;
}

}  // namespace

Value FunctionSchema::CheckArgument(size_t index, Value v) const {
  TB_CHECK(index < arguments_.size(), TypeError)
      << name_.ToString() << ": takes " << arguments_.size() << " arguments, not " << index + 1;
  return Check(*this, arguments_[index], std::move(v));
}

Stack FunctionSchema::Bind(Stack positional,
                           std::vector<std::pair<std::string, Value>> keywords) const {
  auto op = [this] { return name_.ToString(); };  // for messages only
  size_t max_positional = 0;
  for (const auto& a : arguments_) max_positional += a.kwarg_only ? 0 : 1;
  if (positional.size() > max_positional) {
    TB_THROW(TypeError) << op() << ": takes " << max_positional << " positional arguments but "
                        << positional.size() << " were given (schema: " << ToString() << ")";
  }
  Stack out;
  out.reserve(arguments_.size());
  for (size_t i = 0; i < arguments_.size(); ++i) {
    const Argument& a = arguments_[i];
    std::optional<Value> v;
    if (i < positional.size()) v = std::move(positional[i]);
    for (auto& [k, kv] : keywords) {
      if (k != a.name) continue;
      if (v) TB_THROW(TypeError) << op() << ": got multiple values for argument '" << a.name << "'";
      v = std::move(kv);
      k.clear();  // consumed
    }
    if (!v) {
      if (!a.default_value) {
        TB_THROW(TypeError) << op() << ": missing required argument '" << a.name << "' ("
                            << a.type.text << ")";
      }
      out.push_back(*a.default_value);
      continue;
    }
    out.push_back(Check(*this, a, std::move(*v)));
  }
  for (const auto& [k, kv] : keywords) {
    if (!k.empty()) {
      TB_THROW(TypeError) << op() << ": got an unexpected keyword argument '" << k << "'";
    }
  }
  return out;
}

namespace {

struct SchemaRegistry {
  std::unordered_map<std::string, std::string_view> lines;  // qualified -> schema text
  std::unordered_map<std::string, bool> core;
  std::unordered_map<std::string, std::unique_ptr<FunctionSchema>> parsed;
  std::mutex mu;
  std::string text;

  SchemaRegistry() {
    for (size_t i = 0; i < kAtenSchemasTextChunks; ++i) text += kAtenSchemasText[i];
    std::string_view all(text);
    while (!all.empty()) {
      size_t nl = all.find('\n');
      std::string_view line = all.substr(0, nl);
      all = nl == std::string_view::npos ? std::string_view() : all.substr(nl + 1);
      if (line.empty() || line.front() == '#') continue;
      bool is_core = false;
      size_t tag = line.rfind(" #core");
      if (tag != std::string_view::npos) {
        line = line.substr(0, tag);
        is_core = true;
      }
      std::string key = OpName::Parse(line.substr(0, line.find('('))).ToString();
      lines.emplace(key, line);
      core.emplace(key, is_core);
    }
  }
  static SchemaRegistry& Get() {
    static SchemaRegistry* r = new SchemaRegistry();
    return *r;
  }
};

}  // namespace

const FunctionSchema* FindAtenSchema(std::string_view qualified) {
  SchemaRegistry& r = SchemaRegistry::Get();
  std::string key = OpName::Parse(qualified).ToString();
  std::lock_guard<std::mutex> lock(r.mu);
  auto p = r.parsed.find(key);
  if (p != r.parsed.end()) return p->second.get();
  auto it = r.lines.find(key);
  if (it == r.lines.end()) return nullptr;
  auto schema = std::make_unique<FunctionSchema>(FunctionSchema::Parse(it->second));
  return r.parsed.emplace(key, std::move(schema)).first->second.get();
}

std::vector<std::pair<std::string, bool>> AtenSchemaNames() {
  SchemaRegistry& r = SchemaRegistry::Get();
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& [k, v] : r.core) out.emplace_back(k, v);
  return out;
}

}  // namespace tb
