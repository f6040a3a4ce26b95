// Calling table ops from C++ by name, as decompositions and C++ users do:
//
//   static const OpRef mul("aten::mul.Tensor");
//   Tensor y = mul(x, x).tensor();
//
// Arguments are bound against the op's schema (defaults, keywords, Python-number wrapping),
// and the call goes through the table: lookup order, backend-legal set and counters apply.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dispatch/op_table.h"

namespace tb {

class TB_API OpResult {
 public:
  explicit OpResult(Stack s) : stack_(std::move(s)) {}
  // The single Tensor result (ValueError otherwise).
  const Tensor& tensor() const;
  // Result `i` of a multi-result op.
  const Tensor& tensor(size_t i) const;
  Stack& stack() { return stack_; }

 private:
  Stack stack_;
};

class TB_API OpRef {
 public:
  explicit OpRef(std::string_view qualified, OpTable& table = OpTable::Global());
  template <typename... Args>
  OpResult operator()(Args&&... args) const {
    Stack s;
    s.reserve(sizeof...(Args));
    (s.emplace_back(std::forward<Args>(args)), ...);
    return Run(std::move(s), {});
  }
  OpResult WithKeywords(Stack positional, std::vector<std::pair<std::string, Value>> kw) const {
    return Run(std::move(positional), std::move(kw));
  }
  OpId id() const { return id_; }

 private:
  OpResult Run(Stack positional, std::vector<std::pair<std::string, Value>> kw) const;
  OpTable* table_;
  OpId id_;
};

}  // namespace tb
