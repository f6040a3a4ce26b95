#include "dispatch/plan.h"

#include <algorithm>
#include <chrono>
#include <sstream>

namespace tb {

int Plan::NewValue(std::string name) {
  value_names_.push_back(std::move(name));
  return static_cast<int>(value_names_.size()) - 1;
}

int Plan::AddInput(std::string name) {
  TB_CHECK(!finalized_, ValueError) << "Plan: cannot add to a finalized plan";
  int v = NewValue(std::move(name));
  inputs_.push_back(v);
  return v;
}

std::vector<int> Plan::AddNode(std::string_view op, std::vector<Arg> args, int num_outputs,
                               std::string name) {
  TB_CHECK(!finalized_, ValueError) << "Plan: cannot add to a finalized plan";
  Node n;
  n.op = table_->Intern(op);
  n.args = std::move(args);
  // Constants are checked and converted against the schema once, here (a Python number
  // where a Tensor goes becomes a wrapped-number tensor, an int for int[2] a list, ...).
  if (const FunctionSchema* schema = table_->Info(n.op).schema) {
    TB_CHECK(n.args.size() == schema->arguments().size(), TypeError)
        << "Plan: node " << name << " gives " << n.args.size() << " arguments to "
        << schema->ToString();
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (n.args[i].kind == Arg::Kind::kConstant) {
        n.args[i].constant = schema->CheckArgument(i, std::move(n.args[i].constant));
      }
    }
  }
  for (int i = 0; i < num_outputs; ++i) {
    n.outputs.push_back(NewValue(num_outputs == 1 ? name : name + "." + std::to_string(i)));
  }
  n.name = std::move(name);
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

void Plan::SetOutputs(std::vector<Arg> outputs) { outputs_ = std::move(outputs); }

void Plan::ExpectStrides(int value, std::vector<int64_t> strides) {
  TB_CHECK(!finalized_, ValueError) << "Plan: cannot add to a finalized plan";
  TB_CHECK(value >= 0 && value < static_cast<int>(value_names_.size()), ValueError)
      << "Plan: ExpectStrides of unknown value " << value;
  if (expected_strides_.size() < value_names_.size()) expected_strides_.resize(value_names_.size());
  expected_strides_[value] = std::move(strides);
}

void Plan::SetValueBytes(int value, int64_t bytes) {
  TB_CHECK(!finalized_, ValueError) << "Plan: cannot add to a finalized plan";
  TB_CHECK(value >= 0 && value < static_cast<int>(value_names_.size()), ValueError)
      << "Plan: SetValueBytes of unknown value " << value;
  TB_CHECK(bytes >= 0, ValueError) << "Plan: SetValueBytes of " << bytes << " bytes";
  if (value_bytes_.size() < value_names_.size()) value_bytes_.resize(value_names_.size(), 0);
  value_bytes_[value] = bytes;
}

void Plan::SetValueBase(int value, int base) {
  TB_CHECK(!finalized_, ValueError) << "Plan: cannot add to a finalized plan";
  const int nv = static_cast<int>(value_names_.size());
  TB_CHECK(value >= 0 && value < nv && base >= 0 && base < value, ValueError)
      << "Plan: SetValueBase(" << value << ", " << base
      << "): the base must be a value made before its view";
  if (value_base_.size() < value_names_.size()) value_base_.resize(value_names_.size(), -1);
  value_base_[value] = base;
}

namespace {

// Whether t is laid out with `strides` (dimensions of size 1 may have any stride).
bool HasStrides(const Tensor& t, const std::vector<int64_t>& strides) {
  if (strides.size() != static_cast<size_t>(t.ndim())) return false;
  for (int64_t d = 0; d < t.ndim(); ++d) {
    if (t.shape()[d] != 1 && t.strides()[d] != strides[d]) return false;
  }
  return true;
}

}  // namespace

Tensor Plan::Restride(const Tensor& t, const std::vector<int64_t>& strides) const {
  Stack s{Value(std::vector<int64_t>(t.shape().begin(), t.shape().end())),
          Value(strides),
          Value(t.dtype()),
          Value(),
          Value(),
          Value()};
  table_->Call(empty_strided_op_, s);
  Tensor out = s[0].to_tensor();
  Stack c{Value(out), Value(t), Value(false)};
  table_->Call(copy_op_, c);
  restrides_.fetch_add(1, std::memory_order_relaxed);
  return out;
}

void Plan::ForEachValue(const Arg& a, const std::function<void(int)>& f) const {
  if (a.kind == Arg::Kind::kValue || a.kind == Arg::Kind::kItem) f(a.value);
  for (const Arg& item : a.items) ForEachValue(item, f);
}

void Plan::Finalize() {
  TB_CHECK(!finalized_, ValueError) << "Plan: already finalized";
  const int nv = static_cast<int>(value_names_.size());
  // Last use of each value: the index of the last node reading it (outputs live to the end).
  const int kEnd = static_cast<int>(nodes_.size());
  std::vector<int> last_use(nv, -1);
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    for (const Arg& a : nodes_[i].args) ForEachValue(a, [&](int v) { last_use[v] = i; });
  }
  for (const Arg& a : outputs_) ForEachValue(a, [&](int v) { last_use[v] = kEnd; });
  // Slot assignment by liveness: inputs first, then each node's outputs take a free slot.
  slot_of_.assign(nv, -1);
  std::vector<int> free_slots;
  auto take = [&]() {
    if (!free_slots.empty()) {
      int s = free_slots.back();
      free_slots.pop_back();
      return s;
    }
    return static_cast<int>(num_slots_++);
  };
  auto release_dead = [&](int node_index, std::vector<int>* freed) {
    // Values whose last use is this node die after it.
    for (int v = 0; v < nv; ++v) {
      if (slot_of_[v] >= 0 && last_use[v] == node_index) {
        freed->push_back(slot_of_[v]);
        free_slots.push_back(slot_of_[v]);
      }
    }
  };
  for (int v : inputs_) slot_of_[v] = take();
  std::vector<int> unused_inputs;
  release_dead(-1, &unused_inputs);  // inputs nobody reads
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    Node& n = nodes_[i];
    n.resolution = table_->Resolve(n.op, DeviceType::kCPU);
    if (n.resolution.served_by == ServedBy::kMissing) {
      TB_THROW(NotImplementedError)
          << "Plan: node " << n.name << " calls " << table_->Info(n.op).qualified
          << ", which has no kernel, decomposition or fallback";
    }
    // Free this node's dead inputs first so that its outputs can reuse their slots: kernels
    // read all arguments before the results are stored.
    release_dead(i, &n.free_after);
    for (int v : n.outputs) {
      const bool read = last_use[v] != -1;
      n.keep_output.push_back(read);
      if (read) slot_of_[v] = take();
      const bool expect =
          read && v < static_cast<int>(expected_strides_.size()) && !expected_strides_[v].empty();
      n.expect_strides.push_back(expect ? expected_strides_[v] : std::vector<int64_t>{});
    }
  }
  ComputePeakBytes(last_use);
  input_expect_.clear();
  for (int v : inputs_) {
    if (v < static_cast<int>(expected_strides_.size()) && !expected_strides_[v].empty()) {
      input_expect_.resize(inputs_.size());
      break;
    }
  }
  for (size_t i = 0; i < input_expect_.size(); ++i)
    input_expect_[i] = expected_strides_[inputs_[i]];
  empty_strided_op_ = table_->Intern("aten::empty_strided");
  copy_op_ = table_->Intern("aten::copy_");
  output_inputs_.clear();
  for (const Arg& a : outputs_) {
    auto it = a.kind == Arg::Kind::kValue ? std::find(inputs_.begin(), inputs_.end(), a.value)
                                          : inputs_.end();
    output_inputs_.push_back(it == inputs_.end() ? -1 : static_cast<int>(it - inputs_.begin()));
  }
  // Made here, before any run: a run on another thread may read them as soon as profiling
  // is turned on, with no other synchronisation.
  counters_ = std::make_unique<Counters[]>(nodes_.size());
  BuildRunArrays();
  finalized_ = true;
}

void Plan::BuildRunArrays() {
  run_nodes_.clear();
  run_args_.clear();
  run_frees_.clear();
  run_outs_.clear();
  for (const Node& n : nodes_) {
    RunNode r{n.op, n.resolution, 0, 0, 0, 0, 0, 0};
    r.args_begin = static_cast<uint32_t>(run_args_.size());
    // A value whose slot this node frees is moved into its last argument that names it (no
    // reference count to raise and drop), unless a list argument after it reads it too.
    std::vector<int> last_arg(value_names_.size(), -1);
    for (size_t i = 0; i < n.args.size(); ++i) {
      ForEachValue(n.args[i], [&](int v) { last_arg[v] = static_cast<int>(i); });
    }
    for (size_t i = 0; i < n.args.size(); ++i) {
      const Arg& a = n.args[i];
      RunArg ra{a.kind, false};
      if (a.kind == Arg::Kind::kValue || a.kind == Arg::Kind::kItem) {
        ra.slot = slot_of_[a.value];
        ra.index = a.index;
        ra.move =
            a.kind == Arg::Kind::kValue && last_arg[a.value] == static_cast<int>(i) &&
            std::find(n.free_after.begin(), n.free_after.end(), ra.slot) != n.free_after.end();
      } else {
        ra.arg = &a;
      }
      run_args_.push_back(ra);
    }
    r.args_end = static_cast<uint32_t>(run_args_.size());
    r.frees_begin = static_cast<uint32_t>(run_frees_.size());
    run_frees_.insert(run_frees_.end(), n.free_after.begin(), n.free_after.end());
    r.frees_end = static_cast<uint32_t>(run_frees_.size());
    r.outs_begin = static_cast<uint32_t>(run_outs_.size());
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      RunOut o{n.keep_output[k] ? slot_of_[n.outputs[k]] : -1};
      if (n.keep_output[k] && !n.expect_strides[k].empty()) o.expect = &n.expect_strides[k];
      run_outs_.push_back(o);
    }
    r.outs_end = static_cast<uint32_t>(run_outs_.size());
    run_nodes_.push_back(r);
  }
}

void Plan::ComputePeakBytes(const std::vector<int>& last_use) {
  // A buffer lives until the last use of the value that made it or of any view of it: views
  // are numbered after their bases, so one pass from the last value down carries a chain's
  // last use to its first base.
  const int nv = static_cast<int>(value_names_.size());
  value_bytes_.resize(nv, 0);
  value_base_.resize(nv, -1);
  std::vector<int> dies = last_use;  // -1: never read (an unkept result or an unused input)
  for (int v = nv - 1; v >= 0; --v) {
    const int b = value_base_[v];
    if (b >= 0 && dies[v] != -1) dies[b] = std::max(dies[b], dies[v]);
  }
  // Each node: its kept results join the live set while its arguments are still alive; the
  // buffers whose last use it is leave after it. Inputs given bytes are live from the start.
  std::vector<std::vector<int>> leaving(nodes_.size());
  int64_t live = 0;
  for (int v : inputs_) {
    if (dies[v] < 0 || value_bytes_[v] == 0) continue;
    live += value_bytes_[v];
    if (dies[v] < static_cast<int>(nodes_.size())) leaving[dies[v]].push_back(v);
  }
  peak_bytes_ = live;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    const Node& n = nodes_[i];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const int v = n.outputs[k];
      if (!n.keep_output[k] || dies[v] < 0 || value_bytes_[v] == 0) continue;
      live += value_bytes_[v];
      if (dies[v] < static_cast<int>(nodes_.size())) leaving[dies[v]].push_back(v);
    }
    peak_bytes_ = std::max(peak_bytes_, live);
    for (int v : leaving[i]) live -= value_bytes_[v];
  }
}

Value Plan::Item(const RunArg& a, const std::vector<Value>& slots) const {
  const Value& list = slots[a.slot];
  TB_CHECK(list.tag() == Value::Tag::kTensorList &&
               a.index < static_cast<int>(list.to_tensor_list().size()),
           RuntimeError)
      << "Plan: item " << a.index << " of a value that is not a long enough Tensor[]";
  return Value(list.to_tensor_list()[a.index]);
}

Value Plan::Materialize(const Arg& a, const std::vector<Value>& slots) const {
  switch (a.kind) {
    case Arg::Kind::kValue: return slots[slot_of_[a.value]];
    case Arg::Kind::kItem: {
      const Value& list = slots[slot_of_[a.value]];
      TB_CHECK(list.tag() == Value::Tag::kTensorList &&
                   a.index < static_cast<int>(list.to_tensor_list().size()),
               RuntimeError)
          << "Plan: item " << a.index << " of a value that is not a long enough Tensor[]";
      return Value(list.to_tensor_list()[a.index]);
    }
    case Arg::Kind::kConstant: return a.constant;
    case Arg::Kind::kList: {
      std::vector<Tensor> ts;
      ts.reserve(a.items.size());
      for (const Arg& item : a.items) {
        Value v = Materialize(item, slots);
        TB_CHECK(v.is_tensor(), TypeError) << "Plan: a Tensor[] item is a " << v.type_name();
        ts.push_back(v.to_tensor());
      }
      return Value(std::move(ts));
    }
    case Arg::Kind::kOptionalList: {
      std::vector<std::optional<Tensor>> ts;
      for (const Arg& item : a.items) {
        Value v = Materialize(item, slots);
        if (v.is_none())
          ts.emplace_back(std::nullopt);
        else
          ts.emplace_back(v.to_tensor());
      }
      return Value(std::move(ts));
    }
  }
  return Value();
}

Stack Plan::Run(Stack inputs) const {
  TB_CHECK(finalized_, ValueError) << "Plan: Run before Finalize";
  TB_CHECK(inputs.size() == inputs_.size(), TypeError)
      << "Plan: expected " << inputs_.size() << " inputs, got " << inputs.size();
  std::vector<Value> slots(num_slots_);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!input_expect_.empty() && !input_expect_[i].empty() && inputs[i].is_tensor() &&
        !HasStrides(inputs[i].to_tensor(), input_expect_[i])) {
      inputs[i] = Value(Restride(inputs[i].to_tensor(), input_expect_[i]));
    }
    slots[slot_of_[inputs_[i]]] = std::move(inputs[i]);
  }
  Stack stack;
  stack.reserve(8);
  const bool profile = profiling_.load(std::memory_order_relaxed);
  using Clock = std::chrono::steady_clock;
  Clock::time_point start;
  for (size_t i = 0; i < run_nodes_.size(); ++i) {
    const RunNode& n = run_nodes_[i];
    if (profile) start = Clock::now();
    stack.clear();
    for (uint32_t j = n.args_begin; j < n.args_end; ++j) {
      const RunArg& a = run_args_[j];
      switch (a.kind) {
        case Arg::Kind::kValue:
          if (a.move) {
            stack.push_back(std::move(slots[a.slot]));
          } else {
            stack.push_back(slots[a.slot]);
          }
          break;
        case Arg::Kind::kConstant: stack.push_back(a.arg->constant); break;
        default: stack.push_back(a.arg != nullptr ? Materialize(*a.arg, slots) : Item(a, slots));
      }
    }
    try {
      table_->CallResolved(n.op, n.resolution, stack);
    } catch (const Error& e) {
      // The node that failed, in the graph's own names: the kernel's message alone does not
      // say where in a graph of hundreds of nodes it came from.
      throw Error(e.kind(), "Plan: node " + nodes_[i].name + " (" + table_->Info(n.op).qualified +
                                "): " + e.message());
    }
    for (uint32_t j = n.frees_begin; j < n.frees_end; ++j) slots[run_frees_[j]] = Value();
    const uint32_t num_outs = n.outs_end - n.outs_begin;
    TB_CHECK(stack.size() >= num_outs, RuntimeError)
        << "Plan: node " << nodes_[i].name << " returned " << stack.size() << " values, expected "
        << num_outs;
    for (uint32_t k = 0; k < num_outs; ++k) {
      const RunOut& o = run_outs_[n.outs_begin + k];
      if (o.slot < 0) continue;
      if (o.expect != nullptr && stack[k].is_tensor() &&
          !HasStrides(stack[k].to_tensor(), *o.expect)) {
        stack[k] = Value(Restride(stack[k].to_tensor(), *o.expect));
      }
      slots[o.slot] = std::move(stack[k]);
    }
    if (profile) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
      counters_[i].calls.fetch_add(1, std::memory_order_relaxed);
      const auto t = static_cast<uint64_t>(ns.count());
      counters_[i].ns.fetch_add(t, std::memory_order_relaxed);
      uint64_t m = counters_[i].min_ns.load(std::memory_order_relaxed);
      while (t < m && !counters_[i].min_ns.compare_exchange_weak(m, t, std::memory_order_relaxed)) {
      }
    }
  }
  Stack out;
  out.reserve(outputs_.size());
  for (const Arg& a : outputs_) out.push_back(Materialize(a, slots));
  return out;
}

void Plan::SetProfiling(bool on) {
  TB_CHECK(finalized_, ValueError) << "Plan: profiling starts after Finalize";
  if (on) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      counters_[i].calls.store(0, std::memory_order_relaxed);
      counters_[i].ns.store(0, std::memory_order_relaxed);
      counters_[i].min_ns.store(UINT64_MAX, std::memory_order_relaxed);
    }
  }
  profiling_.store(on && !nodes_.empty(), std::memory_order_relaxed);
}

std::vector<Plan::NodeTime> Plan::NodeTimes() const {
  std::vector<NodeTime> out;
  out.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    NodeTime t{n.name, table_->Info(n.op).qualified, n.resolution.served_by};
    if (finalized_) {
      t.calls = counters_[i].calls.load(std::memory_order_relaxed);
      t.total_ns = counters_[i].ns.load(std::memory_order_relaxed);
      t.min_ns = t.calls ? counters_[i].min_ns.load(std::memory_order_relaxed) : 0;
    }
    out.push_back(std::move(t));
  }
  return out;
}

size_t Plan::CountServedBy(ServedBy s) const {
  return static_cast<size_t>(std::count_if(
      nodes_.begin(), nodes_.end(), [&](const Node& n) { return n.resolution.served_by == s; }));
}

std::string Plan::Dump() const {
  std::ostringstream os;
  os << "Plan: " << inputs_.size() << " inputs, " << nodes_.size() << " nodes, " << num_slots_
     << " slots for " << value_names_.size() << " values\n";
  auto name = [&](int v) {
    std::string slot = !finalized_       ? ""
                       : slot_of_[v] < 0 ? "[unused]"
                                         : "[s" + std::to_string(slot_of_[v]) + "]";
    return "%" + value_names_[v] + slot;
  };
  std::function<std::string(const Arg&)> arg = [&](const Arg& a) -> std::string {
    switch (a.kind) {
      case Arg::Kind::kValue: return name(a.value);
      case Arg::Kind::kItem: return name(a.value) + "[" + std::to_string(a.index) + "]";
      case Arg::Kind::kConstant: return a.constant.Repr();
      default: {
        std::string s = "[";
        for (size_t i = 0; i < a.items.size(); ++i) s += (i ? ", " : "") + arg(a.items[i]);
        return s + "]";
      }
    }
  };
  for (int v : inputs_) os << "  input " << name(v) << "\n";
  for (const Node& n : nodes_) {
    os << "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k) os << (k ? ", " : "") << name(n.outputs[k]);
    os << " = " << table_->Info(n.op).qualified << "(";
    for (size_t i = 0; i < n.args.size(); ++i) os << (i ? ", " : "") << arg(n.args[i]);
    os << ")  [" << ServedByName(n.resolution.served_by);
    if (n.resolution.where != nullptr) os << ": " << *n.resolution.where;
    os << "]";
    if (!n.free_after.empty()) {
      os << "  frees";
      for (int s : n.free_after) os << " s" << s;
    }
    os << "\n";
  }
  os << "  return";
  for (const Arg& a : outputs_) os << " " << arg(a);
  os << "\n";
  return os.str();
}

}  // namespace tb
