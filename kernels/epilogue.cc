// Matrix products and convolutions with their epilogues: the fused nodes the compile backend's
// epilogue pass (python/tensorbridge/_epilogue.py) puts in place of a producer and the chain of
// elementwise nodes that only it reads (tensorbridge-private ops, not ATen):
//
//   tensorbridge::matmul_epilogue(input, weight, bias, residual, weight_t, epilogue, shape,
//                                 dtype, pack)
//       w = weight.t() if weight_t else weight, cast to input's dtype; input [m, k] with w [k, n],
//       or input [B, m, k] with w [B, k, n]. out = steps(input @ w + bias), each step of
//       `epilogue` ("gelu,add,relu", say) in order: relu, gelu, gelu_tanh, silu, sigmoid, tanh
//       or add (+ residual, a tensor of the result's element count, read in row-major order);
//       the result has dtype `dtype` and is reshaped to `shape`. relu may only come last.
//       float32 / bfloat16: one oneDNN matmul, bias as its bias argument, the activations as
//       eltwise post-ops and the residual as a binary add post-op, computed in float32 and
//       rounded once into `dtype`; relu runs after the primitive, in place (oneDNN's relu turns
//       NaN into 0, torch's keeps it). float32 with few rows or a short inner dimension
//       (kernels::SmallGemm): the small-product kernels with the bias, then the steps as the
//       ATen ops, rounded once into `dtype`. Other dtypes, or a combination oneDNN lacks: the
//       ATen ops one after the other.
//       pack >= 0 (inference plans whose weight is a plan input): the weight, cast and reordered
//       into the layout the primitive prefers, is kept under that id for the next calls while
//       the same memory is bound; the plan drops it (tensorbridge::drop_packed) when the
//       weight's version counter moves.
//   tensorbridge::convolution_epilogue(<aten::convolution's arguments>, residual, epilogue,
//                                      extra_padding, bn_weight, bn_bias, bn_mean, bn_var,
//                                      bn_eps)
//       = clamp(steps(bn(convolution(pad(input), ...)))), each in place on the convolution's
//       fresh result (one node and one buffer): pad adds extra_padding's zeros ((left, right)
//       per spatial dim: constant_pad_nd's, folded into the convolution's padding); bn is
//       _native_batch_norm_legit_no_training with those parameters when bn_mean is given; the
//       steps as above; clamp is hardtanh when `epilogue` ends with "hardtanh:<min>:<max>".
//   tensorbridge::drop_packed(int[] packs) -> int
//       Forgets the packed weights of those ids; returns how many were held.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/conv_internal.h"
#include "kernels/cpu/simd_internal.h"
#include "kernels/fused_pointwise_internal.h"
#include "kernels/linear_internal.h"
#include "kernels/loops_internal.h"
#include "kernels/norm_internal.h"
#include "kernels/onednn/onednn_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

enum class Step : uint8_t { kRelu, kGelu, kGeluTanh, kSilu, kSigmoid, kTanh, kAdd };

std::vector<Step> ParseSteps(const char* op, const std::string& text, bool has_residual) {
  std::vector<Step> steps;
  std::stringstream ss(text);
  std::string s;
  int adds = 0;
  while (std::getline(ss, s, ',')) {
    if (s.empty()) continue;
    TB_CHECK(steps.empty() || steps.back() != Step::kRelu, ValueError)
        << op << ": relu may only be the last step of the epilogue '" << text << "'";
    if (s == "relu") {
      steps.push_back(Step::kRelu);
    } else if (s == "gelu") {
      steps.push_back(Step::kGelu);
    } else if (s == "gelu_tanh") {
      steps.push_back(Step::kGeluTanh);
    } else if (s == "silu") {
      steps.push_back(Step::kSilu);
    } else if (s == "sigmoid") {
      steps.push_back(Step::kSigmoid);
    } else if (s == "tanh") {
      steps.push_back(Step::kTanh);
    } else if (s == "add") {
      steps.push_back(Step::kAdd);
      ++adds;
    } else {
      TB_THROW(ValueError) << op << ": unknown epilogue step '" << s
                           << "' (relu, gelu, gelu_tanh, silu, sigmoid, tanh, add)";
    }
  }
  TB_CHECK(adds <= 1, ValueError) << op << ": the epilogue '" << text << "' adds more than once";
  TB_CHECK((adds == 1) == has_residual, ValueError)
      << op << ": the epilogue '" << text << "' "
      << (has_residual ? "does not add the residual it is given" : "adds a residual not given");
  return steps;
}

// Applies `steps` to `t` (a fresh contiguous result no one else holds) with the ATen ops;
// returns the result, `t` itself unless a step promotes the dtype.
Tensor ApplySteps(const std::vector<Step>& steps, Tensor t, const Tensor* residual) {
  static const OpRef relu("aten::relu"), gelu("aten::gelu"), silu("aten::silu"),
      sigmoid("aten::sigmoid"), tanh_op("aten::tanh"), add("aten::add.Tensor");
  for (Step s : steps) {
    Tensor y;
    switch (s) {
      case Step::kRelu: y = relu(t).tensor(); break;
      case Step::kGelu:
      case Step::kGeluTanh:
        y = gelu.WithKeywords(
                    {Value(t)},
                    {{"approximate", Value(std::string(s == Step::kGelu ? "none" : "tanh"))}})
                .tensor();
        break;
      case Step::kSilu: y = silu(t).tensor(); break;
      case Step::kSigmoid: y = sigmoid(t).tensor(); break;
      case Step::kTanh: y = tanh_op(t).tensor(); break;
      case Step::kAdd: y = add(t, residual->reshape(t.shape())).tensor(); break;
    }
    if (y.dtype() == t.dtype()) {
      t.copy_from(y);
    } else {
      t = y;
    }
  }
  return t;
}

template <typename T>
void ReluInPlace(T* p, int64_t n) {
  kernels::ForEachBlock(n, 65536, n > 65536, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) p[i] = p[i] < T(0) ? T(0) : p[i];
  });
}

// relu on a contiguous float32 or bfloat16 buffer, keeping NaN (as torch does).
void ReluInPlace(const Tensor& t) {
  if (t.dtype() == DType::kFloat32) {
    ReluInPlace(static_cast<float*>(t.mutable_data()), t.numel());
    return;
  }
  // bfloat16: a negative number (sign bit set, not NaN) becomes +0.
  auto* p = static_cast<uint16_t*>(t.mutable_data());
  const int64_t n = t.numel();
  kernels::ForEachBlock(n, 65536, n > 65536, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const uint16_t x = p[i];
      p[i] = (x & 0x8000) && (x & 0x7fff) <= 0x7f80 ? uint16_t(0) : x;
    }
  });
}

// Applies `steps` in place to `t`, a fresh contiguous float32 result (the small-product path),
// a chunk at a time through a buffer on the stack: the loops the fused pointwise node and the
// ATen ops' float32 kernels run (the same bits), with no temporary tensor. False (nothing done)
// when `t` or the residual is not contiguous float32.
bool StepsInPlace(const std::vector<Step>& steps, const Tensor& t, const Tensor* residual) {
  if (t.dtype() != DType::kFloat32 || !t.is_contiguous()) return false;
  if (residual != nullptr && (residual->dtype() != DType::kFloat32 || !residual->is_contiguous())) {
    return false;
  }
  using fused_pointwise::Op;
  float* p = static_cast<float*>(t.mutable_data());
  const float* r = residual != nullptr ? residual->data_as<const float>() : nullptr;
  const int64_t n = t.numel();
  constexpr int64_t kChunk = 512;
  alignas(64) float buf[kChunk];
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t len = std::min(kChunk, n - s);
    for (Step step : steps) {
      if (step == Step::kRelu) {
        ReluInPlace(p + s, len);
        continue;
      }
      const Op op = step == Step::kGelu       ? Op::kGelu
                    : step == Step::kGeluTanh ? Op::kGeluTanh
                    : step == Step::kSilu     ? Op::kSilu
                    : step == Step::kSigmoid  ? Op::kSigmoid
                    : step == Step::kTanh     ? Op::kTanh
                                              : Op::kAdd;
      const float* b = op == Op::kAdd ? r + s : nullptr;
      if (!fused_pointwise::Arith(op, buf, p + s, b, nullptr, len)) {
        fused_pointwise::Math(op, buf, p + s, b, len);
      }
      std::memcpy(p + s, buf, len * sizeof(float));
    }
  }
  return true;
}

// ---- the oneDNN matmul -------------------------------------------------------------------

bool OneDnnType(DType t) { return t == DType::kFloat32 || t == DType::kBFloat16; }

// Strides oneDNN takes for a 2-D or 3-D operand (row- or column-major matrices, any batch
// stride); false when it needs a contiguous copy.
bool MatrixStrides(const Tensor& t, dnnl::memory::dims* strides) {
  const int nd = static_cast<int>(t.ndim());
  const int64_t r = t.size(nd - 2), c = t.size(nd - 1), s1 = t.stride(nd - 2),
                s2 = t.stride(nd - 1);
  if (s1 < 0 || s2 < 0) return false;
  int64_t ld1, ld2, extent;
  if ((c == 1 || s2 == 1) && (r == 1 || s1 >= c)) {
    ld1 = r == 1 ? c : s1;
    ld2 = 1;
    extent = ld1 * r;
  } else if ((r == 1 || s1 == 1) && (c == 1 || s2 >= r)) {
    ld1 = 1;
    ld2 = c == 1 ? r : s2;
    extent = ld2 * c;
  } else {
    return false;
  }
  if (nd == 2) {
    *strides = {ld1, ld2};
    return true;
  }
  const int64_t b = t.size(0), s0 = t.stride(0);
  if (b > 1 && s0 < extent) return false;  // overlapping or broadcast batches
  *strides = {b == 1 ? extent : s0, ld1, ld2};
  return true;
}

dnnl::memory::desc OperandDesc(Tensor* t, dnnl::memory::data_type dt) {
  dnnl::memory::dims strides;
  if (!MatrixStrides(*t, &strides)) {
    *t = t->contiguous();
    MatrixStrides(*t, &strides);
  }
  return dnnl::memory::desc(dnnl::memory::dims(t->shape().begin(), t->shape().end()), dt, strides);
}

struct Packed {
  const void* data = nullptr;  // the weight memory it was packed from
  std::string key;             // that weight's shape, strides and dtype, and the packed layout
  dnnl::memory mem;
};

std::mutex& PackMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

std::unordered_map<int64_t, std::shared_ptr<const Packed>>& Packs() {
  static auto* packs = new std::unordered_map<int64_t, std::shared_ptr<const Packed>>();
  return *packs;
}

struct MatmulPrim {
  dnnl::primitive prim;
  dnnl::memory::desc weights;  // the layout the primitive reads the weight in
};

// out = steps(a @ w + bias) on one oneDNN matmul; false when oneDNN lacks the combination.
bool OneDnnMatmul(const char* op, Tensor a, Tensor w, const Tensor* bias, const Tensor* residual,
                  const std::vector<Step>& steps, DType out_dtype, int64_t pack,
                  const Tensor& weight_source, Tensor* out) {
  const bool batched = a.ndim() == 3;
  const int64_t m = a.size(-2), n = w.size(-1), nb = batched ? a.size(0) : 1;
  const auto adt = onednn::DataType(a.dtype(), op), odt = onednn::DataType(out_dtype, op);
  dnnl::memory::desc a_md = OperandDesc(&a, adt);
  dnnl::memory::dims wd(w.shape().begin(), w.shape().end());
  // The weight as bound: `weight_source` (its dtype, maybe not the input's) when packing.
  dnnl::memory::dims unused;
  const bool packing = pack >= 0 && !batched && MatrixStrides(weight_source, &unused);
  if (!packing && w.dtype() != a.dtype()) w = Cast(w, a.dtype());
  Tensor wsrc = packing ? weight_source : w;
  const dnnl::memory::desc w_user = OperandDesc(&wsrc, onednn::DataType(wsrc.dtype(), op));
  const dnnl::memory::dims od = batched ? dnnl::memory::dims{nb, m, n} : dnnl::memory::dims{m, n};
  auto o_md = onednn::PlainDesc(od, odt);
  Tensor bc, rc;
  dnnl::memory::desc bias_md, res_md;
  if (bias != nullptr) {
    bc = bias->contiguous();
    bias_md = onednn::PlainDesc(batched ? dnnl::memory::dims{1, 1, n} : dnnl::memory::dims{1, n},
                                onednn::DataType(bc.dtype(), op));
  }
  if (residual != nullptr) {
    rc = residual->contiguous();
    res_md = onednn::PlainDesc(od, onednn::DataType(rc.dtype(), op));
  }
  std::ostringstream key;
  key << "matmul_epilogue," << static_cast<int>(adt) << ShapeString(a.shape())
      << ShapeString(a.strides()) << ShapeString(wsrc.shape()) << ShapeString(wsrc.strides())
      << static_cast<int>(wsrc.dtype()) << (packing ? "packed," : ",") << static_cast<int>(odt)
      << ',' << (bias != nullptr ? static_cast<int>(bc.dtype()) : -1) << ','
      << (residual != nullptr ? static_cast<int>(rc.dtype()) : -1) << ',';
  for (Step s : steps) key << static_cast<int>(s) << ';';
  MatmulPrim mp;
  try {
    mp = onednn::CachedValue<MatmulPrim>(key.str(), [&] {
      dnnl::post_ops po;
      for (Step s : steps) {
        switch (s) {
          case Step::kRelu: break;  // after the primitive
          case Step::kGelu:
            po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
            break;
          case Step::kGeluTanh:
            po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
            break;
          case Step::kSilu: po.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f); break;
          case Step::kSigmoid:
            po.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
            break;
          case Step::kTanh: po.append_eltwise(1.f, dnnl::algorithm::eltwise_tanh, 0.f, 0.f); break;
          case Step::kAdd: po.append_binary(dnnl::algorithm::binary_add, res_md); break;
        }
      }
      dnnl::primitive_attr attr = onednn::Attr();
      attr.set_post_ops(po);
      dnnl::memory::desc w_md =
          packing ? dnnl::memory::desc(wd, adt, dnnl::memory::format_tag::any) : w_user;
      auto desc = bias != nullptr ? dnnl::matmul::desc(a_md, w_md, bias_md, o_md)
                                  : dnnl::matmul::desc(a_md, w_md, o_md);
      dnnl::matmul::primitive_desc pd(desc, attr, onednn::Engine());
      MatmulPrim made{dnnl::primitive(dnnl::matmul(pd)), pd.weights_desc()};
      onednn::CountCreated(made.prim);
      return made;
    });
  } catch (const dnnl::error& e) {
    if (onednn::IsUnimplemented(e)) return false;
    TB_THROW(RuntimeError) << op << ": oneDNN failed: " << e.what();
  }
  *out = Tensor::Empty(IntArrayRef(od.data(), od.size()), out_dtype);
  onednn::Guard(op, [&] {
    std::shared_ptr<const Packed> held;
    dnnl::memory wm;
    if (packing) {
      const std::string pk = key.str();
      {
        std::lock_guard<std::mutex> lock(PackMutex());
        auto it = Packs().find(pack);
        if (it != Packs().end() && it->second->data == wsrc.data() && it->second->key == pk) {
          held = it->second;
        }
      }
      if (held == nullptr) {
        auto p = std::make_shared<Packed>();
        p->data = wsrc.data();
        p->key = pk;
        p->mem = onednn::ToLayout(onednn::Wrap(w_user, wsrc.data()), mp.weights);
        if (p->mem.get_data_handle() == wsrc.data()) {
          // The layouts agree: keep a copy, never the caller's memory.
          dnnl::memory copy(mp.weights, onednn::Engine());
          std::memcpy(copy.get_data_handle(), wsrc.data(), mp.weights.get_size());
          p->mem = copy;
        }
        held = p;
        std::lock_guard<std::mutex> lock(PackMutex());
        Packs()[pack] = held;
      }
      wm = held->mem;
    } else {
      wm = onednn::Wrap(w_user, wsrc.data());
    }
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, onednn::Wrap(a_md, a.data())},
                                               {DNNL_ARG_WEIGHTS, wm},
                                               {DNNL_ARG_DST, onednn::Wrap(o_md, out->data())}};
    if (bias != nullptr) args[DNNL_ARG_BIAS] = onednn::Wrap(bias_md, bc.data());
    if (residual != nullptr) {
      // The post-op's index: relu, appended to none, can only come last.
      const int at =
          static_cast<int>(std::find(steps.begin(), steps.end(), Step::kAdd) - steps.begin());
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(at) | DNNL_ARG_SRC_1] = onednn::Wrap(res_md, rc.data());
    }
    onednn::Execute(mp.prim, std::move(args));
  });
  if (!steps.empty() && steps.back() == Step::kRelu) ReluInPlace(*out);
  return true;
}

Tensor MatmulEpilogue(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                      const std::optional<Tensor>& residual, bool weight_t,
                      const std::string& epilogue, const std::vector<int64_t>& shape, DType dtype,
                      int64_t pack) {
  const char* op = "tensorbridge::matmul_epilogue";
  const std::vector<Step> steps = ParseSteps(op, epilogue, residual.has_value());
  TB_CHECK(input.ndim() == 2 || input.ndim() == 3, ValueError)
      << op << ": expected a 2-D or 3-D input, got shape " << ShapeString(input.shape());
  TB_CHECK(weight.ndim() == input.ndim(), ValueError)
      << op << ": expected a " << input.ndim() << "-D weight, got shape "
      << ShapeString(weight.shape());
  Tensor w = weight_t ? weight.transpose(-2, -1) : weight;
  const int64_t nd = input.ndim();
  TB_CHECK(input.size(nd - 1) == w.size(nd - 2) && (nd == 2 || input.size(0) == w.size(0)),
           ValueError)
      << op << ": shapes " << ShapeString(input.shape()) << " and " << ShapeString(w.shape())
      << " cannot be multiplied";
  const int64_t n = w.size(nd - 1);
  Dims od = nd == 2 ? Dims{input.size(0), n} : Dims{input.size(0), input.size(1), n};
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  TB_CHECK(numel == input.size(nd - 2) * n * (nd == 3 ? input.size(0) : 1), ValueError)
      << op << ": the result of shape " << ShapeString(od) << " cannot be viewed as "
      << ShapeString(IntArrayRef(shape.data(), shape.size()));
  if (bias.has_value()) {
    TB_CHECK(bias->numel() == n && bias->size(-1) == n, ValueError)
        << op << ": expected a bias of " << n << " elements, got shape "
        << ShapeString(bias->shape());
  }
  if (residual.has_value()) {
    TB_CHECK(residual->numel() == numel, ValueError)
        << op << ": the residual of shape " << ShapeString(residual->shape())
        << " does not match the result's " << ShapeString(IntArrayRef(shape.data(), shape.size()));
  }
  const bool onednn = OneDnnType(input.dtype()) && OneDnnType(w.dtype()) && OneDnnType(dtype) &&
                      (!bias.has_value() || OneDnnType(bias->dtype())) &&
                      (!residual.has_value() || OneDnnType(residual->dtype())) && numel > 0 &&
                      input.size(nd - 1) > 0;
  // The steps on a fresh result as the ATen ops apply them (in place for float32), then
  // rounded into `dtype`.
  auto finish = [&](Tensor t) {
    t = t.contiguous();
    Tensor res = residual.has_value() ? residual->reshape(t.shape()) : Tensor();
    if (!StepsInPlace(steps, t, residual.has_value() ? &res : nullptr)) {
      t = ApplySteps(steps, t, residual.has_value() ? &*residual : nullptr);
    }
    if (t.dtype() != dtype) t = Cast(t, dtype);
    return t.reshape(IntArrayRef(shape.data(), shape.size()));
  };
  Tensor out;
  // float32 with few rows or a short inner dimension: the small-product kernels add the bias,
  // and the steps follow in float32.
  if (numel > 0 && (!bias.has_value() || bias->dtype() == DType::kFloat32) &&
      kernels::SmallGemm(input, w, bias.has_value() ? &*bias : nullptr, 1.0, 0.0, &out)) {
    return finish(out);
  }
  if (onednn) {
    Tensor res = residual.has_value() ? residual->reshape(od.ref()) : Tensor();
    if (OneDnnMatmul(op, input, w, bias.has_value() ? &*bias : nullptr,
                     residual.has_value() ? &res : nullptr, steps, dtype, pack,
                     weight_t ? weight.transpose(-2, -1) : weight, &out)) {
      return out.view(IntArrayRef(shape.data(), shape.size()));
    }
  }
  // The ATen ops one after the other, rounding between them as the unfused graph does.
  static const OpRef mm("aten::mm"), bmm("aten::bmm"), add("aten::add.Tensor");
  if (w.dtype() != input.dtype()) w = Cast(w, input.dtype());
  out = (nd == 2 ? mm : bmm)(input, w).tensor();
  if (bias.has_value()) out = add(out, *bias).tensor();
  return finish(out);
}

// The "hardtanh:lo:hi" step a convolution's epilogue may end with (ReLU6 is hardtanh:0:6),
// taken off `epilogue`; false when there is none.
bool TakeClamp(const char* op, std::string* epilogue, double* lo, double* hi) {
  const size_t at = epilogue->rfind("hardtanh:");
  if (at == std::string::npos) return false;
  TB_CHECK(at == 0 || (*epilogue)[at - 1] == ',', ValueError)
      << op << ": malformed epilogue '" << *epilogue << "'";
  std::stringstream ss(epilogue->substr(at + 9));
  char colon = 0;
  std::string rest;
  TB_CHECK((ss >> *lo >> colon >> *hi) && colon == ':' && !(ss >> rest) && *lo <= *hi, ValueError)
      << op << ": the epilogue step '" << epilogue->substr(at)
      << "' is not hardtanh:<min>:<max> (min <= max), the last step";
  epilogue->resize(at == 0 ? 0 : at - 1);
  return true;
}

// t = t * scale[c] + shift[c] per channel c (dim 1), in place: batch norm in inference with the
// statistics folded as torch folds them (scale = weight / sqrt(var + eps), shift = bias - mean
// * scale, in double, applied in float), then clamped to [lo, hi] when `clamp` (each row while
// it is in cache). float32 or bfloat16 (computed in float and rounded once: the clamp's bounds
// commute with the rounding, so this equals batch norm then hardtanh in bfloat16), contiguous.
void BatchNormInPlace(const char* op, const Tensor& t, const std::optional<Tensor>& weight,
                      const std::optional<Tensor>& bias, const Tensor& mean, const Tensor& var,
                      double eps, bool clamp, double lo, double hi) {
  const int64_t n = t.size(0), c = t.size(1), inner = t.numel() / std::max<int64_t>(1, n * c);
  namespace norm = kernels::norm;
  namespace simd = kernels::simd;
  norm::Vec invstd = norm::Doubles(op, "running_var", var, c, 0.0);
  for (double& v : invstd) v = 1.0 / std::sqrt(v + eps);
  std::vector<float> scale, shift;
  norm::FoldScaleShift(norm::Doubles(op, "running_mean", mean, c, 0.0), invstd,
                       norm::Doubles(op, "weight", weight, c, 1.0),
                       norm::Doubles(op, "bias", bias, c, 0.0), &scale, &shift);
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  const bool f32 = t.dtype() == DType::kFloat32;
  kernels::ParallelFor(n * c, t.numel() > kernels::kGrain, [&](int64_t plane) {
    auto row_op = [&](float* row, int64_t len) {
      simd::ScaleShiftRow(row, row, len, scale[plane % c], shift[plane % c]);
      if (clamp) simd::ClampRow(row, row, len, flo, fhi);
    };
    if (f32) {
      row_op(static_cast<float*>(t.mutable_data()) + plane * inner, inner);
    } else {
      uint16_t* row = static_cast<uint16_t*>(t.mutable_data()) + plane * inner;
      simd::Bf16Chunks(row, row, inner, row_op);
    }
  });
}

Tensor ConvolutionEpilogue(const Tensor& input, const Tensor& weight,
                           const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& padding,
                           const std::vector<int64_t>& dilation, bool transposed,
                           const std::vector<int64_t>& output_padding, int64_t groups,
                           const std::optional<Tensor>& residual, const std::string& epilogue,
                           const std::vector<int64_t>& extra_padding,
                           const std::optional<Tensor>& bn_weight,
                           const std::optional<Tensor>& bn_bias,
                           const std::optional<Tensor>& bn_mean,
                           const std::optional<Tensor>& bn_var, double bn_eps) {
  const char* op = "tensorbridge::convolution_epilogue";
  std::string text = epilogue;
  double lo = 0, hi = 0;
  const bool clamp = TakeClamp(op, &text, &lo, &hi);
  const std::vector<Step> steps = ParseSteps(op, text, residual.has_value());
  TB_CHECK(!clamp || steps.empty() || steps.back() != Step::kRelu, ValueError)
      << op << ": relu may only be the last step of the epilogue '" << epilogue << "'";
  TB_CHECK(bn_mean.has_value() == bn_var.has_value(), ValueError)
      << op << ": batch norm needs both running_mean and running_var";
  Tensor out = kernels::Convolution(op, input, weight, bias, stride, padding, dilation, transposed,
                                    output_padding, groups, extra_padding);
  if (residual.has_value()) {
    TB_CHECK(residual->shape() == out.shape(), ValueError)
        << op << ": the residual of shape " << ShapeString(residual->shape())
        << " does not match the convolution's result " << ShapeString(out.shape());
  }
  out = out.contiguous();
  const bool fast_bn = OneDnnType(out.dtype());  // float32 or bfloat16
  // The clamp (or a lone relu) runs inside the batch norm's pass when nothing is between.
  const bool relu_only = steps.size() == 1 && steps[0] == Step::kRelu;
  const bool in_bn = fast_bn && bn_mean.has_value() && (relu_only || (clamp && steps.empty()));
  if (bn_mean.has_value()) {
    if (fast_bn) {
      BatchNormInPlace(op, out, bn_weight, bn_bias, *bn_mean, *bn_var, bn_eps, in_bn,
                       clamp ? lo : 0.0, clamp ? hi : std::numeric_limits<double>::infinity());
      if (in_bn) return out;
    } else {
      static const OpRef bn("aten::_native_batch_norm_legit_no_training");
      out = bn(out, bn_weight, bn_bias, *bn_mean, *bn_var, 0.1, bn_eps).tensor(0).contiguous();
    }
  }
  if (steps.size() == 1 && steps[0] == Step::kRelu && OneDnnType(out.dtype())) {
    ReluInPlace(out);
  } else {
    out = ApplySteps(steps, out, residual.has_value() ? &*residual : nullptr);
  }
  if (clamp) {
    static const OpRef hardtanh("aten::hardtanh_");
    hardtanh(out, lo, hi);
  }
  return out;
}

int64_t DropPacked(const std::vector<int64_t>& packs) {
  std::lock_guard<std::mutex> lock(PackMutex());
  int64_t dropped = 0;
  for (int64_t p : packs) dropped += static_cast<int64_t>(Packs().erase(p));
  return dropped;
}

}  // namespace

TB_REGISTER_KERNELS(epilogue) {
  OpTable& t = OpTable::Global();
  t.Define(
      "tensorbridge::matmul_epilogue(Tensor input, Tensor weight, Tensor? bias, Tensor? residual, "
      "bool weight_t, str epilogue, int[] shape, ScalarType dtype, int pack) -> Tensor");
  t.Define(
      "tensorbridge::convolution_epilogue(Tensor input, Tensor weight, Tensor? bias, SymInt[] "
      "stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, "
      "SymInt groups, Tensor? residual, str epilogue, int[] extra_padding=[], Tensor? "
      "bn_weight=None, Tensor? bn_bias=None, Tensor? bn_mean=None, Tensor? bn_var=None, float "
      "bn_eps=0.) -> Tensor");
  t.Define("tensorbridge::drop_packed(int[] packs) -> int");
  table.RegisterKernel("tensorbridge::matmul_epilogue", DeviceType::kCPU, Boxed<&MatmulEpilogue>(),
                       TB_HERE);
  table.RegisterKernel("tensorbridge::convolution_epilogue", DeviceType::kCPU,
                       Boxed<&ConvolutionEpilogue>(), TB_HERE);
  table.RegisterKernel("tensorbridge::drop_packed", DeviceType::kCPU, Boxed<&DropPacked>(),
                       TB_HERE);
}

}  // namespace tb
