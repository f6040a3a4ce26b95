// tensorbridge::pointwise(Tensor[] inputs, SymInt[] size, str program) -> Tensor[]: a group of
// element-wise ops that the compile backend's fusion pass (python/tensorbridge/_fuse.py) puts
// in place of a chain of ATen nodes, run as one loop over blocks of the output.
//
// The program is text, one instruction per ';':
//   "T f32" / "T f64"        the type every value is computed in (first instruction)
//   "op d a [b [c]]"         register d = op(a, b, c); operands are registers "rN" or
//                            constants "kVALUE" (strtod syntax: 0.5, -inf, nan)
//   "O r dtype"              an output: register r, stored as dtype (float32, float64, bool)
// Registers 0 .. len(inputs) - 1 hold the inputs, each broadcast to `size` and converted to the
// compute type as it is loaded. Outputs are contiguous tensors of shape `size`.
//
// The output is cut into blocks of kBlock elements; each block loads its inputs (a pointer into
// the input where it is contiguous and of the compute type, else a converting gather into a
// scratch register), runs the instructions over the block, and stores the outputs, so the
// intermediates stay in registers of a few KB (the L1 cache) and are never written to memory.
// Blocks run in parallel for large outputs. Arithmetic loops are built for AVX-512, AVX2 and the
// baseline and picked by the CPU's features; exp, log, tanh, erf and sigmoid of float32 blocks run
// on Eigen's vectorised functions (as the single ops' kernels do), float64 on the C library.
// Programs are parsed once and cached by their text.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/isa_internal.h"

namespace tb {
namespace {

constexpr int64_t kBlock = 512;
constexpr int64_t kParallelMin = 1 << 15;  // elements below which one thread runs the group

enum class Op : uint8_t {
  kCopy,
  kNeg,
  kExp,
  kLog,
  kTanh,
  kSigmoid,
  kRelu,
  kGelu,
  kGeluTanh,
  kSilu,
  kSqrt,
  kRsqrt,
  kAbs,
  kReciprocal,
  kErf,
  kSin,
  kCos,
  kLog1p,
  kExpm1,
  kNot,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kPow,
  kGt,
  kLt,
  kGe,
  kLe,
  kEq,
  kNe,
  kAnd,
  kOr,
  kGeluBw,
  kGeluTanhBw,
  kSigmoidBw,
  kTanhBw,
  kSiluBw,
  kWhere,
  kThresholdBw,
  kClamp,
};

struct OpName {
  const char* name;
  Op op;
  int arity;
};
constexpr OpName kOps[] = {
    {"copy", Op::kCopy, 1},
    {"neg", Op::kNeg, 1},
    {"exp", Op::kExp, 1},
    {"log", Op::kLog, 1},
    {"tanh", Op::kTanh, 1},
    {"sigmoid", Op::kSigmoid, 1},
    {"relu", Op::kRelu, 1},
    {"gelu", Op::kGelu, 1},
    {"gelu_tanh", Op::kGeluTanh, 1},
    {"silu", Op::kSilu, 1},
    {"sqrt", Op::kSqrt, 1},
    {"rsqrt", Op::kRsqrt, 1},
    {"abs", Op::kAbs, 1},
    {"reciprocal", Op::kReciprocal, 1},
    {"erf", Op::kErf, 1},
    {"sin", Op::kSin, 1},
    {"cos", Op::kCos, 1},
    {"log1p", Op::kLog1p, 1},
    {"expm1", Op::kExpm1, 1},
    {"not", Op::kNot, 1},
    {"add", Op::kAdd, 2},
    {"sub", Op::kSub, 2},
    {"mul", Op::kMul, 2},
    {"div", Op::kDiv, 2},
    {"max", Op::kMax, 2},
    {"min", Op::kMin, 2},
    {"pow", Op::kPow, 2},
    {"gt", Op::kGt, 2},
    {"lt", Op::kLt, 2},
    {"ge", Op::kGe, 2},
    {"le", Op::kLe, 2},
    {"eq", Op::kEq, 2},
    {"ne", Op::kNe, 2},
    {"and", Op::kAnd, 2},
    {"or", Op::kOr, 2},
    {"gelu_bw", Op::kGeluBw, 2},
    {"gelu_tanh_bw", Op::kGeluTanhBw, 2},
    {"sigmoid_bw", Op::kSigmoidBw, 2},
    {"tanh_bw", Op::kTanhBw, 2},
    {"silu_bw", Op::kSiluBw, 2},
    {"where", Op::kWhere, 3},
    {"threshold_bw", Op::kThresholdBw, 3},
    {"clamp", Op::kClamp, 3},
};

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
};

constexpr const char* kOpName = "tensorbridge::pointwise";

std::shared_ptr<const Program> Parse(const std::string& text, int num_inputs) {
  auto p = std::make_shared<Program>();
  p->num_inputs = num_inputs;
  std::vector<std::vector<std::string>> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::vector<std::string> toks;
    size_t i = start;
    while (i < end) {
      while (i < end && text[i] == ' ') ++i;
      size_t j = i;
      while (j < end && text[j] != ' ') ++j;
      if (j > i) toks.emplace_back(text.substr(i, j - i));
      i = j;
    }
    if (!toks.empty()) lines.push_back(std::move(toks));
    start = end + 1;
  }
  int max_reg = num_inputs - 1;
  auto reg = [&](const std::string& t) {
    TB_CHECK(t.size() > 1 && t[0] == 'r', ValueError)
        << kOpName << ": expected a register, got '" << t << "'";
    int r = std::atoi(t.c_str() + 1);
    TB_CHECK(r >= 0 && r < 4096, ValueError) << kOpName << ": bad register '" << t << "'";
    max_reg = std::max(max_reg, r);
    return r;
  };
  std::vector<std::pair<std::string, double>> consts;
  auto operand = [&](const std::string& t) -> int {
    if (!t.empty() && t[0] == 'k') {
      char* end = nullptr;
      double v = std::strtod(t.c_str() + 1, &end);
      TB_CHECK(end != nullptr && *end == '\0', ValueError)
          << kOpName << ": bad constant '" << t << "'";
      consts.emplace_back(t, v);
      return -static_cast<int>(consts.size());  // patched below
    }
    return reg(t);
  };
  for (const auto& toks : lines) {
    if (toks[0] == "T") {
      TB_CHECK(toks.size() == 2 && (toks[1] == "f32" || toks[1] == "f64"), ValueError)
          << kOpName << ": compute type must be f32 or f64";
      p->compute = toks[1] == "f32" ? DType::kFloat32 : DType::kFloat64;
      continue;
    }
    if (toks[0] == "O") {
      DType dt;
      TB_CHECK(toks.size() == 3 && DTypeFromName(toks[2], &dt), ValueError)
          << kOpName << ": bad output instruction";
      TB_CHECK(dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kBool, ValueError)
          << kOpName << ": outputs are float32, float64 or bool, got " << toks[2];
      p->outputs.emplace_back(reg(toks[1]), dt);
      continue;
    }
    const OpName* found = nullptr;
    for (const OpName& o : kOps) {
      if (toks[0] == o.name) found = &o;
    }
    TB_CHECK(found != nullptr, ValueError)
        << kOpName << ": unknown instruction '" << toks[0] << "'";
    TB_CHECK(static_cast<int>(toks.size()) == 2 + found->arity, ValueError)
        << kOpName << ": " << toks[0] << " takes " << found->arity << " operands";
    Instr in{found->op, reg(toks[1]), 0, 0, 0};
    in.a = operand(toks[2]);
    if (found->arity > 1) in.b = operand(toks[3]);
    if (found->arity > 2) in.c = operand(toks[4]);
    p->code.push_back(in);
  }
  // Constants take registers after every named one.
  const int first_const = max_reg + 1;
  for (Instr& in : p->code) {
    for (int* r : {&in.a, &in.b, &in.c}) {
      if (*r < 0) *r = first_const + (-*r - 1);
    }
  }
  for (size_t i = 0; i < consts.size(); ++i) {
    p->constants.emplace_back(first_const + static_cast<int>(i), consts[i].second);
  }
  p->num_regs = first_const + static_cast<int>(consts.size());
  TB_CHECK(!p->outputs.empty(), ValueError) << kOpName << ": the program has no outputs";
  for (const auto& o : p->outputs) {
    TB_CHECK(o.second == p->compute || o.second == DType::kBool, ValueError)
        << kOpName << ": an output of dtype " << DTypeName(o.second)
        << " from a program computing in " << DTypeName(p->compute);
  }
  return p;
}

std::shared_ptr<const Program> Cached(const std::string& text, int num_inputs) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const Program>> cache;
  const std::string key = std::to_string(num_inputs) + "|" + text;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto p = Parse(text, num_inputs);
  if (cache.size() < 4096) cache.emplace(key, p);
  return p;
}

// ---- block evaluation ---------------------------------------------------------------------

// The arithmetic of one instruction over n elements; false for the functions left to Math.
template <typename T>
TB_INLINE bool Arith(Op op, T* __restrict d, const T* a, const T* b, const T* c, int64_t n) {
  const T one = T(1), zero = T(0);
#define TB_LOOP(EXPR)                            \
  for (int64_t i = 0; i < n; ++i) d[i] = (EXPR); \
  return true
  switch (op) {
    case Op::kCopy: TB_LOOP(a[i]);
    case Op::kNeg: TB_LOOP(-a[i]);
    case Op::kRelu: TB_LOOP(a[i] < zero ? zero : a[i]);
    case Op::kAbs: TB_LOOP(std::fabs(a[i]));
    case Op::kReciprocal: TB_LOOP(one / a[i]);
    case Op::kSqrt: TB_LOOP(std::sqrt(a[i]));
    case Op::kRsqrt: TB_LOOP(one / std::sqrt(a[i]));
    case Op::kNot: TB_LOOP(a[i] == zero ? one : zero);
    case Op::kAdd: TB_LOOP(a[i] + b[i]);
    case Op::kSub: TB_LOOP(a[i] - b[i]);
    case Op::kMul: TB_LOOP(a[i] * b[i]);
    case Op::kDiv: TB_LOOP(a[i] / b[i]);
    case Op::kMax: TB_LOOP(a[i] != a[i] ? a[i] : (b[i] != b[i] || b[i] > a[i]) ? b[i] : a[i]);
    case Op::kMin: TB_LOOP(a[i] != a[i] ? a[i] : (b[i] != b[i] || b[i] < a[i]) ? b[i] : a[i]);
    case Op::kGt: TB_LOOP(a[i] > b[i] ? one : zero);
    case Op::kLt: TB_LOOP(a[i] < b[i] ? one : zero);
    case Op::kGe: TB_LOOP(a[i] >= b[i] ? one : zero);
    case Op::kLe: TB_LOOP(a[i] <= b[i] ? one : zero);
    case Op::kEq: TB_LOOP(a[i] == b[i] ? one : zero);
    case Op::kNe: TB_LOOP(a[i] != b[i] ? one : zero);
    case Op::kAnd: TB_LOOP((a[i] != zero && b[i] != zero) ? one : zero);
    case Op::kOr: TB_LOOP((a[i] != zero || b[i] != zero) ? one : zero);
    case Op::kSigmoidBw: TB_LOOP(a[i] * (one - b[i]) * b[i]);
    case Op::kTanhBw: TB_LOOP(a[i] * (one - b[i] * b[i]));
    case Op::kWhere: TB_LOOP(a[i] != zero ? b[i] : c[i]);
    case Op::kThresholdBw: TB_LOOP(b[i] <= c[i] ? zero : a[i]);
    case Op::kClamp: {
      // min(max(x, lo), hi), NaN x kept (torch.clamp)
      for (int64_t i = 0; i < n; ++i) {
        T v = a[i] < b[i] ? b[i] : a[i];
        d[i] = v > c[i] ? c[i] : v;
      }
      return true;
    }
    default: return false;
  }
#undef TB_LOOP
}

#if TB_X86_DISPATCH
TB_TARGET("avx512f,avx512vl,avx512dq")
bool ArithAvx512(Op op, float* d, const float* a, const float* b, const float* c, int64_t n) {
  return Arith<float>(op, d, a, b, c, n);
}
TB_TARGET("avx512f,avx512vl,avx512dq")
bool ArithAvx512(Op op, double* d, const double* a, const double* b, const double* c, int64_t n) {
  return Arith<double>(op, d, a, b, c, n);
}
TB_TARGET("avx2")
bool ArithAvx2(Op op, float* d, const float* a, const float* b, const float* c, int64_t n) {
  return Arith<float>(op, d, a, b, c, n);
}
TB_TARGET("avx2")
bool ArithAvx2(Op op, double* d, const double* a, const double* b, const double* c, int64_t n) {
  return Arith<double>(op, d, a, b, c, n);
}
#endif

int Isa() {
#if TB_X86_DISPATCH
  static const int isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                                 __builtin_cpu_supports("avx512dq")
                             ? 2
                         : __builtin_cpu_supports("avx2") ? 1
                                                          : 0;
  return isa;
#else
  return 0;
#endif
}

template <typename T>
bool ArithDispatch(Op op, T* d, const T* a, const T* b, const T* c, int64_t n) {
#if TB_X86_DISPATCH
  const int isa = Isa();
  if (isa == 2) return ArithAvx512(op, d, a, b, c, n);
  if (isa == 1) return ArithAvx2(op, d, a, b, c, n);
#endif
  return Arith<T>(op, d, a, b, c, n);
}

// exp(x) of a float block on Eigen's exp, except blocks with inputs below -87 (denormal results,
// where Eigen's clamping is inexact), which take std::exp.
void ExpBlock(float* d, const float* a, int64_t n) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= a[i] < -87.0f;
  if (bad) {
    for (int64_t i = 0; i < n; ++i) d[i] = std::exp(a[i]);
    return;
  }
  Eigen::Map<Eigen::ArrayXf>(d, n) = Eigen::Map<const Eigen::ArrayXf>(a, n).exp();
}

// The transcendental functions, on Eigen's vectorised float functions for float32.
void Math(Op op, float* d, const float* a, const float* b, int64_t n) {
  using Arr = Eigen::Map<Eigen::ArrayXf>;
  using CArr = Eigen::Map<const Eigen::ArrayXf>;
  Arr y(d, n);
  CArr x(a, n);
  const float kSqrt1_2 = static_cast<float>(M_SQRT1_2);
  const float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
  const float kKappa = 0.044715f;
  switch (op) {
    case Op::kExp: ExpBlock(d, a, n); return;
    case Op::kLog: {
      bool bad = false;
      for (int64_t i = 0; i < n; ++i)
        bad |= a[i] > 0.0f && a[i] < std::numeric_limits<float>::min();
      if (bad) {
        for (int64_t i = 0; i < n; ++i) d[i] = std::log(a[i]);
      } else {
        y = x.log();
      }
      return;
    }
    case Op::kTanh: y = x.tanh(); return;
    case Op::kSigmoid: y = (1.0f + (-x).exp()).inverse(); return;
    case Op::kErf: y = x.erf(); return;
    case Op::kGelu: y = x * 0.5f * (1.0f + (x * kSqrt1_2).erf()); return;
    case Op::kGeluTanh: y = 0.5f * x * (1.0f + (kBeta * (x + kKappa * x * x * x)).tanh()); return;
    case Op::kSilu: y = x / (1.0f + (-x).exp()); return;
    case Op::kSiluBw: {
      CArr xx(b, n), g(a, n);
      y = g * (1.0f + (-xx).exp()).inverse() *
          (1.0f + xx * (1.0f - (1.0f + (-xx).exp()).inverse()));
      return;
    }
    case Op::kGeluBw: {
      CArr xx(b, n), g(a, n);
      const float kAlpha = static_cast<float>(M_2_SQRTPI * M_SQRT1_2 * 0.5);
      y = g * (0.5f * (1.0f + (xx * kSqrt1_2).erf()) + xx * (-0.5f * xx * xx).exp() * kAlpha);
      return;
    }
    case Op::kGeluTanhBw: {
      CArr xx(b, n), g(a, n);
      auto inner = kBeta * (xx + kKappa * xx * xx * xx);
      Eigen::ArrayXf t = inner.tanh();
      y = g * (0.5f * (1.0f + t) +
               0.5f * xx * (1.0f - t * t) * (kBeta * (1.0f + 3.0f * kKappa * xx * xx)));
      return;
    }
    default: break;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = a[i];
    switch (op) {
      case Op::kSin: d[i] = std::sin(v); break;
      case Op::kCos: d[i] = std::cos(v); break;
      case Op::kLog1p: d[i] = std::log1p(v); break;
      case Op::kExpm1: d[i] = std::expm1(v); break;
      case Op::kPow: d[i] = std::pow(v, b[i]); break;
      default: TB_THROW(RuntimeError) << kOpName << ": no float32 loop for an instruction";
    }
  }
}

void Math(Op op, double* d, const double* a, const double* b, int64_t n) {
  const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
  const double kAlpha = M_2_SQRTPI * M_SQRT1_2 * 0.5;
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i];
    switch (op) {
      case Op::kExp: d[i] = std::exp(x); break;
      case Op::kLog: d[i] = std::log(x); break;
      case Op::kTanh: d[i] = std::tanh(x); break;
      case Op::kSigmoid: d[i] = 1.0 / (1.0 + std::exp(-x)); break;
      case Op::kErf: d[i] = std::erf(x); break;
      case Op::kGelu: d[i] = x * 0.5 * (1.0 + std::erf(x * M_SQRT1_2)); break;
      case Op::kGeluTanh:
        d[i] = 0.5 * x * (1.0 + std::tanh(kBeta * (x + kKappa * x * x * x)));
        break;
      case Op::kSilu: d[i] = x / (1.0 + std::exp(-x)); break;
      case Op::kSiluBw: {
        const double v = b[i], s = 1.0 / (1.0 + std::exp(-v));
        d[i] = x * s * (1.0 + v * (1.0 - s));
        break;
      }
      case Op::kGeluBw: {
        const double v = b[i];
        d[i] = x * (0.5 * (1.0 + std::erf(v * M_SQRT1_2)) + v * std::exp(-0.5 * v * v) * kAlpha);
        break;
      }
      case Op::kGeluTanhBw: {
        const double v = b[i], t = std::tanh(kBeta * (v + kKappa * v * v * v));
        d[i] = x *
               (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * (kBeta * (1.0 + 3.0 * kKappa * v * v)));
        break;
      }
      case Op::kSin: d[i] = std::sin(x); break;
      case Op::kCos: d[i] = std::cos(x); break;
      case Op::kLog1p: d[i] = std::log1p(x); break;
      case Op::kExpm1: d[i] = std::expm1(x); break;
      case Op::kPow: d[i] = std::pow(x, b[i]); break;
      default: TB_THROW(RuntimeError) << kOpName << ": no float64 loop for an instruction";
    }
  }
}

// An input as the loop sees it: broadcast to the output's (coalesced) shape.
struct Operand {
  const char* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> strides;  // elements, per coalesced dim (0: broadcast)
  bool direct = false;           // contiguous like the output and of the compute type
  bool scalar = false;           // one element for the whole output
};

template <typename T, typename In>
void Gather(const Operand& op, const std::vector<int64_t>& shape, int64_t start, int64_t n,
            T* out) {
  const In* base = reinterpret_cast<const In*>(op.data);
  const int nd = static_cast<int>(shape.size());
  // The multi-index of `start`, and the offset of its row's first element.
  int64_t idx[16];
  int64_t rem = start, row = 0;
  for (int k = nd - 1; k >= 0; --k) {
    idx[k] = rem % shape[k];
    rem /= shape[k];
    if (k < nd - 1) row += idx[k] * op.strides[k];
  }
  const int64_t inner = shape[nd - 1], s = op.strides[nd - 1];
  int64_t col = idx[nd - 1], done = 0;
  while (true) {
    const int64_t m = std::min(inner - col, n - done);
    const In* x = base + row + col * s;
    if (s == 1) {
      for (int64_t i = 0; i < m; ++i) out[done + i] = kernels::Convert<T>(x[i]);
    } else {
      for (int64_t i = 0; i < m; ++i) out[done + i] = kernels::Convert<T>(x[i * s]);
    }
    done += m;
    if (done >= n) return;
    col = 0;
    for (int k = nd - 2; k >= 0; --k) {
      row += op.strides[k];
      if (++idx[k] < shape[k]) break;
      row -= idx[k] * op.strides[k];
      idx[k] = 0;
    }
  }
}

template <typename T>
void RunProgram(const Program& p, const std::vector<Operand>& ins,
                const std::vector<int64_t>& shape, int64_t numel, const std::vector<Tensor>& outs) {
  const int64_t blocks = (numel + kBlock - 1) / kBlock;
  const bool parallel = numel >= kParallelMin;
  auto body = [&](int64_t b0, int64_t b1) {
    std::unique_ptr<T[]> scratch(new T[static_cast<size_t>(p.num_regs) * kBlock]);
    std::vector<const T*> src(p.num_regs, nullptr);
    auto reg = [&](int r) { return scratch.get() + static_cast<int64_t>(r) * kBlock; };
    for (const auto& [r, v] : p.constants) {
      std::fill(reg(r), reg(r) + kBlock, static_cast<T>(v));
      src[r] = reg(r);
    }
    for (size_t k = 0; k < ins.size(); ++k) {
      if (ins[k].scalar) {
        T v{};
        TB_DISPATCH(ins[k].dtype, kOpName, TB_TYPES_ALL, [&] {
          v = kernels::Convert<T>(*reinterpret_cast<const scalar_t*>(ins[k].data));
        });
        std::fill(reg(static_cast<int>(k)), reg(static_cast<int>(k)) + kBlock, v);
        src[k] = reg(static_cast<int>(k));
      }
    }
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t start = b * kBlock, n = std::min(kBlock, numel - start);
      for (size_t k = 0; k < ins.size(); ++k) {
        const Operand& op = ins[k];
        if (op.scalar) continue;
        if (op.direct) {
          src[k] = reinterpret_cast<const T*>(op.data) + start;
          continue;
        }
        T* dst = reg(static_cast<int>(k));
        TB_DISPATCH(op.dtype, kOpName, TB_TYPES_ALL,
                    [&] { Gather<T, scalar_t>(op, shape, start, n, dst); });
        src[k] = dst;
      }
      for (const Instr& in : p.code) {
        T* d = reg(in.d);
        if (!ArithDispatch<T>(in.op, d, src[in.a], src[in.b], src[in.c], n)) {
          Math(in.op, d, src[in.a], src[in.b], n);
        }
        src[in.d] = d;
      }
      for (size_t k = 0; k < p.outputs.size(); ++k) {
        const T* v = src[p.outputs[k].first];
        if (p.outputs[k].second == p.compute) {
          std::memcpy(static_cast<T*>(outs[k].mutable_data()) + start, v, n * sizeof(T));
        } else {
          bool* o = static_cast<bool*>(outs[k].mutable_data()) + start;
          for (int64_t i = 0; i < n; ++i) o[i] = v[i] != T(0);
        }
      }
    }
  };
  if (!parallel) {
    body(0, blocks);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel
  {
#ifdef _OPENMP
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
    const int64_t nt = 1, t = 0;
#endif
    try {
      body(blocks * t / nt, blocks * (t + 1) / nt);
    } catch (...) {
#pragma omp critical
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

std::vector<Tensor> Pointwise(const std::vector<Tensor>& inputs, const std::vector<int64_t>& size,
                              const std::string& program) {
  auto prog = Cached(program, static_cast<int>(inputs.size()));
  const Program& p = *prog;
  for (const Instr& in : p.code) {
    for (int r : {in.a, in.b, in.c, in.d}) {
      TB_CHECK(r < p.num_regs, ValueError) << kOpName << ": register out of range";
    }
  }
  int64_t numel = 1;
  for (int64_t s : size) {
    TB_CHECK(s >= 0, ValueError) << kOpName << ": negative size " << s;
    numel *= s;
  }
  TB_CHECK(size.size() <= 12, ValueError) << kOpName << ": at most 12 dimensions";
  const int nd = static_cast<int>(size.size());
  // Per input: element strides broadcast to `size`.
  std::vector<std::vector<int64_t>> strides(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    TB_CHECK(t.ndim() <= nd, ValueError) << kOpName << ": input " << k << " of shape " << t.ndim()
                                         << "-d does not broadcast to " << nd << "-d";
    TB_CHECK(!IsComplex(t.dtype()), NotImplementedError)
        << kOpName << ": dtype " << DTypeName(t.dtype()) << " is not supported";
    strides[k].assign(nd, 0);
    const int lead = nd - static_cast<int>(t.ndim());
    for (int d = 0; d < t.ndim(); ++d) {
      const int64_t s = t.size(d);
      TB_CHECK(s == size[lead + d] || s == 1, ValueError)
          << kOpName << ": input " << k << " has size " << s << " at dim " << d
          << ", which does not broadcast to " << size[lead + d];
      strides[k][lead + d] = s == 1 ? 0 : t.stride(d);
    }
  }
  std::vector<Tensor> outs;
  for (const auto& [r, dt] : p.outputs) {
    (void)r;
    outs.push_back(Tensor::Empty(size, dt));
  }
  if (numel == 0) return outs;
  // Coalesce: drop size-1 dims, merge a dim into the one outside it where every input steps
  // over it exactly (the output is contiguous).
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> cs(inputs.size());
  for (int d = 0; d < nd; ++d) {
    if (size[d] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < inputs.size() && merge; ++k) {
      if (cs[k].back() != strides[k][d] * size[d]) merge = false;
    }
    if (merge) {
      shape.back() *= size[d];
      for (size_t k = 0; k < inputs.size(); ++k) cs[k].back() = strides[k][d];
    } else {
      shape.push_back(size[d]);
      for (size_t k = 0; k < inputs.size(); ++k) cs[k].push_back(strides[k][d]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (auto& c : cs) c.push_back(0);
  }
  std::vector<Operand> ops(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    Operand& o = ops[k];
    o.data = static_cast<const char*>(inputs[k].data());
    o.dtype = inputs[k].dtype();
    o.strides = cs[k];
    bool all_zero = true;
    for (int64_t s : o.strides) all_zero &= s == 0;
    o.scalar = all_zero;
    o.direct = o.dtype == p.compute && shape.size() == 1 && o.strides[0] == 1;
  }
  if (p.compute == DType::kFloat32) {
    RunProgram<float>(p, ops, shape, numel, outs);
  } else {
    RunProgram<double>(p, ops, shape, numel, outs);
  }
  return outs;
}

}  // namespace

TB_REGISTER_KERNELS(fused_pointwise) {
  OpTable& t = OpTable::Global();
  t.Define("tensorbridge::pointwise(Tensor[] inputs, SymInt[] size, str program) -> Tensor[]");
  table.RegisterKernel("tensorbridge::pointwise", DeviceType::kCPU, Boxed<&Pointwise>(), TB_HERE);
}

}  // namespace tb
