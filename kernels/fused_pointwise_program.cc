// The parser of tensorbridge::pointwise's programs (the text format is described in
// kernels/fused_pointwise.cc).
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/common_internal.h"
#include "kernels/fused_pointwise_internal.h"

namespace tb {
namespace fused_pointwise {
namespace {

struct OpName {
  const char* name;
  Op op;
  int arity;
};
// clang-format off
constexpr OpName kOps[] = {
    {"copy", Op::kCopy, 1}, {"neg", Op::kNeg, 1}, {"exp", Op::kExp, 1}, {"log", Op::kLog, 1},
    {"tanh", Op::kTanh, 1}, {"sigmoid", Op::kSigmoid, 1}, {"relu", Op::kRelu, 1},
    {"gelu", Op::kGelu, 1}, {"gelu_tanh", Op::kGeluTanh, 1}, {"silu", Op::kSilu, 1},
    {"sqrt", Op::kSqrt, 1}, {"rsqrt", Op::kRsqrt, 1}, {"abs", Op::kAbs, 1},
    {"reciprocal", Op::kReciprocal, 1}, {"erf", Op::kErf, 1}, {"sin", Op::kSin, 1},
    {"cos", Op::kCos, 1}, {"log1p", Op::kLog1p, 1}, {"expm1", Op::kExpm1, 1}, {"not", Op::kNot, 1},
    {"add", Op::kAdd, 2}, {"sub", Op::kSub, 2}, {"mul", Op::kMul, 2}, {"div", Op::kDiv, 2},
    {"max", Op::kMax, 2}, {"min", Op::kMin, 2}, {"pow", Op::kPow, 2}, {"gt", Op::kGt, 2},
    {"lt", Op::kLt, 2}, {"ge", Op::kGe, 2}, {"le", Op::kLe, 2}, {"eq", Op::kEq, 2},
    {"ne", Op::kNe, 2}, {"and", Op::kAnd, 2}, {"or", Op::kOr, 2}, {"gelu_bw", Op::kGeluBw, 2},
    {"gelu_tanh_bw", Op::kGeluTanhBw, 2}, {"sigmoid_bw", Op::kSigmoidBw, 2},
    {"tanh_bw", Op::kTanhBw, 2}, {"silu_bw", Op::kSiluBw, 2}, {"where", Op::kWhere, 3},
    {"threshold_bw", Op::kThresholdBw, 3}, {"clamp", Op::kClamp, 3},
    {"rsum", Op::kRowSum, 1}, {"rmax", Op::kRowMax, 1},
};
// clang-format on

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
  std::vector<int> arity;  // per instruction
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
    if (toks[0] == "L") {
      TB_CHECK(p->layout.empty() && toks.size() >= 2, ValueError)
          << kOpName << ": one layout instruction, with the dims' order";
      std::vector<bool> seen(toks.size() - 1, false);
      for (size_t i = 1; i < toks.size(); ++i) {
        char* end = nullptr;
        const long d = std::strtol(toks[i].c_str(), &end, 10);
        TB_CHECK(end != nullptr && *end == '\0' && d >= 0 && d < static_cast<long>(seen.size()) &&
                     !seen[d],
                 ValueError)
            << kOpName << ": the layout must be a permutation of the dims, got '" << toks[i] << "'";
        seen[d] = true;
        p->layout.push_back(static_cast<int>(d));
      }
      continue;
    }
    if (toks[0] == "C") {
      TB_CHECK(toks.size() >= 3, ValueError) << kOpName << ": C takes a register and its parts";
      Program::Cat cat{reg(toks[1]), {}};
      for (size_t i = 2; i < toks.size(); ++i) {
        const bool neg = toks[i][0] == '-';
        const std::string t = toks[i].substr(neg ? 1 : 0);
        char* end = nullptr;
        const long k = t.size() > 1 && t[0] == 'i' ? std::strtol(t.c_str() + 1, &end, 10) : -1;
        TB_CHECK(end != nullptr && *end == '\0' && k >= 0 && k < num_inputs, ValueError)
            << kOpName << ": a part of C must be an input 'iN' or '-iN', got '" << toks[i] << "'";
        cat.parts.emplace_back(static_cast<int>(k), neg);
      }
      p->cats.push_back(std::move(cat));
      continue;
    }
    if (toks[0] == "O" || toks[0] == "P" || toks[0] == "S") {
      DType dt;
      TB_CHECK(toks.size() == 3 && DTypeFromName(toks[2], &dt), ValueError)
          << kOpName << ": bad output instruction";
      TB_CHECK(dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kBool ||
                   dt == DType::kBFloat16 || dt == DType::kFloat16,
               ValueError)
          << kOpName << ": outputs are float32, float64, bfloat16, float16 or bool, got "
          << toks[2];
      p->outputs.emplace_back(reg(toks[1]), dt);
      p->per_row.push_back(toks[0] == "P");
      p->col_sum.push_back(toks[0] == "S");
      TB_CHECK(toks[0] != "S" || dt != DType::kBool, ValueError)
          << kOpName << ": a column-sum output (S) of dtype bool";
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
    p->rows = p->rows || found->op == Op::kRowSum || found->op == Op::kRowMax;
    in.a = operand(toks[2]);
    if (found->arity > 1) in.b = operand(toks[3]);
    if (found->arity > 2) in.c = operand(toks[4]);
    p->code.push_back(in);
    arity.push_back(found->arity);
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
  for (bool r : p->per_row) {
    TB_CHECK(!r || p->rows, ValueError)
        << kOpName << ": a per-row output (P) in a program without a row reduction";
  }
  for (const auto& o : p->outputs) {
    const bool half = o.second == DType::kBFloat16 || o.second == DType::kFloat16;
    TB_CHECK(o.second == p->compute || o.second == DType::kBool ||
                 (half && p->compute == DType::kFloat32),
             ValueError)
        << kOpName << ": an output of dtype " << DTypeName(o.second)
        << " from a program computing in " << DTypeName(p->compute);
  }
  bool reduces = p->rows;
  for (bool c : p->col_sum) reduces = reduces || c;
  TB_CHECK(p->layout.empty() || !reduces, ValueError)
      << kOpName << ": a layout (L) in a program with a reduction";
  for (const Instr& in : p->code) {
    for (int r : {in.a, in.b, in.c, in.d}) {
      TB_CHECK(r < p->num_regs, ValueError) << kOpName << ": register out of range";
    }
  }
  p->part.assign(num_inputs, false);
  for (const Program::Cat& c : p->cats) {
    TB_CHECK(c.reg >= num_inputs && c.reg < p->num_regs, ValueError)
        << kOpName << ": a C register must be a register after the inputs";
    for (const auto& [k, neg] : c.parts) p->part[k] = true;
  }
  for (const auto& [r, dt] : p->outputs) {
    TB_CHECK(r >= num_inputs || !p->part[r], ValueError)
        << kOpName << ": input " << r << " is a part of a C register and an output";
  }
  for (size_t i = 0; i < p->code.size(); ++i) {
    const Instr& in = p->code[i];
    const int ops[3] = {in.a, in.b, in.c};
    for (int j = 0; j < arity[i]; ++j) {
      const int r = ops[j];
      TB_CHECK(r >= num_inputs || !p->part[r], ValueError)
          << kOpName << ": input " << r << " is a part of a C register and read as a register";
    }
  }
  TB_CHECK(p->cats.empty() || p->layout.empty() ||
               p->layout.back() == static_cast<int>(p->layout.size()) - 1,
           ValueError)
      << kOpName << ": a C register needs the last dim innermost in the layout";
  std::vector<int> writes(p->num_regs, 0);
  for (const Instr& in : p->code) {
    if (in.d >= 0 && in.d < p->num_regs) ++writes[in.d];
  }
  p->writes_output.assign(p->num_regs, -1);
  for (size_t k = 0; k < p->outputs.size(); ++k) {
    const auto [r, dt] = p->outputs[k];
    if (r < p->num_regs && dt == p->compute && writes[r] == 1 && r >= num_inputs &&
        p->writes_output[r] == -1 && !p->per_row[k] && !p->col_sum[k]) {
      p->writes_output[r] = static_cast<int>(k);
    }
  }
  return p;
}

}  // namespace

std::shared_ptr<const Program> CachedProgram(const std::string& text, int num_inputs) {
  // Keyed by the text alone (no key to build per call); a text given another number of inputs
  // than its cached parse's is parsed again and replaces it.
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const Program>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(text);
    if (it != cache.end() && it->second->num_inputs == num_inputs) return it->second;
  }
  auto p = Parse(text, num_inputs);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() < 4096 || cache.count(text) > 0) cache[text] = p;
  return p;
}

}  // namespace fused_pointwise
}  // namespace tb
