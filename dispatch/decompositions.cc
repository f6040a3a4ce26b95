// Decompositions of the composite ops into simpler table ops. Each composite also has a
// whole kernel (kernels/); a decomposition is taken when the op is outside the
// backend-legal set (config.legal_ops / TENSORBRIDGE_DECOMPOSE) or has no kernel.
// The formulas are PyTorch's own (torch/_decomp/decompositions.py) written over table ops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "dispatch/op_call.h"

namespace tb {
namespace {

// The simple ops decompositions are built from.
struct Prims {
  OpRef add{"aten::add.Tensor"}, sub{"aten::sub.Tensor"}, mul{"aten::mul.Tensor"},
      div{"aten::div.Tensor"}, neg{"aten::neg"}, exp{"aten::exp"}, log{"aten::log"},
      log1p{"aten::log1p"}, erf{"aten::erf"}, tanh{"aten::tanh"}, sigmoid{"aten::sigmoid"},
      rsqrt{"aten::rsqrt"}, clamp{"aten::clamp"}, where{"aten::where.self"}, gt{"aten::gt.Scalar"},
      lt{"aten::lt.Scalar"}, sum{"aten::sum.dim_IntList"}, amax{"aten::amax"},
      mean{"aten::mean.dim"}, var{"aten::var.correction"}, bmm{"aten::bmm"}, expand{"aten::expand"},
      reshape{"aten::reshape"}, transpose{"aten::transpose.int"}, unsqueeze{"aten::unsqueeze"},
      ones{"aten::ones"}, tril{"aten::tril"}, where_other{"aten::where.ScalarOther"},
      where_self{"aten::where.ScalarSelf"}, eq{"aten::eq.Scalar"}, all{"aten::all.dim"},
      softmax{"aten::_softmax"}, to_copy{"aten::_to_copy"};
  static const Prims& Get() {
    static const Prims* p = new Prims();
    return *p;
  }
};

Tensor T(const OpResult& r) { return r.tensor(); }

// 0.5 * x * (1 + erf(x / sqrt(2)))  or  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
Tensor Gelu(const Tensor& x, const std::string& approximate) {
  const Prims& p = Prims::Get();
  if (approximate == "tanh") {
    const double k = std::sqrt(2.0 / M_PI);
    Tensor x3 = T(p.mul(T(p.mul(x, x)), x));
    Tensor inner = T(p.mul(T(p.add(x, T(p.mul(x3, 0.044715)))), k));
    return T(p.mul(T(p.mul(x, 0.5)), T(p.add(T(p.tanh(inner)), 1.0))));
  }
  TB_CHECK(approximate == "none", ValueError)
      << "aten::gelu: approximate must be 'none' or 'tanh', got '" << approximate << "'";
  Tensor cdf = T(p.add(T(p.erf(T(p.mul(x, M_SQRT1_2)))), 1.0));
  return T(p.mul(T(p.mul(x, 0.5)), cdf));
}

Tensor GeluBackward(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  const Prims& p = Prims::Get();
  if (approximate == "tanh") {
    // d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)
    const double k = std::sqrt(2.0 / M_PI);
    Tensor x2 = T(p.mul(x, x));
    Tensor inner = T(p.mul(T(p.mul(x, T(p.add(T(p.mul(x2, 0.044715)), 1.0)))), k));
    Tensor t = T(p.tanh(inner));
    Tensor left = T(p.mul(T(p.add(t, 1.0)), 0.5));
    Tensor one_minus_t2 = T(p.sub(T(p.neg(T(p.mul(t, t)))), -1.0));
    Tensor dinner = T(p.mul(T(p.add(T(p.mul(x2, 3 * 0.044715)), 1.0)), k));
    Tensor right = T(p.mul(T(p.mul(T(p.mul(x, 0.5)), one_minus_t2)), dinner));
    return T(p.mul(grad, T(p.add(left, right))));
  }
  // cdf + x * pdf
  Tensor cdf = T(p.mul(T(p.add(T(p.erf(T(p.mul(x, M_SQRT1_2)))), 1.0)), 0.5));
  Tensor pdf = T(p.mul(T(p.exp(T(p.mul(T(p.mul(x, x)), -0.5)))), 1.0 / std::sqrt(2.0 * M_PI)));
  return T(p.mul(grad, T(p.add(cdf, T(p.mul(x, pdf))))));
}

Tensor Silu(const Tensor& x) {
  const Prims& p = Prims::Get();
  return T(p.mul(x, T(p.sigmoid(x))));
}

Tensor SiluBackward(const Tensor& grad, const Tensor& x) {
  const Prims& p = Prims::Get();
  Tensor s = T(p.sigmoid(x));
  // s * (1 + x * (1 - s))
  Tensor one_minus_s = T(p.sub(T(p.neg(s)), -1.0));
  return T(p.mul(grad, T(p.mul(s, T(p.add(T(p.mul(x, one_minus_s)), 1.0))))));
}

Tensor Hardswish(const Tensor& x) {
  const Prims& p = Prims::Get();
  Tensor r6 = T(p.clamp(T(p.add(x, 3.0)), Scalar(0.0), Scalar(6.0)));
  return T(p.div(T(p.mul(x, r6)), 6.0));
}

Tensor HardswishBackward(const Tensor& grad, const Tensor& x) {
  const Prims& p = Prims::Get();
  // -3 < x < 3: grad * (2x + 3) / 6;  x >= 3: grad;  x <= -3: 0
  Tensor mid = T(p.mul(grad, T(p.div(T(p.add(T(p.mul(x, 2.0)), 3.0)), 6.0))));
  Tensor zero = T(p.mul(grad, 0.0));
  Tensor upper = T(p.where(T(p.lt(x, 3.0)), mid, grad));
  return T(p.where(T(p.gt(x, -3.0)), upper, zero));
}

// softplus(x) = x > 20 ? x : log1p(exp(x))  (torch's threshold)
Tensor Softplus(const Tensor& x) {
  const Prims& p = Prims::Get();
  return T(p.where(T(p.gt(x, 20.0)), x, T(p.log1p(T(p.exp(x))))));
}

Tensor Mish(const Tensor& x) {
  const Prims& p = Prims::Get();
  return T(p.mul(x, T(p.tanh(Softplus(x)))));
}

Tensor MishBackward(const Tensor& grad, const Tensor& x) {
  const Prims& p = Prims::Get();
  Tensor t = T(p.tanh(Softplus(x)));
  Tensor s = T(p.sigmoid(x));
  Tensor one_minus_t2 = T(p.sub(T(p.neg(T(p.mul(t, t)))), -1.0));
  return T(p.mul(grad, T(p.add(t, T(p.mul(T(p.mul(x, s)), one_minus_t2))))));
}

std::vector<int64_t> Dim(int64_t d) { return {d}; }

Tensor Softmax(const Tensor& x, int64_t dim, bool half_to_float) {
  const Prims& p = Prims::Get();
  TB_CHECK(!half_to_float, NotImplementedError)
      << "aten::_softmax: the decomposition does not take half_to_float=True";
  Tensor shifted = T(p.sub(x, T(p.amax(x, Dim(dim), true))));
  Tensor e = T(p.exp(shifted));
  return T(p.div(e, T(p.sum(e, Dim(dim), true))));
}

Tensor LogSoftmax(const Tensor& x, int64_t dim, bool half_to_float) {
  const Prims& p = Prims::Get();
  TB_CHECK(!half_to_float, NotImplementedError)
      << "aten::_log_softmax: the decomposition does not take half_to_float=True";
  Tensor shifted = T(p.sub(x, T(p.amax(x, Dim(dim), true))));
  Tensor lse = T(p.log(T(p.sum(T(p.exp(shifted)), Dim(dim), true))));
  return T(p.sub(shifted, lse));
}

Tensor SoftmaxBackward(const Tensor& grad, const Tensor& out, int64_t dim, DType) {
  const Prims& p = Prims::Get();
  Tensor go = T(p.mul(grad, out));
  return T(p.sub(go, T(p.mul(out, T(p.sum(go, Dim(dim), true))))));
}

Tensor LogSoftmaxBackward(const Tensor& grad, const Tensor& out, int64_t dim, DType) {
  const Prims& p = Prims::Get();
  return T(p.sub(grad, T(p.mul(T(p.exp(out)), T(p.sum(grad, Dim(dim), true))))));
}

std::vector<int64_t> NormDims(const Tensor& x, const std::vector<int64_t>& normalized_shape,
                              const char* op) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TB_CHECK(k >= 1 && k <= x.ndim(), ValueError)
      << op << ": normalized_shape " << ShapeString(normalized_shape)
      << " does not fit an input of shape " << ShapeString(x.shape());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < k; ++i) {
    TB_CHECK(x.size(x.ndim() - k + i) == normalized_shape[i], ValueError)
        << op << ": normalized_shape " << ShapeString(normalized_shape)
        << " does not match the trailing dimensions of " << ShapeString(x.shape());
    dims.push_back(x.ndim() - k + i);
  }
  return dims;
}

std::tuple<Tensor, Tensor, Tensor> LayerNorm(const Tensor& x,
                                             const std::vector<int64_t>& normalized_shape,
                                             const std::optional<Tensor>& weight,
                                             const std::optional<Tensor>& bias, double eps) {
  const Prims& p = Prims::Get();
  std::vector<int64_t> dims = NormDims(x, normalized_shape, "aten::native_layer_norm");
  Tensor mean = T(p.mean(x, dims, true));
  Tensor var = T(
      p.var.WithKeywords({x, dims}, {{"correction", Value(int64_t{0})}, {"keepdim", Value(true)}}));
  Tensor rstd = T(p.rsqrt(T(p.add(var, eps))));
  Tensor out = T(p.mul(T(p.sub(x, mean)), rstd));
  if (weight) out = T(p.mul(out, *weight));
  if (bias) out = T(p.add(out, *bias));
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> LayerNormBackward(const Tensor& grad, const Tensor& x,
                                                     const std::vector<int64_t>& normalized_shape,
                                                     const Tensor& mean, const Tensor& rstd,
                                                     const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias,
                                                     const std::vector<bool>& output_mask) {
  const Prims& p = Prims::Get();
  std::vector<int64_t> dims = NormDims(x, normalized_shape, "aten::native_layer_norm_backward");
  std::vector<int64_t> batch_dims;
  for (int64_t i = 0; i < x.ndim() - static_cast<int64_t>(dims.size()); ++i)
    batch_dims.push_back(i);
  const double n = static_cast<double>(std::accumulate(
      normalized_shape.begin(), normalized_shape.end(), int64_t{1}, std::multiplies<int64_t>()));
  Tensor xhat = T(p.mul(T(p.sub(x, mean)), rstd));
  Tensor g = weight ? T(p.mul(grad, *weight)) : grad;
  Tensor dx, dw, db;
  if (output_mask.size() > 0 && output_mask[0]) {
    // rstd / N * (N g - sum(g) - xhat * sum(g xhat))
    Tensor a = T(p.mul(g, n));
    Tensor b = T(p.sum(g, dims, true));
    Tensor c = T(p.mul(xhat, T(p.sum(T(p.mul(g, xhat)), dims, true))));
    dx = T(p.mul(T(p.sub(T(p.sub(a, b)), c)), T(p.div(rstd, n))));
  }
  auto reduce_batch = [&](const Tensor& t) {
    return batch_dims.empty() ? t : T(p.sum(t, batch_dims, false));
  };
  if (output_mask.size() > 1 && output_mask[1] && weight) dw = reduce_batch(T(p.mul(grad, xhat)));
  if (output_mask.size() > 2 && output_mask[2] && bias) db = reduce_batch(grad);
  return {dx, dw, db};
}

// torch's _safe_softmax (the softmax of sdpa's math path): rows of -inf only give 0.
Tensor SafeSoftmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  const Prims& p = Prims::Get();
  Tensor xs = x;
  if (dtype && *dtype != x.dtype()) {
    xs = T(p.to_copy.WithKeywords({x}, {{"dtype", Value(*dtype)}}));
  }
  Tensor out = T(p.softmax(xs, dim, false));
  Tensor none = T(p.all(T(p.eq(x, -std::numeric_limits<double>::infinity())), dim, true));
  return T(p.where_self(none, 0.0, out));
}

// a [..., m, k] @ b [..., k, n] with the leading dims broadcast, as one bmm.
Tensor BatchedMatmul(const Tensor& a, const Tensor& b) {
  const Prims& p = Prims::Get();
  // The leading dims of a and b, broadcast (numpy's rules).
  const int64_t na = a.ndim() - 2, nb = b.ndim() - 2, nl = std::max(na, nb);
  std::vector<int64_t> lead(nl);
  for (int64_t i = 0; i < nl; ++i) {
    const int64_t x = i - (nl - na) >= 0 ? a.size(i - (nl - na)) : 1;
    const int64_t y = i - (nl - nb) >= 0 ? b.size(i - (nl - nb)) : 1;
    TB_CHECK(x == y || x == 1 || y == 1, ValueError)
        << "aten::scaled_dot_product_attention: shapes " << ShapeString(a.shape()) << " and "
        << ShapeString(b.shape()) << " do not broadcast";
    lead[i] = x == 1 ? y : x;
  }
  int64_t n = 1;
  for (int64_t d : lead) n *= d;
  auto flat = [&](const Tensor& t) {
    std::vector<int64_t> full(lead.begin(), lead.end());
    full.push_back(t.size(-2));
    full.push_back(t.size(-1));
    return T(p.reshape(T(p.expand(t, full)), std::vector<int64_t>{n, t.size(-2), t.size(-1)}));
  };
  Tensor r = T(p.bmm(flat(a), flat(b)));
  std::vector<int64_t> shape(lead.begin(), lead.end());
  shape.push_back(a.size(-2));
  shape.push_back(b.size(-1));
  return T(p.reshape(r, shape));
}

// torch's math attention: softmax(q k^T * scale + bias) v, the causal cut and a bool mask as
// -inf, an additive mask added; grouped key / value heads repeated (enable_gqa); rows that
// see no key give 0 (torch's _safe_softmax).
Tensor ScaledDotProductAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::optional<Tensor>& attn_mask, double dropout_p,
                                 bool is_causal, std::optional<double> scale, bool enable_gqa) {
  const Prims& p = Prims::Get();
  const char* op = "aten::scaled_dot_product_attention";
  TB_CHECK(dropout_p == 0.0, NotImplementedError)
      << op << ": dropout_p = " << dropout_p
      << " is not supported (dropout draws random numbers; use dropout_p = 0)";
  TB_CHECK(!(is_causal && attn_mask.has_value()), ValueError)
      << op << ": explicit attn_mask should not be set when is_causal=True";
  TB_CHECK(q.ndim() >= 2 && k.ndim() >= 2 && v.ndim() >= 2, ValueError)
      << op << ": query, key and value need at least 2 dimensions, got " << ShapeString(q.shape())
      << ", " << ShapeString(k.shape()) << " and " << ShapeString(v.shape());
  Tensor key = k, value = v;
  if (enable_gqa && q.ndim() >= 3 && k.ndim() >= 3 && k.size(-3) != q.size(-3)) {
    const int64_t h = q.size(-3), hk = k.size(-3);
    TB_CHECK(hk > 0 && h % hk == 0, ValueError)
        << op << ": the number of key/value heads (" << hk
        << ") must divide the number of query heads (" << h << ")";
    auto repeat = [&](const Tensor& t) {  // [..., hk, S, E] -> [..., h, S, E]
      std::vector<int64_t> grouped(t.shape().begin(), t.shape().end());
      grouped.insert(grouped.end() - 2, h / hk);
      std::vector<int64_t> flat(t.shape().begin(), t.shape().end());
      flat[flat.size() - 3] = h;
      return T(p.reshape(T(p.expand(T(p.unsqueeze(t, int64_t{-3})), grouped)), flat));
    };
    key = repeat(k);
    value = repeat(v);
  }
  const int64_t L = q.size(-2), S = key.size(-2);
  const double sc = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const double ninf = -std::numeric_limits<double>::infinity();
  Tensor s = T(p.mul(BatchedMatmul(q, T(p.transpose(key, int64_t{-2}, int64_t{-1}))), sc));
  if (is_causal) {
    Tensor ones = T(
        p.ones.WithKeywords({Value(std::vector<int64_t>{L, S})}, {{"dtype", Value(DType::kBool)}}));
    s = T(p.where_other(T(p.tril(ones)), s, ninf));
  }
  if (attn_mask) {
    s = attn_mask->dtype() == DType::kBool ? T(p.where_other(*attn_mask, s, ninf))
                                           : T(p.add(s, *attn_mask));
  }
  Tensor w = T(p.softmax(s, int64_t{-1}, false));
  if (attn_mask) {
    Tensor none = T(p.all(T(p.eq(s, ninf)), int64_t{-1}, true));
    w = T(p.where_self(none, 0.0, w));
  }
  return BatchedMatmul(w, value);
}

}  // namespace

TB_REGISTER_KERNELS(decompositions) {
  table.RegisterDecomposition("aten::gelu", Boxed<&Gelu>(), TB_HERE);
  table.RegisterDecomposition("aten::gelu_backward", Boxed<&GeluBackward>(), TB_HERE);
  table.RegisterDecomposition("aten::silu", Boxed<&Silu>(), TB_HERE);
  table.RegisterDecomposition("aten::silu_backward", Boxed<&SiluBackward>(), TB_HERE);
  table.RegisterDecomposition("aten::hardswish", Boxed<&Hardswish>(), TB_HERE);
  table.RegisterDecomposition("aten::hardswish_backward", Boxed<&HardswishBackward>(), TB_HERE);
  table.RegisterDecomposition("aten::mish", Boxed<&Mish>(), TB_HERE);
  table.RegisterDecomposition("aten::mish_backward", Boxed<&MishBackward>(), TB_HERE);
  table.RegisterDecomposition("aten::_softmax", Boxed<&Softmax>(), TB_HERE);
  table.RegisterDecomposition("aten::_log_softmax", Boxed<&LogSoftmax>(), TB_HERE);
  table.RegisterDecomposition("aten::_softmax_backward_data", Boxed<&SoftmaxBackward>(), TB_HERE);
  table.RegisterDecomposition("aten::_log_softmax_backward_data", Boxed<&LogSoftmaxBackward>(),
                              TB_HERE);
  table.RegisterDecomposition("aten::native_layer_norm", Boxed<&LayerNorm>(), TB_HERE);
  table.RegisterDecomposition("aten::native_layer_norm_backward", Boxed<&LayerNormBackward>(),
                              TB_HERE);
  table.RegisterDecomposition("aten::_safe_softmax", Boxed<&SafeSoftmax>(), TB_HERE);
  table.RegisterDecomposition("aten::scaled_dot_product_attention",
                              Boxed<&ScaledDotProductAttention>(), TB_HERE);
}

}  // namespace tb
