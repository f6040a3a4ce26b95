// Fused ops of a producer and one activation (tensorbridge-private ops, not ATen), callable by
// name; the compile backend's epilogue pass emits the general tensorbridge::matmul_epilogue
// and tensorbridge::convolution_epilogue (epilogue.cc) instead:
//
//   tensorbridge::addmm_act(self, mat1, mat2, beta, alpha, activation, approximate)
//       = activation(addmm(self, mat1, mat2, beta, alpha)); activation "relu" or "gelu"
//       (approximate "none" or "tanh", as aten::gelu).
//       float32 with a bias vector, beta = alpha = 1: few rows or a short inner dimension on
//       the small-product kernels (kernels::SmallGemm), then the activation in place; else,
//       with row- or column-major operands, one oneDNN primitive with the bias as its bias argument
//       and gelu as an eltwise post-op (relu in place after it, keeping NaN as torch does) (an
//       inner product on the weight as stored when mat2 is a row-major weight's transpose and mat1
//       has few rows, else a matmul). Otherwise aten::addmm then the activation in place on its
//       fresh result.
//   tensorbridge::convolution_relu(<aten::convolution's arguments>)
//       = relu(convolution(...)): the convolution, then relu in place on its fresh result (one
//       node and one buffer). Not oneDNN's relu post-op: it turns NaN into 0 where torch's
//       relu keeps NaN.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/conv_internal.h"
#include "kernels/cpu/small_gemm_internal.h"
#include "kernels/linear_internal.h"
#include "kernels/onednn/onednn_internal.h"

namespace tb {
namespace kernels {
namespace {

dnnl::post_ops PostOps(LinearAct act) {
  dnnl::post_ops po;
  if (act != LinearAct::kNone) {
    const auto alg = act == LinearAct::kRelu   ? dnnl::algorithm::eltwise_relu
                     : act == LinearAct::kGelu ? dnnl::algorithm::eltwise_gelu_erf
                                               : dnnl::algorithm::eltwise_gelu_tanh;
    po.append_eltwise(1.f, alg, 0.f, 0.f);
  }
  return po;
}

// The strides oneDNN takes for a 2-D operand (row- or column-major, any leading dimension);
// false when it needs a copy.
bool MatrixStrides(const Tensor& t, dnnl::memory::dims* strides) {
  const int64_t r = t.size(0), c = t.size(1), s0 = t.stride(0), s1 = t.stride(1);
  if (s0 < 0 || s1 < 0) return false;
  if ((c == 1 || s1 == 1) && (r == 1 || s0 >= c)) {
    *strides = {r == 1 ? c : s0, 1};
    return true;
  }
  if ((r == 1 || s0 == 1) && (c == 1 || s1 >= r)) {
    *strides = {1, c == 1 ? r : s1};
    return true;
  }
  return false;
}

}  // namespace

bool SmallGemm(const Tensor& a, const Tensor& b, const Tensor* bias, double alpha, double beta,
               Tensor* out) {
  auto f32 = [](const Tensor& t) { return t.dtype() == DType::kFloat32; };
  if (!f32(a) || !f32(b) || (bias != nullptr && !f32(*bias)) ||
      (out->defined() && (!f32(*out) || !out->is_contiguous()))) {
    return false;
  }
  const int d = static_cast<int>(a.ndim()) - 2;  // the row dimension: 0, or 1 in a batch
  const int64_t nb = d == 1 ? a.size(0) : 1, m = a.size(d), k = a.size(d + 1), n = b.size(d + 1);
  const int64_t macs = nb * m * n * k;
  if (k == 0 || (m <= kSmallRows ? macs > kSmallMacs : k > kSmallInner || macs > kShortInnerMacs)) {
    return false;
  }
  const small_gemm::Mat b0{b.data_as<const float>(), b.stride(d), b.stride(d + 1)};
  if (!small_gemm::Vectorised(k, b0)) return false;
  // One row times a large row-major b reads b at memory speed: oneDNN's sgemm reads it faster.
  if (m == 1 && n > 1 && b0.cs == 1 && k * n > kOneRowElems) return false;
  if (!out->defined()) {
    *out = Tensor::Empty(d == 1 ? Dims{nb, m, n} : Dims{m, n}, DType::kFloat32);
  }
  Tensor bc = bias != nullptr ? bias->contiguous() : Tensor();
  const float* pbias = bias != nullptr ? bc.data_as<const float>() : nullptr;
  float* pc = static_cast<float*>(out->mutable_data());
  // Products of kParallelMacs multiply-adds or more split their columns across threads, in
  // blocks of kParallelCols; smaller ones run on the calling thread.
  constexpr int64_t kParallelMacs = int64_t{1} << 17, kParallelCols = 96;
  const bool parallel = m * n * k >= kParallelMacs && n > kParallelCols;
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t ao = d == 1 ? i * a.stride(0) : 0, bo = d == 1 ? i * b.stride(0) : 0;
    const small_gemm::Mat ai{a.data_as<const float>() + ao, a.stride(d), a.stride(d + 1)};
    ForEachBlock(n, parallel ? kParallelCols : n, parallel, [&](int64_t j0, int64_t j1) {
      const small_gemm::Mat bj{b0.p + bo + j0 * b0.cs, b0.rs, b0.cs};
      small_gemm::Gemm(m, j1 - j0, k, static_cast<float>(alpha), ai, bj,
                       pbias != nullptr ? pbias + j0 : nullptr, static_cast<float>(beta),
                       pc + i * m * n + j0, n);
    });
  }
  return true;
}

bool OneDnnLinear(const char* op, const Tensor& bias, Tensor a, Tensor b, LinearAct act,
                  Tensor* out) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || k == 0 || n == 0) return false;
  dnnl::memory::dims as, bs;
  if (!MatrixStrides(a, &as)) {
    a = a.contiguous();
    MatrixStrides(a, &as);
  }
  if (!MatrixStrides(b, &bs)) {
    b = b.contiguous();
    MatrixStrides(b, &bs);
  }
  Tensor bc = bias.contiguous();
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc a_md({m, k}, dt::f32, as), b_md({k, n}, dt::f32, bs);
  auto bias_md = onednn::PlainDesc({1, n}, dt::f32), c_md = onednn::PlainDesc({m, n}, dt::f32);
  *out = Tensor::Empty({m, n}, DType::kFloat32);
  std::string key = onednn::Key("matmul_bias_act", m, k, n, as, bs, static_cast<int>(act));
  onednn::Guard(op, [&] {
    auto prim = onednn::Cached(key, [&] {
      dnnl::primitive_attr attr = onednn::Attr();
      attr.set_post_ops(PostOps(act));
      dnnl::matmul::desc desc(a_md, b_md, bias_md, c_md);
      return dnnl::primitive(
          dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, onednn::Engine())));
    });
    auto am = onednn::Wrap(a_md, a.data()), bm = onednn::Wrap(b_md, b.data());
    auto biasm = onednn::Wrap(bias_md, bc.data()), cm = onednn::Wrap(c_md, out->data());
    onednn::Execute(
        prim,
        {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, cm}});
  });
  return true;
}

bool OneDnnInnerProduct(const char* op, const Tensor* bias, const Tensor& a, const Tensor& b,
                        LinearAct act, Tensor* out) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || k == 0 || n == 0) return false;
  // The weight is [n, k]: b's transpose. Stored as such (b = weight.t(), b.stride(0) == 1) or
  // as b itself, row-major (the weight's "io" layout).
  const bool oi = b.stride(0) == 1 && (n == 1 || b.stride(1) == k);
  const bool io = !oi && b.stride(1) == 1 && (k == 1 || b.stride(0) == n);
  if (!oi && !io) return false;
  Tensor x = a.contiguous(), bc = bias != nullptr ? bias->contiguous() : Tensor();
  using dt = dnnl::memory::data_type;
  auto src_md = onednn::PlainDesc({m, k}, dt::f32);
  dnnl::memory::desc w_md = oi ? onednn::PlainDesc({n, k}, dt::f32)
                               : dnnl::memory::desc({n, k}, dt::f32, dnnl::memory::dims{1, n});
  auto bias_md = onednn::PlainDesc({n}, dt::f32), dst_md = onednn::PlainDesc({m, n}, dt::f32);
  *out = Tensor::Empty({m, n}, DType::kFloat32);
  std::string key = onednn::Key("ip_bias_act", m, k, n, static_cast<int>(act),
                                static_cast<int>(bc.defined()), static_cast<int>(oi));
  onednn::Guard(op, [&] {
    auto prim = onednn::Cached(key, [&] {
      dnnl::primitive_attr attr = onednn::Attr();
      attr.set_post_ops(PostOps(act));
      const auto prop = dnnl::prop_kind::forward_inference;
      auto desc = bc.defined()
                      ? dnnl::inner_product_forward::desc(prop, src_md, w_md, bias_md, dst_md)
                      : dnnl::inner_product_forward::desc(prop, src_md, w_md, dst_md);
      return dnnl::primitive(dnnl::inner_product_forward(
          dnnl::inner_product_forward::primitive_desc(desc, attr, onednn::Engine())));
    });
    auto sm = onednn::Wrap(src_md, x.data()), wm = onednn::Wrap(w_md, b.data());
    auto dm = onednn::Wrap(dst_md, out->data());
    if (bc.defined()) {
      auto bm = onednn::Wrap(bias_md, bc.data());
      onednn::Execute(
          prim,
          {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, dm}});
    } else {
      onednn::Execute(prim, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dm}});
    }
  });
  return true;
}

}  // namespace kernels

namespace {

using kernels::kInnerProductRows;
using Act = kernels::LinearAct;

Act ParseAct(const char* op, const std::string& activation, const std::string& approximate) {
  TB_CHECK(approximate == "none" || approximate == "tanh", ValueError)
      << op << ": approximate must be 'none' or 'tanh', got '" << approximate << "'";
  if (activation == "relu") return Act::kRelu;
  if (activation == "gelu") return approximate == "tanh" ? Act::kGeluTanh : Act::kGelu;
  TB_THROW(ValueError) << op << ": activation must be 'relu' or 'gelu', got '" << activation << "'";
}

template <typename T>
void ReluInPlace(T* p, int64_t n) {
  kernels::ForEachBlock(n, 65536, n > 65536, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) p[i] = p[i] < T(0) ? T(0) : p[i];
  });
}

// Applies `act` in place to `t`, a fresh contiguous result no one else holds.
void ActivateInPlace(const char* op, const Tensor& t, Act act) {
  if (act == Act::kRelu && t.is_contiguous()) {
    if (t.dtype() == DType::kFloat32) {
      ReluInPlace(static_cast<float*>(t.mutable_data()), t.numel());
      return;
    }
    if (t.dtype() == DType::kFloat64) {
      ReluInPlace(static_cast<double*>(t.mutable_data()), t.numel());
      return;
    }
  }
  static const OpRef relu("aten::relu"), gelu("aten::gelu"), copy("aten::copy_");
  Tensor y =
      act == Act::kRelu
          ? relu(t).tensor()
          : gelu.WithKeywords(
                    {Value(t)},
                    {{"approximate", Value(std::string(act == Act::kGelu ? "none" : "tanh"))}})
                .tensor();
  copy(t, y);
}

Tensor AddmmAct(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                const Scalar& alpha, const std::string& activation,
                const std::string& approximate) {
  constexpr const char* kOp = "tensorbridge::addmm_act";
  const Act act = ParseAct(kOp, activation, approximate);
  const bool f32 = self.dtype() == DType::kFloat32 && mat1.dtype() == DType::kFloat32 &&
                   mat2.dtype() == DType::kFloat32;
  const bool bias_vector = (self.ndim() == 1 || (self.ndim() == 2 && self.size(0) == 1)) &&
                           mat2.ndim() == 2 && self.size(self.ndim() - 1) == mat2.size(1);
  if (f32 && bias_vector && mat1.ndim() == 2 && mat1.size(1) == mat2.size(0) &&
      beta.to_double() == 1.0 && alpha.to_double() == 1.0) {
    Tensor out;
    // gelu is oneDNN's post-op; relu runs after, in place: oneDNN's relu turns NaN into 0
    // where torch's keeps it.
    const Act post = act == Act::kRelu ? Act::kNone : act;
    // Few rows: the small-product kernels, else the inner product (a matrix-vector product at
    // batch 1), several times faster than oneDNN 2.6's matmul on the transposed weight.
    if (kernels::SmallGemm(mat1, mat2, &self, 1.0, 0.0, &out)) {
      ActivateInPlace(kOp, out, act);
      return out;
    }
    if ((mat1.size(0) <= kInnerProductRows &&
         kernels::OneDnnInnerProduct(kOp, &self, mat1, mat2, post, &out)) ||
        kernels::OneDnnLinear(kOp, self, mat1, mat2, post, &out)) {
      if (post != act) ActivateInPlace(kOp, out, act);
      return out;
    }
  }
  static const OpRef addmm("aten::addmm");
  Tensor out = addmm
                   .WithKeywords({Value(self), Value(mat1), Value(mat2)},
                                 {{"beta", Value(beta)}, {"alpha", Value(alpha)}})
                   .tensor();
  ActivateInPlace(kOp, out, act);
  return out;
}

Tensor ConvolutionRelu(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& dilation, bool transposed,
                       const std::vector<int64_t>& output_padding, int64_t groups) {
  constexpr const char* kOp = "tensorbridge::convolution_relu";
  Tensor out = kernels::Convolution(kOp, input, weight, bias, stride, padding, dilation, transposed,
                                    output_padding, groups);
  ActivateInPlace(kOp, out, Act::kRelu);
  return out;
}

}  // namespace

TB_REGISTER_KERNELS(fused) {
  OpTable& t = OpTable::Global();
  t.Define(
      "tensorbridge::addmm_act(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, "
      "Scalar alpha=1, str activation, str approximate=\"none\") -> Tensor");
  t.Define(
      "tensorbridge::convolution_relu(Tensor input, Tensor weight, Tensor? bias, SymInt[] "
      "stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, "
      "SymInt groups) -> Tensor");
  table.RegisterKernel("tensorbridge::addmm_act", DeviceType::kCPU, Boxed<&AddmmAct>(), TB_HERE);
  table.RegisterKernel("tensorbridge::convolution_relu", DeviceType::kCPU,
                       Boxed<&ConvolutionRelu>(), TB_HERE);
}

}  // namespace tb
