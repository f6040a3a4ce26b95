// Tests for the fused attention kernels (kernels/attention*.cc), called through
// OpTable::Global() as users reach them: a case worked out by hand (forward, logsumexp and
// gradients, causal and as a mask, grouped-query heads), several tiles against a plain
// reference written here, and argument errors. The Python tests compare with torch's kernels.
// Under ASan/UBSan these cover the tile and stride arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "bridge/tensor.h"
#include "dispatch/op_table.h"
#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::Contains;
using ::tb::testing::FromValues;

constexpr const char* kFlash = "aten::_scaled_dot_product_flash_attention_for_cpu";
constexpr const char* kFlashBw = "aten::_scaled_dot_product_flash_attention_for_cpu_backward";

std::vector<float> Contents(const Tensor& t) {
  Tensor c = t.contiguous();
  const float* p = c.data_as<const float>();
  return std::vector<float>(p, p + c.numel());
}

Stack Call(const char* op, Stack stack) {
  OpTable::Global().Call(op, stack);
  return stack;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected,
                float tol = 1e-6f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tol) << i;
}

// One head, head size 1, scale 1: q = [1, 1], k = [0, ln 3], v = [4, 8]. Query 0 sees key 0
// only (causal): output 4, logsumexp 0. Query 1 sees both with weights 1/4 and 3/4: output
// 4 / 4 + 8 * 3 / 4 = 7, logsumexp ln(1 + 3). With grad_out = 1:
//   dV = P^T 1 = [1 + 1/4, 3/4];  dP = [4, 8] per row;  D = rowsum(dO * O) = [4, 7];
//   dS = P * (dP - D) = [[0, 0], [-3/4, 3/4]];  dQ = dS k = [0, 3/4 ln 3];
//   dK = dS^T q = [-3/4, 3/4].
struct HandCase {
  float ln3 = std::log(3.0f);
  Tensor q = FromValues<float>({1, 1, 2, 1}, DType::kFloat32, {1, 1});
  Tensor k = FromValues<float>({1, 1, 2, 1}, DType::kFloat32, {0, ln3});
  Tensor v = FromValues<float>({1, 1, 2, 1}, DType::kFloat32, {4, 8});
};

TEST(FlashAttentionTest, CausalCaseWorkedByHand) {
  HandCase c;
  Stack fwd = Call(kFlash, {c.q, c.k, c.v, 0.0, true, std::nullopt, std::nullopt});
  ExpectNear(Contents(fwd[0].to_tensor()), {4, 7});
  ExpectNear(Contents(fwd[1].to_tensor()), {0, std::log(4.0f)});
  Tensor ones = FromValues<float>({1, 1, 2, 1}, DType::kFloat32, {1, 1});
  Stack bw =
      Call(kFlashBw, {ones, c.q, c.k, c.v, fwd[0], fwd[1], 0.0, true, std::nullopt, std::nullopt});
  ExpectNear(Contents(bw[0].to_tensor()), {0, 0.75f * c.ln3});
  ExpectNear(Contents(bw[1].to_tensor()), {-0.75f, 0.75f});
  ExpectNear(Contents(bw[2].to_tensor()), {1.25f, 0.75f});
}

TEST(FlashAttentionTest, AdditiveMaskGivesTheCausalResult) {
  HandCase c;
  const float ninf = -std::numeric_limits<float>::infinity();
  Tensor mask = FromValues<float>({2, 2}, DType::kFloat32, {0, ninf, 0, 0});
  Stack fwd = Call(kFlash, {c.q, c.k, c.v, 0.0, false, mask, std::nullopt});
  ExpectNear(Contents(fwd[0].to_tensor()), {4, 7});
  ExpectNear(Contents(fwd[1].to_tensor()), {0, std::log(4.0f)});
}

TEST(FlashAttentionTest, FullyMaskedRowGivesZeros) {
  HandCase c;
  const float ninf = -std::numeric_limits<float>::infinity();
  Tensor mask = FromValues<float>({2, 2}, DType::kFloat32, {ninf, ninf, 0, 0});
  Stack fwd = Call(kFlash, {c.q, c.k, c.v, 0.0, false, mask, std::nullopt});
  ExpectNear(Contents(fwd[0].to_tensor()), {0, 7});
  ExpectNear(Contents(fwd[1].to_tensor()), {0, std::log(4.0f)});
}

TEST(FlashAttentionTest, GroupedQueryHeadsSumIntoTheirKeyHead) {
  // Two query heads (the hand case twice) on one key / value head: the same outputs per head,
  // dK and dV twice the single head's.
  HandCase c;
  Tensor q = FromValues<float>({1, 2, 2, 1}, DType::kFloat32, {1, 1, 1, 1});
  Stack fwd = Call(kFlash, {q, c.k, c.v, 0.0, true, std::nullopt, std::nullopt});
  ExpectNear(Contents(fwd[0].to_tensor()), {4, 7, 4, 7});
  Tensor ones = FromValues<float>({1, 2, 2, 1}, DType::kFloat32, {1, 1, 1, 1});
  Stack bw =
      Call(kFlashBw, {ones, q, c.k, c.v, fwd[0], fwd[1], 0.0, true, std::nullopt, std::nullopt});
  EXPECT_EQ(bw[1].to_tensor().shape(), (Dims{1, 1, 2, 1}));
  ExpectNear(Contents(bw[0].to_tensor()), {0, 0.75f * c.ln3, 0, 0.75f * c.ln3});
  ExpectNear(Contents(bw[1].to_tensor()), {-1.5f, 1.5f});
  ExpectNear(Contents(bw[2].to_tensor()), {2.5f, 1.5f});
}

Tensor Random(IntArrayRef shape, std::mt19937* gen) {
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<size_t>(ShapeNumel(shape)));
  for (float& x : v) x = d(*gen);
  return FromValues<float>(shape, DType::kFloat32, v);
}

// softmax(q k^T * scale, causal) v in double, row by row: [B, H, L, E] contiguous inputs.
std::vector<float> Reference(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), E = q.size(3), S = k.size(2);
  const float* Q = q.data_as<const float>();
  const float* K = k.data_as<const float>();
  const float* V = v.data_as<const float>();
  std::vector<float> out(static_cast<size_t>(B * H * L * E));
  const double scale = 1.0 / std::sqrt(static_cast<double>(E));
  for (int64_t bh = 0; bh < B * H; ++bh) {
    for (int64_t i = 0; i < L; ++i) {
      const int64_t n = causal ? std::min(S, i + 1) : S;
      std::vector<double> s(n);
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        double d = 0;
        for (int64_t e = 0; e < E; ++e) d += Q[(bh * L + i) * E + e] * K[(bh * S + j) * E + e];
        s[j] = d * scale;
        m = std::max(m, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int64_t e = 0; e < E; ++e) {
        double o = 0;
        for (int64_t j = 0; j < n; ++j) o += s[j] * V[(bh * S + j) * E + e];
        out[(bh * L + i) * E + e] = static_cast<float>(o / sum);
      }
    }
  }
  return out;
}

TEST(FlashAttentionTest, SeveralTilesMatchAPlainReference) {
  // 70 queries (two query tiles of 64), 600 keys (two key tiles of 512), head size 80.
  std::mt19937 gen(0);
  Tensor q = Random({2, 2, 70, 80}, &gen), k = Random({2, 2, 600, 80}, &gen),
         v = Random({2, 2, 600, 80}, &gen);
  for (bool causal : {false, true}) {
    Stack fwd = Call(kFlash, {q, k, v, 0.0, causal, std::nullopt, std::nullopt});
    ExpectNear(Contents(fwd[0].to_tensor()), Reference(q, k, v, causal), 1e-5f);
  }
}

TEST(FlashAttentionTest, ResultLayoutsAreTorchs) {
  // logsumexp [B, H, L] laid out as [B, L, H]; gradients [B, H, L, E] as [B, L, H, E]
  std::mt19937 gen(1);
  Tensor q = Random({2, 3, 4, 5}, &gen);
  Stack f = Call(kFlash, {q, q, q, 0.0, false, std::nullopt, std::nullopt});
  EXPECT_EQ(f[0].to_tensor().strides(), (Dims{60, 20, 5, 1}));
  EXPECT_EQ(f[1].to_tensor().strides(), (Dims{12, 1, 3}));
  Stack bw = Call(kFlashBw, {f[0], q, q, q, f[0], f[1], 0.0, false, std::nullopt, std::nullopt});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bw[i].to_tensor().strides(), (Dims{60, 5, 15, 1}));
}

TEST(FlashAttentionTest, ArgumentErrors) {
  HandCase c;
  EXPECT_TB_ERROR(kNotImplementedError,
                  "_scaled_dot_product_flash_attention_for_cpu: dropout_p = 0.5",
                  Call(kFlash, {c.q, c.k, c.v, 0.5, false, std::nullopt, 1.0}));
  Tensor q3 = FromValues<float>({1, 3, 2, 1}, DType::kFloat32, {1, 1, 1, 1, 1, 1});
  Tensor k2 = FromValues<float>({1, 2, 2, 1}, DType::kFloat32, {1, 1, 1, 1});
  EXPECT_TB_ERROR(kValueError, "key/value heads (2) must divide the number of query heads (3)",
                  Call(kFlash, {q3, k2, k2, 0.0, false, std::nullopt, std::nullopt}));
  Tensor b = FromValues<uint8_t>({2, 2}, DType::kBool, {1, 0, 1, 1});
  EXPECT_TB_ERROR(kTypeError, "attn_mask must have the query's dtype",
                  Call(kFlash, {c.q, c.k, c.v, 0.0, false, b, std::nullopt}));
}

}  // namespace
}  // namespace tb
