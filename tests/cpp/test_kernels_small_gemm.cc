// Tests for the float32 small-product kernels (kernels/cpu/small_gemm.cc, used by
// kernels::SmallGemm in kernels/fused.cc): products with few rows or a short inner dimension
// through aten::mm, aten::addmm, aten::baddbmm and tensorbridge::matmul_epilogue, as users reach
// them, against a plain product written here, for every operand layout; several threads at
// once; and no oneDNN JIT sgemm primitive created for them. Under ASan/UBSan these cover the
// kernels' edge masks, strides and packing; under TSan, concurrent calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bridge/tensor.h"
#include "dispatch/op_call.h"
#include "kernels/onednn/onednn.h"
#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::Values;

Tensor Random(IntArrayRef shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Tensor t = Tensor::Empty(shape, DType::kFloat32);
  auto* p = static_cast<float*>(t.mutable_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

float At(const Tensor& t, int64_t i, int64_t j) {
  return t.data_as<const float>()[i * t.stride(0) + j * t.stride(1)];
}

// a [m, k] in one of three layouts: row-major, column-major (a transpose), rows and columns
// strided at an offset.
Tensor OperandA(int layout, int64_t m, int64_t k, uint32_t seed) {
  if (layout == 0) return Random({m, k}, seed);
  if (layout == 1) return Random({k, m}, seed).transpose(0, 1);
  return Random({m + 1, 2 * k + 3}, seed).slice(0, 1, std::nullopt).slice(1, 3, std::nullopt, 2);
}

// b [k, n]: row-major, the transpose of a row-major [n, k] weight, or rows strided at an offset.
Tensor OperandB(int layout, int64_t k, int64_t n, uint32_t seed) {
  if (layout == 0) return Random({k, n}, seed);
  if (layout == 1) return Random({n, k}, seed).transpose(0, 1);
  return Random({2 * k + 1, n + 2}, seed).slice(0, 1, std::nullopt, 2).slice(1, 2, std::nullopt);
}

// alpha * a @ b + beta * self + bias (self, bias optional), in double.
std::vector<double> Plain(const Tensor& a, const Tensor& b, const Tensor* bias, double alpha = 1,
                          double beta = 0, const Tensor* self = nullptr) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += double{At(a, i, p)} * double{At(b, p, j)};
      double y = alpha * acc;
      if (self != nullptr) y += beta * double{At(*self, i, j)};
      if (bias != nullptr) y += double{bias->data_as<const float>()[j]};
      c[static_cast<size_t>(i * n + j)] = y;
    }
  }
  return c;
}

// got within float32 rounding of want: k products summed in another order.
void ExpectClose(const Tensor& got, const std::vector<double>& want, int64_t k,
                 const std::string& what) {
  std::vector<float> g = Values<float>(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  const double tol = 4e-6 * std::sqrt(static_cast<double>(k) + 1);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    if (!(std::fabs(g[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", expected " << want[i];
      ++bad;
    }
  }
}

TEST(SmallGemmTest, FewRowsEveryLayout) {
  static const OpRef mm("aten::mm"), addmm("aten::addmm");
  uint32_t seed = 1;
  for (int64_t m : {1, 2, 3, 7, 8}) {
    for (int64_t k : {1, 2, 5, 8, 9, 64, 130}) {
      for (int64_t n : {1, 15, 16, 17, 128, 257}) {
        for (int la = 0; la < 3; ++la) {
          for (int lb = 0; lb < 3; ++lb) {
            const Tensor a = OperandA(la, m, k, ++seed), b = OperandB(lb, k, n, ++seed);
            const Tensor bias = Random({n}, ++seed);
            const std::string what = std::to_string(m) + "x" + std::to_string(k) + "x" +
                                     std::to_string(n) + " layouts " + std::to_string(la) +
                                     std::to_string(lb);
            ExpectClose(mm(a, b).tensor(), Plain(a, b, nullptr), k, "mm " + what);
            ExpectClose(addmm(bias, a, b).tensor(), Plain(a, b, &bias), k, "addmm " + what);
          }
        }
      }
    }
  }
}

TEST(SmallGemmTest, ShortInnerDimensionManyRows) {
  static const OpRef mm("aten::mm"), addmm("aten::addmm");
  uint32_t seed = 7;
  for (int64_t m : {9, 40, 128}) {
    for (int64_t k : {1, 2, 5, 8}) {
      for (int64_t n : {1, 17, 128}) {
        for (int la = 0; la < 3; ++la) {
          for (int lb = 0; lb < 3; ++lb) {
            const Tensor a = OperandA(la, m, k, ++seed), b = OperandB(lb, k, n, ++seed);
            const Tensor bias = Random({n}, ++seed);
            ExpectClose(mm(a, b).tensor(), Plain(a, b, nullptr), k, "mm");
            ExpectClose(addmm(bias, a, b).tensor(), Plain(a, b, &bias), k, "addmm");
          }
        }
      }
    }
  }
}

TEST(SmallGemmTest, AlphaBetaAndBatches) {
  static const OpRef addmm("aten::addmm"), baddbmm("aten::baddbmm");
  const Tensor a = OperandA(1, 3, 70, 11), b = OperandB(1, 70, 33, 12), self = Random({3, 33}, 13);
  ExpectClose(addmm
                  .WithKeywords({Value(self), Value(a), Value(b)},
                                {{"beta", Value(0.5)}, {"alpha", Value(-2.0)}})
                  .tensor(),
              Plain(a, b, nullptr, -2.0, 0.5, &self), 70, "addmm beta alpha");
  // baddbmm on a batch of column-major matrices with a broadcast (stride 0) b
  const Tensor a3 = Random({4, 70, 3}, 14).transpose(1, 2);
  const Tensor b3 = Random({70, 33}, 15).unsqueeze(0).expand({4, 70, 33});
  const Tensor s3 = Random({4, 3, 33}, 16);
  const Tensor got = baddbmm
                         .WithKeywords({Value(s3), Value(a3), Value(b3)},
                                       {{"beta", Value(0.25)}, {"alpha", Value(1.5)}})
                         .tensor();
  for (int64_t i = 0; i < 4; ++i) {
    const Tensor si = s3.select(0, i);
    ExpectClose(got.select(0, i), Plain(a3.select(0, i), b3.select(0, i), nullptr, 1.5, 0.25, &si),
                70, "baddbmm batch " + std::to_string(i));
  }
}

TEST(SmallGemmTest, MatmulEpilogue) {
  static const OpRef epilogue("tensorbridge::matmul_epilogue");
  // BERT's pooler: tanh(x @ weight.t() + bias) for 2 rows, x a strided selection
  const Tensor x = Random({2, 32, 128}, 21).select(1, 0), weight = Random({128, 128}, 22);
  const Tensor bias = Random({128}, 23);
  const Tensor got = epilogue(x, weight, bias, std::nullopt, true, "tanh",
                              std::vector<int64_t>{2, 128}, DType::kFloat32, int64_t{-1})
                         .tensor();
  std::vector<double> want = Plain(x, weight.transpose(0, 1), &bias);
  for (double& v : want) v = std::tanh(v);
  ExpectClose(got, want, 128, "epilogue tanh");
  // add then relu, 7 rows of a short inner dimension, weight row-major
  const Tensor x2 = Random({7, 5}, 24), w2 = Random({5, 40}, 25), res = Random({7, 40}, 26);
  const Tensor got2 = epilogue(x2, w2, std::nullopt, res, false, "add,relu",
                               std::vector<int64_t>{7, 40}, DType::kFloat32, int64_t{-1})
                          .tensor();
  std::vector<double> want2 = Plain(x2, w2, nullptr, 1.0, 1.0, &res);
  for (double& v : want2) v = v < 0 ? 0 : v;
  ExpectClose(got2, want2, 5, "epilogue add,relu");
}

TEST(SmallGemmTest, SeveralThreadsAtOnce) {
  static const OpRef mm("aten::mm"), addmm("aten::addmm");
  struct Case {
    Tensor a, b, bias;
  };
  std::vector<Case> cases;
  uint32_t seed = 31;
  for (int lb = 0; lb < 3; ++lb) {
    cases.push_back(
        {OperandA(2, 2, 128, ++seed), OperandB(lb, 128, 128, ++seed), Random({128}, 1)});
    cases.push_back({OperandA(1, 128, 2, ++seed), OperandB(lb, 2, 128, ++seed), Random({128}, 2)});
    cases.push_back({OperandA(0, 7, 130, ++seed), OperandB(lb, 130, 17, ++seed), Random({17}, 3)});
  }
  std::vector<Tensor> want;
  for (const Case& c : cases) want.push_back(addmm(c.bias, c.a, c.b).tensor());
  constexpr int kThreads = 4;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        const size_t j = static_cast<size_t>(t + i) % cases.size();
        const Case& c = cases[j];
        if (Values<float>(addmm(c.bias, c.a, c.b).tensor()) != Values<float>(want[j])) ++bad[t];
        mm(c.a, c.b);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

int64_t JitSgemmCount() {
  int64_t n = 0;
  for (const auto& [name, count] : OneDnnPrimitivesCreated()) {
    if (name.find("gemm:jit") != std::string::npos) n += count;
  }
  return n;
}

TEST(SmallGemmTest, NoJitSgemmPrimitiveForThePoolerProducts) {
  // The small-product kernels read a transposed weight in place on AVX-512 only; elsewhere
  // oneDNN still serves that layout.
  if (OneDnnEffectiveIsa().rfind("avx512", 0) != 0 || std::getenv("TB_MAX_CPU_ISA") != nullptr) {
    GTEST_SKIP() << "needs AVX-512 uncapped";
  }
  static const OpRef mm("aten::mm"), addmm("aten::addmm");
  static const OpRef epilogue("tensorbridge::matmul_epilogue");
  const int64_t before = JitSgemmCount();
  // Shapes no other test uses, as BERT's pooler and its gradients have them.
  const Tensor x = Random({2, 24, 136}, 41).select(1, 0), weight = Random({136, 136}, 42);
  const Tensor bias = Random({136}, 43), grad = Random({2, 136}, 44);
  epilogue(x, weight, bias, std::nullopt, true, "tanh", std::vector<int64_t>{2, 136},
           DType::kFloat32, int64_t{-1});
  addmm(bias, x, weight.transpose(0, 1));
  mm(grad, weight);             // the input's gradient
  mm(grad.transpose(0, 1), x);  // the weight's gradient: k = 2
  EXPECT_EQ(JitSgemmCount(), before) << "oneDNN created JIT sgemm primitives";
  // The counter counts: a product with many rows and a long k makes a primitive.
  int64_t all_before = 0, all_after = 0;
  for (const auto& [name, count] : OneDnnPrimitivesCreated()) all_before += count;
  mm(Random({67, 45}, 45), Random({45, 73}, 46));
  for (const auto& [name, count] : OneDnnPrimitivesCreated()) all_after += count;
  EXPECT_EQ(all_after, all_before + 1);
}

}  // namespace
}  // namespace tb
