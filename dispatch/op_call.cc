#include "dispatch/op_call.h"

namespace tb {

const Tensor& OpResult::tensor() const {
  TB_CHECK(stack_.size() == 1 && stack_[0].is_tensor(), ValueError)
      << "expected one Tensor result, got " << stack_.size() << " results";
  return stack_[0].to_tensor();
}

const Tensor& OpResult::tensor(size_t i) const {
  TB_CHECK(i < stack_.size() && stack_[i].is_tensor(), ValueError)
      << "result " << i << " is not a Tensor";
  return stack_[i].to_tensor();
}

OpRef::OpRef(std::string_view qualified, OpTable& table)
    : table_(&table), id_(table.Intern(qualified)) {}

OpResult OpRef::Run(Stack positional, std::vector<std::pair<std::string, Value>> kw) const {
  return OpResult(table_->CallWithArgs(id_, std::move(positional), std::move(kw)));
}

}  // namespace tb
