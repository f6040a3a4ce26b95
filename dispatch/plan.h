// Plan: a captured graph of table ops, built once and run many times without leaving C++.
//
// Building resolves each node's kernel (so the backend-legal set and the registered kernels
// at build time decide: a node is a kernel, composite, decomposition or fallback node),
// converts constants once, and assigns every intermediate value a slot. Slots are reused by
// liveness: a value's slot is released after its last use and handed to a later value, so a
// plan holds as few live intermediates as its graph allows. Running binds the inputs (no
// copy), runs the nodes in order and returns the outputs.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/op_table.h"

namespace tb {

class TB_API Plan {
 public:
  // An argument of a node: a value slot, a constant, or a list mixing both.
  struct Arg {
    enum class Kind : uint8_t { kValue, kItem, kConstant, kList, kOptionalList };
    Kind kind = Kind::kConstant;
    int value = -1;          // kValue, kItem: the graph value number
    int index = 0;           // kItem: element `index` of a Tensor[] value
    Value constant;          // kConstant
    std::vector<Arg> items;  // kList / kOptionalList (Tensor[] / Tensor?[])

    static Arg Of(int v) {
      Arg a;
      a.kind = Kind::kValue;
      a.value = v;
      return a;
    }
    static Arg Item(int v, int i) {
      Arg a;
      a.kind = Kind::kItem;
      a.value = v;
      a.index = i;
      return a;
    }
    static Arg Const(Value c) {
      Arg a;
      a.constant = std::move(c);
      return a;
    }
  };

  explicit Plan(OpTable& table = OpTable::Global()) : table_(&table) {}

  // ---- building (graph values are numbered in the order they are created) ----
  int AddInput(std::string name);
  // Adds a node calling `op` with `args` in schema order (all arguments, defaults included)
  // and returns the value numbers of its `num_outputs` results.
  std::vector<int> AddNode(std::string_view op, std::vector<Arg> args, int num_outputs,
                           std::string name);
  void SetOutputs(std::vector<Arg> outputs);
  // The strides the captured graph expects of a value (torch's meta function's). A kernel
  // may lay a result out otherwise (a contiguous result where torch keeps its input's
  // layout): where the graph depends on the layout (views, as_strided, outputs), the plan
  // then copies the result into the expected strides. An input given expected strides is
  // copied into them when it arrives laid out otherwise. Dimensions of size 1 do not count.
  void ExpectStrides(int value, std::vector<int64_t> strides);
  // The bytes a value's buffers take (the captured graph's sizes; 0 for a view of another
  // value's memory, unknown values count 0): Finalize() sums them by liveness (peak_bytes()).
  // An input given bytes is a buffer the caller hands over (the boxed calling convention): it
  // counts from the start of a run until its last use.
  void SetValueBytes(int value, int64_t bytes);
  // `value` is a view of `base`'s memory: for peak_bytes(), the buffer of `base` stays alive
  // until the last use of any of its views (a view of a view counts for the first base).
  void SetValueBase(int value, int base);
  // Resolves kernels, computes liveness and assigns slots. Nothing can be added afterwards.
  void Finalize();

  // ---- running ----
  // Inputs in AddInput order; returns the outputs. Safe to call from several threads at once.
  Stack Run(Stack inputs) const;

  // For each output: the index of the input it returns unchanged (the same value), or -1.
  const std::vector<int>& output_inputs() const { return output_inputs_; }

  size_t num_nodes() const { return nodes_.size(); }
  size_t num_slots() const { return num_slots_; }
  // Graph values (inputs and node results); with liveness, num_slots() <= num_values().
  size_t num_values() const { return value_names_.size(); }
  // How many nodes are served by each path.
  size_t CountServedBy(ServedBy s) const;
  // Nodes, their kernels (composites and fallbacks marked), slots and reuse.
  std::string Dump() const;
  // The most bytes alive at once during a run: the plan's own results and the inputs given
  // bytes (a node's results counted while its inputs, freed after it, are still alive; a
  // buffer alive while any view of it is), by the sizes given to SetValueBytes: what a run
  // needs of the buffer cache to allocate nothing new.
  int64_t peak_bytes() const { return peak_bytes_; }
  // Results copied into the strides the graph expects (see ExpectStrides), over all runs.
  uint64_t restrides() const { return restrides_.load(std::memory_order_relaxed); }

  // ---- profiling: where a plan's time goes ----
  // While on, each run adds every node's wall time (argument binding, kernel, result
  // storing) to that node's counters; off (the default), a run reads no clock. Turning it
  // on clears the counters.
  void SetProfiling(bool on);
  bool profiling() const { return profiling_.load(std::memory_order_relaxed); }
  struct NodeTime {
    std::string name;  // the graph node
    std::string op;    // its op's qualified name
    ServedBy served_by;
    uint64_t calls = 0;
    uint64_t total_ns = 0;  // summed over calls
    uint64_t min_ns = 0;    // the fastest call (0 without calls)
  };
  std::vector<NodeTime> NodeTimes() const;

 private:
  struct Node {
    OpId op;
    std::vector<Arg> args;
    std::vector<int> outputs;  // value numbers
    std::string name;
    // Filled by Finalize():
    Resolution resolution;
    std::vector<int> free_after;    // slots of arguments whose last use is this node
    std::vector<bool> keep_output;  // false for results nobody reads (not stored)
    // Per output: the strides the graph expects (empty: any layout will do).
    std::vector<std::vector<int64_t>> expect_strides;
  };

  // What Run() reads of a node, laid out flat (one array each for the nodes, their arguments,
  // the slots they free and their results), so that a run walks a few KB of contiguous memory
  // rather than every node's argument vectors and constants.
  struct RunArg {
    Arg::Kind kind;
    bool move;                 // kValue: the argument's last read, and the value dies here: moved
    int32_t slot = 0;          // kValue, kItem
    int32_t index = 0;         // kItem
    const Arg* arg = nullptr;  // kConstant, kList, kOptionalList: the Arg itself
  };
  struct RunOut {
    int32_t slot;                                  // -1: nobody reads the result
    const std::vector<int64_t>* expect = nullptr;  // the strides the graph expects, or null
  };
  struct RunNode {
    OpId op;
    Resolution resolution;
    uint32_t args_begin, args_end, frees_begin, frees_end, outs_begin, outs_end;
  };

  int NewValue(std::string name);
  void BuildRunArrays();  // by Finalize()
  void ForEachValue(const Arg& a, const std::function<void(int)>& f) const;
  Value Materialize(const Arg& a, const std::vector<Value>& slots) const;
  Value Item(const RunArg& a, const std::vector<Value>& slots) const;  // a kItem argument
  Tensor Restride(const Tensor& t, const std::vector<int64_t>& strides) const;
  void ComputePeakBytes(const std::vector<int>& last_use);  // sets peak_bytes_

  OpTable* table_;
  std::vector<int> inputs_;  // value numbers
  std::vector<Node> nodes_;
  std::vector<Arg> outputs_;
  std::vector<std::string> value_names_;
  std::vector<int> slot_of_;                            // value number -> slot
  std::vector<int> output_inputs_;                      // set by Finalize()
  std::vector<std::vector<int64_t>> expected_strides_;  // by value number (ExpectStrides)
  std::vector<int64_t> value_bytes_;                    // by value number (SetValueBytes)
  std::vector<int> value_base_;                         // by value number (SetValueBase); -1
  int64_t peak_bytes_ = 0;                              // set by Finalize()
  std::vector<std::vector<int64_t>> input_expect_;      // per input; empty: none expected
  OpId empty_strided_op_ = 0, copy_op_ = 0;             // for Restride, set by Finalize()
  mutable std::atomic<uint64_t> restrides_{0};
  size_t num_slots_ = 0;
  bool finalized_ = false;
  struct Counters {
    std::atomic<uint64_t> calls{0}, ns{0}, min_ns{UINT64_MAX};
  };
  std::atomic<bool> profiling_{false};
  std::unique_ptr<Counters[]> counters_;  // one per node, made by Finalize()
  std::vector<RunNode> run_nodes_;        // by BuildRunArrays()
  std::vector<RunArg> run_args_;
  std::vector<int32_t> run_frees_;
  std::vector<RunOut> run_outs_;
};

}  // namespace tb
