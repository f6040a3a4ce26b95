// Private to kernels/fused_pointwise*.cc: the programs of tensorbridge::pointwise (see
// kernels/fused_pointwise.cc for their text), parsed once and cached by their text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bridge/dtype.h"
#include "bridge/tensor.h"

namespace tb {
namespace fused_pointwise {

// clang-format off
enum class Op : uint8_t {
  kCopy, kNeg, kExp, kLog, kTanh, kSigmoid, kRelu, kGelu, kGeluTanh, kSilu, kSqrt, kRsqrt, kAbs,
  kReciprocal, kErf, kSin, kCos, kLog1p, kExpm1, kNot,
  kAdd, kSub, kMul, kDiv, kMax, kMin, kPow, kGt, kLt, kGe, kLe, kEq, kNe, kAnd, kOr,
  kGeluBw, kGeluTanhBw, kSigmoidBw, kTanhBw, kSiluBw,
  kWhere, kThresholdBw, kClamp, kRowSum, kRowMax,
};
// clang-format on

struct Instr {
  Op op;
  int d, a, b, c;  // registers (constants have registers of their own, filled once)
};

struct Program {
  DType compute = DType::kFloat32;
  int num_inputs = 0;
  int num_regs = 0;
  std::vector<Instr> code;
  std::vector<std::pair<int, double>> constants;  // register, value
  std::vector<std::pair<int, DType>> outputs;     // register, stored dtype
  std::vector<bool> per_row;                      // per output: "P" (one value per row)
  std::vector<bool> col_sum;                      // per output: "S" (summed over the rows)
  bool rows = false;                              // a row reduction: whole rows per block
  // "L": the order of the dims of `size` in the outputs' memory, outer to inner (empty:
  // row-major); outputs are laid out so, and the loop runs over that order.
  std::vector<int> layout;
  // "C": registers loaded as the concatenation of inputs along the last dim of `size`, each
  // input negated or not; those inputs ("parts") are read only so.
  struct Cat {
    int reg;
    std::vector<std::pair<int, bool>> parts;  // input, negated
  };
  std::vector<Cat> cats;
  std::vector<bool> part;  // per input: read only as a part of a "C" register
  // Per register: the output it is written straight into (an output of the compute type whose
  // register one instruction writes), or -1.
  std::vector<int> writes_output;
};

constexpr const char* kOpName = "tensorbridge::pointwise";

// The parsed program of `text` for `num_inputs` inputs (cached; ValueError on a bad program).
std::shared_ptr<const Program> CachedProgram(const std::string& text, int num_inputs);

// tensorbridge::pointwise: the outputs of `program` over `inputs` broadcast to `size`.
std::vector<Tensor> Run(const std::vector<Tensor>& inputs, const std::vector<int64_t>& size,
                        const std::string& program);
// The same with a parsed program (of p.num_inputs inputs).
std::vector<Tensor> RunParsed(const std::vector<Tensor>& inputs, const std::vector<int64_t>& size,
                              const Program& p);

// One instruction over n values of a block (kernels/fused_pointwise_math.cc): Arith runs the
// arithmetic ones and float32's exp, tanh, erf and the functions made of them, and returns false
// for the rest, which Math runs.
bool Arith(Op op, float* d, const float* a, const float* b, const float* c, int64_t n);
bool Arith(Op op, double* d, const double* a, const double* b, const double* c, int64_t n);
void Math(Op op, float* d, const float* a, const float* b, int64_t n);
void Math(Op op, double* d, const double* a, const double* b, int64_t n);

// The float32 activations and gradients whose loop here (vectorised exp, tanh and erf) beats
// their oneDNN primitive and element loop at every size: the program op `op` ("silu",
// "gelu_tanh_bw", ...) over `inputs` (its operands in order), when they are contiguous float32
// tensors of one shape; an undefined tensor otherwise (the caller's own path then runs).
Tensor Float32Activation(const char* op, std::initializer_list<const Tensor*> inputs);

}  // namespace fused_pointwise
}  // namespace tb
