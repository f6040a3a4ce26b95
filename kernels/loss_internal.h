// Private to kernels/loss_*.cc: the reduction argument the loss ops share (torch's
// at::Reduction: 0 none, 1 mean, 2 sum), its check, and the reduction of a per-element loss.
#pragma once

#include <cstdint>

#include "bridge/error.h"
#include "bridge/tensor.h"
#include "dispatch/op_call.h"

namespace tb::kernels::loss {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// ValueError naming `op` unless `reduction` is one of the three.
inline void CheckReduction(const char* op, int64_t reduction) {
  TB_CHECK(reduction >= kNone && reduction <= kSum, ValueError)
      << op << ": reduction must be 0 (none), 1 (mean) or 2 (sum), got " << reduction;
}

// The loss as is (kNone), its mean or its sum (through aten::mean / aten::sum).
inline Tensor Reduce(const Tensor& loss, int64_t reduction) {
  static const OpRef mean("aten::mean"), sum("aten::sum");
  if (reduction == kMean) return mean(loss).tensor();
  if (reduction == kSum) return sum(loss).tensor();
  return loss;
}

}  // namespace tb::kernels::loss
