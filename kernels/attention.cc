// Fused attention: aten::_scaled_dot_product_flash_attention_for_cpu (forward; its backward
// in attention_backward.cc) and aten::scaled_dot_product_attention as a whole kernel over it
// (its decomposition into table ops is in dispatch/decompositions.cc).
//
// The forward is flash attention: per (batch, head, block of queries), the scores of one
// block of keys at a time (a GEMM on the tiles), an online softmax (running row max and sum,
// the partial output rescaled when the max grows) and the probabilities times the values
// (a second GEMM) accumulated in the compute type. No [L, S] score matrix exists beyond one
// tile per thread. A row that attends to no key (fully masked, no keys) gives 0 and a
// logsumexp of 0, as torch's kernel does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "dispatch/op_table.h"
#include "kernels/attention_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace kernels::attn {

// ---- layouts ------------------------------------------------------------------------------

bool GemmLayout(const Tensor& t) {
  const int64_t rows = t.size(2), cols = t.size(3);
  if (cols > 1 && t.stride(3) != 1) return false;
  if (rows > 1 && t.stride(2) < std::max<int64_t>(cols, 1)) return false;
  return true;
}

namespace {

// torch's is_non_overlapping_and_dense: the dims of size > 1, ordered by stride, step over
// each other exactly.
bool DenseNonOverlapping(const Tensor& t) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.ndim(); ++d) {
    if (t.size(d) != 1) dims.push_back(d);
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int64_t a, int64_t b) { return t.stride(a) < t.stride(b); });
  int64_t expected = 1;
  for (int64_t d : dims) {
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

// torch's infer_dense_strides: a dense layout keeping the order of t's strides.
Dims InferDenseStrides(const Tensor& t) {
  const int64_t nd = t.ndim();
  std::vector<int64_t> perm(nd);
  for (int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  auto should_swap = [&](int64_t d0, int64_t d1) {
    const int64_t s0 = t.stride(d0), s1 = t.stride(d1);
    if (s0 == 0 || s1 == 0) return 0;
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    return t.size(d0) > t.size(d1) ? 1 : 0;
  };
  for (int64_t i = 1; i < nd; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  Dims strides(nd);
  int64_t cur = 1;
  for (int64_t i = 0; i < nd; ++i) {
    strides[perm[i]] = cur;
    if (t.size(perm[i]) > 1) cur *= t.size(perm[i]);
  }
  return strides;
}

Tensor EmptyStrided(IntArrayRef shape, IntArrayRef strides, DType dtype) {
  int64_t extent = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return Tensor::Empty(shape, dtype).as_strided(shape, strides);
    extent += (shape[i] - 1) * strides[i];
  }
  Tensor base = Tensor::Empty({extent}, dtype);
  return base.as_strided(shape, strides);
}

}  // namespace

Tensor EmptyLike(const Tensor& t, DType dtype) {
  if (DenseNonOverlapping(t)) return EmptyStrided(t.shape(), t.strides(), dtype);
  const Dims strides = InferDenseStrides(t);
  return EmptyStrided(t.shape(), strides, dtype);
}

Tensor EmptyHeadsInner(IntArrayRef shape, DType dtype) {
  Dims swapped(shape);
  std::swap(swapped[1], swapped[2]);
  return Tensor::Empty(swapped, dtype).transpose(1, 2);
}

// ---- the forward kernel -------------------------------------------------------------------

int MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int ThreadNum() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

Tensor TransposeRows(const Tensor& t) {
  const int64_t B = t.size(0), H = t.size(1), N = t.size(2), E = t.size(3);
  Tensor out = Tensor::Empty({B, H, E, N}, t.dtype());
  const int64_t ld = N > 1 ? t.stride(2) : std::max<int64_t>(E, 1);
  const int64_t n = B * H;
  auto run = [&](auto* base) {
    using Acc = std::remove_pointer_t<decltype(base)>;
    const Acc* src = t.data_as<const Acc>();
#pragma omp parallel for schedule(static) if (n > 1 && t.numel() > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const int64_t b = i / H, h = i % H;
      Transpose(src + b * t.stride(0) + h * t.stride(1), N, E, ld, base + i * E * N, N);
    }
  };
  if (t.dtype() == DType::kFloat64) {
    run(static_cast<double*>(out.mutable_data()));
  } else {
    run(static_cast<float*>(out.mutable_data()));
  }
  return out;
}

template <typename Acc>
void MaskTile(const Problem& p, int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t j0,
              int64_t cols, Acc* s) {
  constexpr Acc kNegInf = -std::numeric_limits<Acc>::infinity();
  if (p.causal && j0 + cols > i0 + 1) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t first = std::max<int64_t>(i0 + r + 1 - j0, 0);  // first masked column
      std::fill(s + r * cols + std::min(first, cols), s + (r + 1) * cols, kNegInf);
    }
  }
  if (!p.mask.defined()) return;
  const Tensor& m = p.mask;
  const int64_t s2 = m.stride(2), s3 = m.stride(3);
  const int64_t off = b * m.stride(0) + h * m.stride(1) + i0 * s2 + j0 * s3;
  if (m.dtype() == DType::kBool) {
    const bool* mb = m.data_as<const bool>() + off;
    for (int64_t r = 0; r < rows; ++r) {
      Acc* row = s + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        if (!mb[r * s2 + c * s3]) row[c] = kNegInf;
      }
    }
    return;
  }
  const Acc* ma = m.data_as<const Acc>() + off;
  for (int64_t r = 0; r < rows; ++r) {
    Acc* row = s + r * cols;
    const Acc* mr = ma + r * s2;
    if (s3 == 1) {
      AddRow(row, mr, cols);
    } else {
      for (int64_t c = 0; c < cols; ++c) row[c] += mr[c * s3];
    }
  }
}

template <typename Acc>
void ForwardKernel(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, const Tensor& lse) {
  const int64_t B = p.batch, H = p.heads, L = p.q_len, S = p.kv_len, E = p.dim;
  const int64_t group = p.kv_heads > 0 ? H / p.kv_heads : 1;
  const int64_t qb = std::min(kQBlock, L), kvb = std::max<int64_t>(std::min(kKvBlock, S), 1);
  const int64_t nqb = (L + qb - 1) / qb, tasks = B * H * nqb;
  const int64_t ldq = L > 1 ? q.stride(2) : std::max<int64_t>(E, 1);
  const int64_t ldk = S > 1 ? k.stride(2) : std::max<int64_t>(E, 1);
  const int64_t ldv = S > 1 ? v.stride(2) : std::max<int64_t>(E, 1);
  const int64_t lde = std::max<int64_t>(E, 1);
  // float: the keys transposed once, so that the score GEMM is q @ kt (its fast form), when
  // enough query rows share each key head to pay for the copy (not when decoding one token).
  const bool transposed = std::is_same_v<Acc, float> && L * group >= kTransposeRows;
  const Tensor kt = transposed ? TransposeRows(k) : Tensor();
  const Acc* Q = q.data_as<const Acc>();
  const Acc* K = transposed ? kt.data_as<const Acc>() : k.data_as<const Acc>();
  const Acc* V = v.data_as<const Acc>();
  Acc* O = static_cast<Acc*>(out.mutable_data());
  Acc* LSE = static_cast<Acc*>(lse.mutable_data());
  const Acc scale = static_cast<Acc>(p.scale);
  constexpr Acc kNegInf = -std::numeric_limits<Acc>::infinity();

  const double flops = 4.0 * static_cast<double>(B * H) * L * S * std::max<int64_t>(E, 1);
  const bool parallel = tasks > 1 && flops > (1 << 18);
  const int nt = parallel ? MaxThreads() : 1;
  const int64_t per_thread = qb * kvb + qb * lde + 2 * qb;
  std::vector<Acc> buffers(static_cast<size_t>(nt * per_thread));

#pragma omp parallel num_threads(nt) if (parallel)
  {
    Acc* buf = buffers.data() + ThreadNum() * per_thread;
    Acc* tile = buf;             // [qb, kvb] scores, then probabilities
    Acc* acc = tile + qb * kvb;  // [qb, E] output rows, unnormalised
    Acc* mx = acc + qb * lde;    // running row max
    Acc* sum = mx + qb;          // running row sum
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / (H * nqb), h = t / nqb % H, i0 = t % nqb * qb;
      const int64_t rows = std::min(qb, L - i0), hk = h / group;
      const Acc* q0 = Q + b * q.stride(0) + h * q.stride(1) + i0 * ldq;
      const Acc* k0 =
          transposed ? K + (b * p.kv_heads + hk) * E * S : K + b * k.stride(0) + hk * k.stride(1);
      const Acc* v0 = V + b * v.stride(0) + hk * v.stride(1);
      const int64_t kv_end = p.causal ? std::min(S, i0 + rows) : S;
      std::fill(mx, mx + rows, kNegInf);
      std::fill(sum, sum + rows, Acc(0));
      std::fill(acc, acc + rows * lde, Acc(0));
      for (int64_t j0 = 0; j0 < kv_end; j0 += kvb) {
        const int64_t cols = std::min(kvb, kv_end - j0);
        if (transposed) {
          Gemm(false, false, rows, cols, E, scale, q0, ldq, k0 + j0, S, Acc(0), tile, cols);
        } else {
          Gemm(false, true, rows, cols, E, scale, q0, ldq, k0 + j0 * ldk, ldk, Acc(0), tile, cols);
        }
        MaskTile(p, b, h, i0, rows, j0, cols, tile);
        for (int64_t r = 0; r < rows; ++r) {
          Acc* s = tile + r * cols;
          // std::max(old, new): a row of NaN scores leaves the max where it was.
          const Acc m_new = std::max(mx[r], RowMax(s, cols));
          if (!(m_new > kNegInf)) {  // nothing seen yet: the row's weights are 0
            std::fill(s, s + cols, Acc(0));
            continue;
          }
          const Acc row_sum = ExpSubSum(s, cols, m_new);
          if (mx[r] > kNegInf) {  // earlier keys seen: rescale them to the new max
            const Acc alpha = std::exp(mx[r] - m_new);
            if (alpha != Acc(1)) ScaleRow(acc + r * lde, E, alpha);
            sum[r] = sum[r] * alpha + row_sum;
          } else {
            sum[r] = row_sum;
          }
          mx[r] = m_new;
        }
        Gemm(false, false, rows, E, cols, Acc(1), tile, cols, v0 + j0 * ldv, ldv, Acc(1), acc, lde);
      }
      Acc* o0 = O + b * out.stride(0) + h * out.stride(1) + i0 * out.stride(2);
      Acc* l0 = LSE + b * lse.stride(0) + h * lse.stride(1) + i0 * lse.stride(2);
      const int64_t os2 = out.stride(2), os3 = out.stride(3);
      for (int64_t r = 0; r < rows; ++r) {
        const bool empty = !(sum[r] > Acc(0));
        const Acc inv = empty ? Acc(0) : Acc(1) / sum[r];
        const Acc* a = acc + r * lde;
        Acc* o = o0 + r * os2;
        if (os3 == 1) {
          ScaleCopyRow(o, a, E, inv);
        } else {
          for (int64_t e = 0; e < E; ++e) o[e * os3] = a[e] * inv;
        }
        l0[r * lse.stride(2)] = empty ? Acc(0) : mx[r] + std::log(sum[r]);
      }
    }
  }
}

template void MaskTile<float>(const Problem&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                              float*);
template void MaskTile<double>(const Problem&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                               double*);

// ---- argument checks ----------------------------------------------------------------------

DType ComputeType(DType t) { return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32; }

Tensor ForGemm(const Tensor& t, DType acc) {
  Tensor c = Cast(t, acc);  // t itself when already of the compute type
  return GemmLayout(c) ? c : c.contiguous();
}

Problem CheckProblem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     double dropout_p, bool is_causal, const std::optional<Tensor>& mask,
                     std::optional<double> scale, bool bool_mask_ok) {
  TB_CHECK(dropout_p == 0.0, NotImplementedError)
      << op << ": dropout_p = " << dropout_p
      << " is not supported (dropout draws random numbers; use dropout_p = 0)";
  TB_CHECK(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4, ValueError)
      << op << ": expected 4-d query, key and value [batch, heads, length, head_dim], got "
      << ShapeString(q.shape()) << ", " << ShapeString(k.shape()) << " and "
      << ShapeString(v.shape());
  TB_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), TypeError)
      << op << ": expected query, key and value of one dtype, got " << DTypeName(q.dtype()) << ", "
      << DTypeName(k.dtype()) << " and " << DTypeName(v.dtype());
  const DType dt = q.dtype();
  TB_CHECK_SUPPORTED(dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kBFloat16 ||
                     dt == DType::kFloat16)
      << op << ": dtype " << DTypeName(dt)
      << " is not supported (float32, float64, bfloat16, float16)";
  Problem p;
  p.batch = q.size(0);
  p.heads = q.size(1);
  p.q_len = q.size(2);
  p.dim = q.size(3);
  p.kv_heads = k.size(1);
  p.kv_len = k.size(2);
  TB_CHECK(k.size(0) == p.batch && v.size(0) == p.batch, ValueError)
      << op << ": query, key and value must have the same batch size, got "
      << ShapeString(q.shape()) << ", " << ShapeString(k.shape()) << " and "
      << ShapeString(v.shape());
  TB_CHECK(k.size(3) == p.dim && v.size(3) == p.dim, ValueError)
      << op << ": query, key and value must have the same head size, got " << ShapeString(q.shape())
      << ", " << ShapeString(k.shape()) << " and " << ShapeString(v.shape());
  TB_CHECK(v.size(1) == p.kv_heads && v.size(2) == p.kv_len, ValueError)
      << op << ": key and value must have the same heads and length, got " << ShapeString(k.shape())
      << " and " << ShapeString(v.shape());
  TB_CHECK((p.kv_heads > 0 && p.heads % p.kv_heads == 0) || (p.heads == 0 && p.kv_heads == 0),
           ValueError)
      << op << ": the number of key/value heads (" << p.kv_heads
      << ") must divide the number of query heads (" << p.heads << ")";
  p.causal = is_causal;
  p.scale = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(p.dim));
  if (mask.has_value()) {
    const Tensor& m = *mask;
    const DType acc = ComputeType(dt);
    TB_CHECK(m.dtype() == dt || m.dtype() == DType::kFloat32 ||
                 (bool_mask_ok && m.dtype() == DType::kBool),
             TypeError)
        << op << ": attn_mask must have the query's dtype (" << DTypeName(dt)
        << ") or float32, got " << DTypeName(m.dtype());
    TB_CHECK(m.ndim() == 2 || m.ndim() == 4, ValueError)
        << op << ": attn_mask must be 2-d [L, S] or 4-d [B, H, L, S], got shape "
        << ShapeString(m.shape());
    const Dims full{p.batch, p.heads, p.q_len, p.kv_len};
    Tensor m4 = m.ndim() == 2 ? m.unsqueeze(0).unsqueeze(0) : m;
    for (int64_t d = 0; d < 4; ++d) {
      TB_CHECK(m4.size(d) == full[d] || m4.size(d) == 1, ValueError)
          << op << ": attn_mask of shape " << ShapeString(m.shape()) << " does not broadcast to "
          << ShapeString(full);
    }
    if (m4.dtype() != DType::kBool && m4.dtype() != acc) m4 = Cast(m4, acc);
    p.mask = m4.expand(full);
  }
  return p;
}

}  // namespace kernels::attn

// ---- ops ----------------------------------------------------------------------------------

namespace {

using kernels::attn::CheckProblem;
using kernels::attn::ComputeType;
using kernels::attn::EmptyHeadsInner;
using kernels::attn::EmptyLike;
using kernels::attn::ForGemm;
using kernels::attn::Problem;

// Runs the forward into `out` (the query's dtype) and `lse` (the compute type).
void RunForward(const Problem& p, const Tensor& query, const Tensor& key, const Tensor& value,
                const Tensor& out, const Tensor& lse) {
  if (out.numel() == 0 && lse.numel() == 0) return;
  const DType acc = ComputeType(query.dtype());
  Tensor q = ForGemm(query, acc), k = ForGemm(key, acc), v = ForGemm(value, acc);
  Tensor o = out.dtype() == acc ? out : EmptyLike(out, acc);
  if (acc == DType::kFloat64) {
    kernels::attn::ForwardKernel<double>(p, q, k, v, o, lse);
  } else {
    kernels::attn::ForwardKernel<float>(p, q, k, v, o, lse);
  }
  if (o.data() != out.data()) CopyCast(out, o);
}

std::tuple<Tensor, Tensor> FlashAttentionForCpu(const Tensor& query, const Tensor& key,
                                                const Tensor& value, double dropout_p,
                                                bool is_causal,
                                                const std::optional<Tensor>& attn_mask,
                                                std::optional<double> scale) {
  constexpr const char* kOp = "aten::_scaled_dot_product_flash_attention_for_cpu";
  const Problem p =
      CheckProblem(kOp, query, key, value, dropout_p, is_causal, attn_mask, scale, false);
  Tensor out = EmptyLike(query, query.dtype());
  Tensor lse = EmptyHeadsInner({p.batch, p.heads, p.q_len}, ComputeType(query.dtype()));
  RunForward(p, query, key, value, out, lse);
  return {out, lse};
}

// The fused forward for aten::scaled_dot_product_attention's 4-d operands (bool masks too).
std::tuple<Tensor, Tensor> ScaledDotProductAttentionForward(const Tensor& query, const Tensor& key,
                                                            const Tensor& value,
                                                            const std::optional<Tensor>& mask,
                                                            bool is_causal,
                                                            std::optional<double> scale) {
  constexpr const char* kOp = "aten::scaled_dot_product_attention";
  const Problem p = CheckProblem(kOp, query, key, value, 0.0, is_causal, mask, scale, true);
  Tensor out = EmptyLike(query, query.dtype());
  Tensor lse = EmptyHeadsInner({p.batch, p.heads, p.q_len}, ComputeType(query.dtype()));
  RunForward(p, query, key, value, out, lse);
  return {out, lse};
}

// Leading dimensions of an sdpa operand ([..., N, E], at least 2-d) as one batch dim:
// [prod(leading), 1, N, E] after broadcasting to `lead`.
Tensor As4d(const char* op, const char* arg, const Tensor& t, IntArrayRef lead) {
  TB_CHECK(t.ndim() >= 2, ValueError)
      << op << ": expected " << arg << " to have at least 2 dimensions, got shape "
      << ShapeString(t.shape());
  Dims shape(lead);
  shape.push_back(t.size(-2));
  shape.push_back(t.size(-1));
  Tensor e = t.expand(shape);
  int64_t n = 1;
  for (int64_t d : lead) n *= d;
  return e.reshape({n, t.size(-2), t.size(-1)}).unsqueeze(1);
}

// aten::scaled_dot_product_attention, whole: the fused kernel on 4-d operands [B, H, L, E]
// (other ranks folded into one batch dim); enable_gqa lets key / value have fewer heads.
Tensor ScaledDotProductAttention(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const std::optional<Tensor>& attn_mask, double dropout_p,
                                 bool is_causal, std::optional<double> scale, bool enable_gqa) {
  constexpr const char* kOp = "aten::scaled_dot_product_attention";
  TB_CHECK(dropout_p == 0.0, NotImplementedError)
      << kOp << ": dropout_p = " << dropout_p
      << " is not supported (dropout draws random numbers; use dropout_p = 0)";
  TB_CHECK(!(is_causal && attn_mask.has_value()), ValueError)
      << kOp << ": explicit attn_mask should not be set when is_causal=True";
  if (query.ndim() == 4 && key.ndim() == 4 && value.ndim() == 4 && key.size(0) == query.size(0) &&
      value.size(0) == query.size(0)) {
    const int64_t h = query.size(1), hk = key.size(1);
    TB_CHECK(enable_gqa || hk == h || hk == 1, ValueError)
        << kOp << ": key/value have " << hk << " heads and query " << h
        << "; pass enable_gqa=True for grouped-query attention";
    std::optional<Tensor> mask = attn_mask;
    if (mask && mask->ndim() != 2 && mask->ndim() != 4) {
      Tensor m = *mask;
      while (m.ndim() < 4) m = m.unsqueeze(0);
      mask = m;
    }
    return std::get<0>(ScaledDotProductAttentionForward(query, key, value, mask, is_causal, scale));
  }
  // Other ranks: broadcast the leading dims, fold them into the batch.
  TB_CHECK(query.ndim() >= 2 && key.ndim() >= 2 && value.ndim() >= 2, ValueError)
      << kOp << ": query, key and value need at least 2 dimensions, got "
      << ShapeString(query.shape()) << ", " << ShapeString(key.shape()) << " and "
      << ShapeString(value.shape());
  auto leading = [](const Tensor& t) { return IntArrayRef(t.shape().data(), t.ndim() - 2); };
  const Dims lead = BroadcastShapes({leading(query), leading(key), leading(value)}, kOp);
  Tensor q = As4d(kOp, "query", query, lead), k = As4d(kOp, "key", key, lead),
         v = As4d(kOp, "value", value, lead);
  std::optional<Tensor> mask;
  if (attn_mask) {
    Dims full(lead);
    full.push_back(query.size(-2));
    full.push_back(key.size(-2));
    Dims mshape = BroadcastShapes({attn_mask->shape(), IntArrayRef(full)}, kOp);
    TB_CHECK(mshape.ref() == IntArrayRef(full), ValueError)
        << kOp << ": attn_mask of shape " << ShapeString(attn_mask->shape())
        << " does not broadcast to " << ShapeString(full);
    mask = As4d(kOp, "attn_mask", attn_mask->expand(full), lead);
  }
  Tensor out = std::get<0>(ScaledDotProductAttentionForward(q, k, v, mask, is_causal, scale));
  Dims oshape(lead);
  oshape.push_back(query.size(-2));
  oshape.push_back(query.size(-1));
  return out.squeeze(1).reshape(oshape);
}

}  // namespace

TB_REGISTER_KERNELS(attention) {
  const auto cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_scaled_dot_product_flash_attention_for_cpu", cpu,
                       Boxed<&FlashAttentionForCpu>(), TB_HERE);
  table.RegisterKernel("aten::scaled_dot_product_attention", cpu,
                       Boxed<&ScaledDotProductAttention>(), TB_HERE);
}

}  // namespace tb
