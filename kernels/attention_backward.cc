// aten::_scaled_dot_product_flash_attention_for_cpu_backward: the gradients of the fused
// attention (kernels/attention.cc) from its output and logsumexp.
//
// Per (batch, query head), over tiles of query rows and keys: the probabilities recomputed
// from the scores and the logsumexp, P = exp(scale * q k^T + mask - lse), then
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),
//   dQ += scale * dS K,  dK += scale * dS^T Q
// with four GEMMs on the tiles, accumulated in the compute type. With grouped-query heads
// each query head accumulates dK / dV in a buffer of its own, summed over the group at the
// end, so that no two threads write the same memory. The gradients have torch's layout:
// [B, L, H, E] memory seen as [B, H, L, E].
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/attention_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace kernels::attn {
namespace {

// Rows of a [rows, E] block (row stride ld, unit column stride) set to 0.
template <typename Acc>
void ZeroRows(Acc* p, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) std::fill(p + r * ld, p + r * ld + cols, Acc(0));
}

// The leading dimension of a [B, H, N, E] operand's rows for the GEMMs.
int64_t Ld(const Tensor& t) {
  return t.size(2) > 1 ? t.stride(2) : std::max<int64_t>(t.size(3), 1);
}

template <typename Acc>
void BackwardKernel(const Problem& p, const Tensor& dout, const Tensor& q, const Tensor& k,
                    const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& dq,
                    const Tensor& dk, const Tensor& dv) {
  const int64_t B = p.batch, H = p.heads, L = p.q_len, S = p.kv_len, E = p.dim;
  const int64_t group = p.kv_heads > 0 ? H / p.kv_heads : 1;
  const int64_t qb = std::min(kQBlock, L), kvb = std::max<int64_t>(std::min(kKvBlock, S), 1);
  const int64_t lde = std::max<int64_t>(E, 1);
  const int64_t ldq = Ld(q), ldk = Ld(k), ldv = Ld(v), ldo = Ld(out), lddo = Ld(dout);
  const int64_t lddq = Ld(dq);
  const Acc scale = static_cast<Acc>(p.scale);
  const int64_t tasks = B * H;
  // float: keys and values transposed once, so that q @ k^T and dO @ v^T are GEMMs in their
  // fast form (q @ kt, dO @ vt), when enough query rows share each key head to pay for it.
  const bool transposed = std::is_same_v<Acc, float> && L * group >= kTransposeRows;
  const Tensor kt = transposed ? TransposeRows(k) : Tensor();
  const Tensor vt = transposed ? TransposeRows(v) : Tensor();

  // dK / dV per query head: the outputs themselves without groups, else buffers
  // [B, H, S, E] summed over each group after the loop.
  Tensor dk_acc = dk, dv_acc = dv;
  if (group > 1) {
    dk_acc = Tensor::Empty({B, H, S, E}, dk.dtype());
    dv_acc = Tensor::Empty({B, H, S, E}, dv.dtype());
  }
  const int64_t lddk = Ld(dk_acc), lddv = Ld(dv_acc);

  const double flops = 10.0 * static_cast<double>(B * H) * L * S * lde;
  const bool parallel = tasks > 1 && flops > (1 << 18);
  const int nt = parallel ? MaxThreads() : 1;
  const int64_t per_thread = 2 * qb * kvb + qb;
  std::vector<Acc> buffers(static_cast<size_t>(nt * per_thread));

#pragma omp parallel num_threads(nt) if (parallel)
  {
    Acc* buf = buffers.data() + ThreadNum() * per_thread;
    Acc* prob = buf;               // [qb, kvb] probabilities
    Acc* dprob = prob + qb * kvb;  // [qb, kvb] dL/dP, then dL/dS
    Acc* dsum = dprob + qb * kvb;  // rowsum(dO * O) of the block's rows
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / H, h = t % H, hk = h / group;
      const Acc* Q = q.data_as<const Acc>() + b * q.stride(0) + h * q.stride(1);
      const Acc* K = k.data_as<const Acc>() + b * k.stride(0) + hk * k.stride(1);
      const Acc* V = v.data_as<const Acc>() + b * v.stride(0) + hk * v.stride(1);
      const Acc* O = out.data_as<const Acc>() + b * out.stride(0) + h * out.stride(1);
      const Acc* DO = dout.data_as<const Acc>() + b * dout.stride(0) + h * dout.stride(1);
      const Acc* LSE = lse.data_as<const Acc>() + b * lse.stride(0) + h * lse.stride(1);
      const Acc* KT = transposed ? kt.data_as<const Acc>() + (b * p.kv_heads + hk) * E * S : K;
      const Acc* VT = transposed ? vt.data_as<const Acc>() + (b * p.kv_heads + hk) * E * S : V;
      Acc* DQ = static_cast<Acc*>(dq.mutable_data()) + b * dq.stride(0) + h * dq.stride(1);
      const int64_t kvh = group > 1 ? h : hk;  // head index into dk_acc / dv_acc
      Acc* DK =
          static_cast<Acc*>(dk_acc.mutable_data()) + b * dk_acc.stride(0) + kvh * dk_acc.stride(1);
      Acc* DV =
          static_cast<Acc*>(dv_acc.mutable_data()) + b * dv_acc.stride(0) + kvh * dv_acc.stride(1);
      ZeroRows(DQ, L, E, lddq);
      ZeroRows(DK, S, E, lddk);
      ZeroRows(DV, S, E, lddv);
      for (int64_t i0 = 0; i0 < L; i0 += qb) {
        const int64_t rows = std::min(qb, L - i0);
        for (int64_t r = 0; r < rows; ++r) {
          dsum[r] = DotRow(O + (i0 + r) * ldo, DO + (i0 + r) * lddo, E);
        }
        const int64_t kv_end = p.causal ? std::min(S, i0 + rows) : S;
        for (int64_t j0 = 0; j0 < kv_end; j0 += kvb) {
          const int64_t cols = std::min(kvb, kv_end - j0);
          if (transposed) {
            Gemm(false, false, rows, cols, E, scale, Q + i0 * ldq, ldq, KT + j0, S, Acc(0), prob,
                 cols);
          } else {
            Gemm(false, true, rows, cols, E, scale, Q + i0 * ldq, ldq, K + j0 * ldk, ldk, Acc(0),
                 prob, cols);
          }
          MaskTile(p, b, h, i0, rows, j0, cols, prob);
          for (int64_t r = 0; r < rows; ++r) {
            Acc* s = prob + r * cols;
            const Acc l = LSE[(i0 + r) * lse.stride(2)];
            if (std::isfinite(l)) {
              ExpSubSum(s, cols, l);
            } else {
              std::fill(s, s + cols, Acc(0));
            }
          }
          // dV += P^T dO
          Gemm(true, false, cols, E, rows, Acc(1), prob, cols, DO + i0 * lddo, lddo, Acc(1),
               DV + j0 * lddv, lddv);
          // dP = dO V^T, then dS = P * (dP - dsum)
          if (transposed) {
            Gemm(false, false, rows, cols, E, Acc(1), DO + i0 * lddo, lddo, VT + j0, S, Acc(0),
                 dprob, cols);
          } else {
            Gemm(false, true, rows, cols, E, Acc(1), DO + i0 * lddo, lddo, V + j0 * ldv, ldv,
                 Acc(0), dprob, cols);
          }
          for (int64_t r = 0; r < rows; ++r) {
            SoftmaxGradRow(dprob + r * cols, prob + r * cols, cols, dsum[r]);
          }
          // dQ += scale * dS K,  dK += scale * dS^T Q
          Gemm(false, false, rows, E, cols, scale, dprob, cols, K + j0 * ldk, ldk, Acc(1),
               DQ + i0 * lddq, lddq);
          Gemm(true, false, cols, E, rows, scale, dprob, cols, Q + i0 * ldq, ldq, Acc(1),
               DK + j0 * lddk, lddk);
        }
      }
    }
  }
  if (group == 1) return;
  // dK[b, hk] = sum over the group's query heads (and dV alike).
  const int64_t groups = B * p.kv_heads;
#pragma omp parallel for schedule(static) if (groups > 1 && B * H * S * E > (1 << 16))
  for (int64_t t = 0; t < groups; ++t) {
    const int64_t b = t / p.kv_heads, hk = t % p.kv_heads;
    for (int which = 0; which < 2; ++which) {
      const Tensor& part = which == 0 ? dk_acc : dv_acc;
      const Tensor& dst = which == 0 ? dk : dv;
      Acc* d = static_cast<Acc*>(dst.mutable_data()) + b * dst.stride(0) + hk * dst.stride(1);
      const int64_t ldd = Ld(dst);
      const Acc* src = part.data_as<const Acc>() + b * part.stride(0);
      for (int64_t s = 0; s < S; ++s) {
        Acc* row = d + s * ldd;
        const Acc* first = src + (hk * group) * part.stride(1) + s * E;
        std::copy(first, first + E, row);
        for (int64_t g = 1; g < group; ++g) AddRow(row, first + g * part.stride(1), E);
      }
    }
  }
}

}  // namespace
}  // namespace kernels::attn

namespace {

using kernels::attn::ComputeType;
using kernels::attn::EmptyHeadsInner;
using kernels::attn::ForGemm;
using kernels::attn::Problem;

void CheckLike(const char* op, const char* arg, const Tensor& t, const Tensor& like) {
  TB_CHECK(t.ndim() == like.ndim() && t.shape() == like.shape(), ValueError)
      << op << ": expected " << arg << " of shape " << ShapeString(like.shape()) << ", got "
      << ShapeString(t.shape());
  TB_CHECK(t.dtype() == like.dtype(), TypeError)
      << op << ": expected " << arg << " of dtype " << DTypeName(like.dtype()) << ", got "
      << DTypeName(t.dtype());
}

std::tuple<Tensor, Tensor, Tensor> FlashAttentionForCpuBackward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
    const Tensor& out, const Tensor& logsumexp, double dropout_p, bool is_causal,
    const std::optional<Tensor>& attn_mask, std::optional<double> scale) {
  constexpr const char* kOp = "aten::_scaled_dot_product_flash_attention_for_cpu_backward";
  const Problem p = kernels::attn::CheckProblem(kOp, query, key, value, dropout_p, is_causal,
                                                attn_mask, scale, false);
  CheckLike(kOp, "grad_out", grad_out, query);
  CheckLike(kOp, "out", out, query);
  const DType acc = ComputeType(query.dtype());
  TB_CHECK(logsumexp.ndim() == 3 && logsumexp.size(0) == p.batch && logsumexp.size(1) == p.heads &&
               logsumexp.size(2) == p.q_len,
           ValueError)
      << kOp << ": expected logsumexp of shape " << ShapeString({p.batch, p.heads, p.q_len})
      << ", got " << ShapeString(logsumexp.shape());
  TB_CHECK(logsumexp.dtype() == acc, TypeError)
      << kOp << ": expected logsumexp of dtype " << DTypeName(acc) << ", got "
      << DTypeName(logsumexp.dtype());
  const DType dt = query.dtype();
  Tensor dq = EmptyHeadsInner(query.shape(), dt);
  Tensor dk = EmptyHeadsInner(key.shape(), dt);
  Tensor dv = EmptyHeadsInner(value.shape(), dt);
  if (dq.numel() == 0 && dk.numel() == 0) return {dq, dk, dv};
  Tensor q = ForGemm(query, acc), k = ForGemm(key, acc), v = ForGemm(value, acc);
  Tensor o = ForGemm(out, acc), g = ForGemm(grad_out, acc);
  const bool same = dt == acc;
  Tensor dq_a = same ? dq : EmptyHeadsInner(query.shape(), acc);
  Tensor dk_a = same ? dk : EmptyHeadsInner(key.shape(), acc);
  Tensor dv_a = same ? dv : EmptyHeadsInner(value.shape(), acc);
  if (acc == DType::kFloat64) {
    kernels::attn::BackwardKernel<double>(p, g, q, k, v, o, logsumexp, dq_a, dk_a, dv_a);
  } else {
    kernels::attn::BackwardKernel<float>(p, g, q, k, v, o, logsumexp, dq_a, dk_a, dv_a);
  }
  if (!same) {
    CopyCast(dq, dq_a);
    CopyCast(dk, dk_a);
    CopyCast(dv, dv_a);
  }
  return {dq, dk, dv};
}

}  // namespace

TB_REGISTER_KERNELS(attention_backward) {
  table.RegisterKernel("aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                       DeviceType::kCPU, Boxed<&FlashAttentionForCpuBackward>(), TB_HERE);
}

}  // namespace tb
