// Connectionist temporal classification: aten::_ctc_loss and aten::_ctc_loss_backward (lengths
// as int lists or as tensors), the alpha / beta recursions of Graves et al. (2006) in log space
// as torch's CPU kernel runs them.
//
// log_probs is [T, N, C]; targets are [N, S] (padded) or 1-d (the targets of every sample
// concatenated). _ctc_loss returns the negative log likelihood per sample and log_alpha
// [N, T, 2 * max_target_length + 1] (entries the recursion does not reach are -inf). The
// backward takes the gradient of the per-sample losses; with zero_infinity a sample whose loss
// is infinite gets a zero gradient. Steps run in the input's type (float32 or float64).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

constexpr const char* kOp = "aten::_ctc_loss";

// Checked shapes and the targets of each sample.
struct Problem {
  int64_t t_max, batch, classes, max_len = 0;
  std::vector<int64_t> input_lengths, target_lengths;
  std::vector<std::vector<int64_t>> targets;  // per sample
  Tensor log_probs;                           // contiguous [T, N, C]
};

Problem Prepare(const Tensor& log_probs, const Tensor& targets,
                const std::vector<int64_t>& input_lengths,
                const std::vector<int64_t>& target_lengths, int64_t blank, const char* op) {
  TB_CHECK_SUPPORTED(log_probs.device().is_host_accessible() &&
                     targets.device().is_host_accessible())
      << op << ": tensors on " << DeviceString(log_probs.device())
      << " are not supported; tensorbridge computes on the CPU";
  TB_CHECK(log_probs.dtype() == DType::kFloat32 || log_probs.dtype() == DType::kFloat64, TypeError)
      << op << ": expected float32 or float64 log_probs, got " << DTypeName(log_probs.dtype());
  TB_CHECK(IsIntegral(targets.dtype(), false), TypeError)
      << op << ": expected integer targets, got " << DTypeName(targets.dtype());
  TB_CHECK(log_probs.ndim() == 3, ValueError)
      << op << ": expected log_probs of shape [T, N, C], got " << ShapeString(log_probs.shape());
  Problem p;
  p.t_max = log_probs.size(0);
  p.batch = log_probs.size(1);
  p.classes = log_probs.size(2);
  TB_CHECK(blank >= 0 && blank < p.classes, IndexError)
      << op << ": blank must be in label range [0, " << p.classes << "), got " << blank;
  TB_CHECK(static_cast<int64_t>(input_lengths.size()) == p.batch &&
               static_cast<int64_t>(target_lengths.size()) == p.batch,
           ValueError)
      << op << ": input_lengths and target_lengths must have batch_size (" << p.batch
      << ") elements, got " << input_lengths.size() << " and " << target_lengths.size();
  p.input_lengths = input_lengths;
  p.target_lengths = target_lengths;
  Tensor tg = Cast(targets, DType::kInt64).contiguous();
  const int64_t* tp = tg.data_as<const int64_t>();
  int64_t offset = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t il = input_lengths[b], tl = target_lengths[b];
    TB_CHECK(il >= 0 && il <= p.t_max, ValueError)
        << op << ": expected input_lengths to have value at most " << p.t_max << ", but got value "
        << il << " (while checking arguments for ctc_loss_cpu)";
    TB_CHECK(tl >= 0, ValueError) << op << ": target lengths must be non-negative, got " << tl;
    std::vector<int64_t> seq;
    if (targets.ndim() == 1) {
      TB_CHECK(offset + tl <= tg.numel(), ValueError)
          << op << ": target_lengths sum past the " << tg.numel() << " targets";
      seq.assign(tp + offset, tp + offset + tl);
      offset += tl;
    } else {
      TB_CHECK(targets.ndim() == 2 && targets.size(0) == p.batch && tl <= targets.size(1),
               ValueError)
          << op << ": expected tensor to have size at least " << tl << " at dimension 1, but got "
          << "targets of shape " << ShapeString(targets.shape());
      seq.assign(tp + b * targets.size(1), tp + b * targets.size(1) + tl);
    }
    for (int64_t c : seq) {
      TB_CHECK(c >= 0 && c < p.classes, IndexError)
          << op << ": target " << c << " is out of range for " << p.classes << " classes";
    }
    p.max_len = std::max(p.max_len, tl);
    p.targets.push_back(std::move(seq));
  }
  p.log_probs = log_probs.contiguous();
  return p;
}

// log(exp(a - m) + exp(b - m) + exp(c - m)) + m with m the largest (0 when all are -inf).
template <typename T>
T LogSum3(T a, T b, T c) {
  T m = std::max(a, std::max(b, c));
  if (m == -std::numeric_limits<T>::infinity()) m = 0;
  return std::log(std::exp(a - m) + std::exp(b - m) + std::exp(c - m)) + m;
}

std::tuple<Tensor, Tensor> CtcLoss(const Tensor& log_probs, const Tensor& targets,
                                   const std::vector<int64_t>& input_lengths,
                                   const std::vector<int64_t>& target_lengths, int64_t blank,
                                   bool /*zero_infinity*/) {
  Problem p = Prepare(log_probs, targets, input_lengths, target_lengths, blank, kOp);
  const int64_t width = 2 * p.max_len + 1;
  Tensor nll = Tensor::Empty({p.batch}, log_probs.dtype());
  Tensor alpha = Tensor::Empty({p.batch, p.t_max, width}, log_probs.dtype());
  TB_DISPATCH(log_probs.dtype(), kOp, TB_TYPES_F32_F64, [&] {
    using T = scalar_t;
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const T* lp = p.log_probs.data_as<const T>();
    T* la_all = alpha.data_as<T>();
    std::fill(la_all, la_all + alpha.numel(), kNegInf);
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t il = p.input_lengths[b], tl = p.target_lengths[b];
      const std::vector<int64_t>& tg = p.targets[b];
      auto prime = [&](int64_t s) { return s % 2 == 0 ? blank : tg[s / 2]; };
      auto lpv = [&](int64_t t, int64_t c) { return lp[(t * p.batch + b) * p.classes + c]; };
      T* la = la_all + b * p.t_max * width;
      if (il > 0) {
        la[0] = lpv(0, blank);
        if (tl > 0) la[1] = lpv(0, prime(1));
      }
      for (int64_t t = 1; t < il; ++t) {
        for (int64_t s = 0; s < 2 * tl + 1; ++s) {
          const int64_t cur = prime(s);
          const T la1 = la[(t - 1) * width + s];
          const T la2 = s > 0 ? la[(t - 1) * width + s - 1] : kNegInf;
          const T la3 = (s > 1 && prime(s - 2) != cur) ? la[(t - 1) * width + s - 2] : kNegInf;
          la[t * width + s] = LogSum3(la1, la2, la3) + lpv(t, cur);
        }
      }
      T ll;
      if (il == 0) {
        ll = tl == 0 ? T(0) : kNegInf;
      } else if (tl == 0) {
        ll = la[(il - 1) * width];
      } else {
        ll = LogSum3(la[(il - 1) * width + 2 * tl], la[(il - 1) * width + 2 * tl - 1], kNegInf);
      }
      nll.data_as<T>()[b] = -ll;
    }
  });
  return {nll, alpha};
}

Tensor CtcLossBackward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                       const std::vector<int64_t>& input_lengths,
                       const std::vector<int64_t>& target_lengths, const Tensor& neg_log_likelihood,
                       const Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  constexpr const char* kBw = "aten::_ctc_loss_backward";
  Problem p = Prepare(log_probs, targets, input_lengths, target_lengths, blank, kBw);
  const int64_t width = 2 * p.max_len + 1;
  TB_CHECK(log_alpha.ndim() == 3 && log_alpha.size(0) == p.batch && log_alpha.size(2) >= width,
           ValueError)
      << kBw << ": log_alpha of shape " << ShapeString(log_alpha.shape())
      << " does not match the problem";
  TB_CHECK(grad.numel() == p.batch && neg_log_likelihood.numel() == p.batch, ValueError)
      << kBw << ": grad and neg_log_likelihood must have batch_size (" << p.batch << ") elements";
  Tensor la_t = Cast(log_alpha, log_probs.dtype()).contiguous();
  Tensor g = Cast(grad, log_probs.dtype()).contiguous();
  Tensor nll_t = Cast(neg_log_likelihood, log_probs.dtype()).contiguous();
  Tensor out = Tensor::Empty(log_probs.shape(), log_probs.dtype());
  const int64_t aw = log_alpha.size(2), at = log_alpha.size(1);
  TB_DISPATCH(log_probs.dtype(), kBw, TB_TYPES_F32_F64, [&] {
    using T = scalar_t;
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const T* lp = p.log_probs.data_as<const T>();
    const T* la_all = la_t.data_as<const T>();
    T* gr = out.data_as<T>();
    std::vector<T> lb(static_cast<size_t>(p.t_max * width));
    std::vector<T> ga(static_cast<size_t>(p.t_max * p.classes));
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t il = p.input_lengths[b], tl = p.target_lengths[b];
      const std::vector<int64_t>& tg = p.targets[b];
      const T nll = nll_t.data_as<const T>()[b];
      auto prime = [&](int64_t s) { return s % 2 == 0 ? blank : tg[s / 2]; };
      auto lpv = [&](int64_t t, int64_t c) { return lp[(t * p.batch + b) * p.classes + c]; };
      auto gref = [&](int64_t t, int64_t c) -> T& { return gr[(t * p.batch + b) * p.classes + c]; };
      const T* la = la_all + b * at * aw;
      auto lav = [&](int64_t t, int64_t s) { return la[t * aw + s]; };
      if (zero_infinity && nll == std::numeric_limits<T>::infinity()) {
        for (int64_t t = 0; t < p.t_max; ++t) {
          for (int64_t c = 0; c < p.classes; ++c) gref(t, c) = T(0);
        }
        continue;
      }
      std::fill(lb.begin(), lb.end(), kNegInf);
      std::fill(ga.begin(), ga.end(), kNegInf);
      if (il > 0) {
        lb[(il - 1) * width + 2 * tl] = lpv(il - 1, blank);
        ga[(il - 1) * p.classes + blank] = lav(il - 1, 2 * tl) + lb[(il - 1) * width + 2 * tl];
        if (tl > 0) {
          const int64_t cur = prime(2 * tl - 1);
          lb[(il - 1) * width + 2 * tl - 1] = lpv(il - 1, cur);
          ga[(il - 1) * p.classes + cur] =
              lav(il - 1, 2 * tl - 1) + lb[(il - 1) * width + 2 * tl - 1];
        }
      }
      for (int64_t t = il - 2; t >= 0; --t) {
        for (int64_t s = 2 * tl; s >= 0; --s) {
          const int64_t cur = prime(s);
          const T lb1 = lb[(t + 1) * width + s];
          const T lb2 = s < 2 * tl ? lb[(t + 1) * width + s + 1] : kNegInf;
          const T lb3 =
              (s < 2 * tl - 1 && prime(s + 2) != cur) ? lb[(t + 1) * width + s + 2] : kNegInf;
          lb[t * width + s] = LogSum3(lb1, lb2, lb3) + lpv(t, cur);
          const T lab = lav(t, s) + lb[t * width + s];
          T& acc = ga[t * p.classes + cur];
          if (acc == kNegInf) {
            acc = lab;
          } else {
            const T m = std::max(acc, lab);
            acc = std::log(std::exp(acc - m) + std::exp(lab - m)) + m;
          }
        }
      }
      const T go = g.data_as<const T>()[b];
      for (int64_t t = 0; t < p.t_max; ++t) {
        for (int64_t c = 0; c < p.classes; ++c) {
          if (t >= il) {
            gref(t, c) = T(0);
            continue;
          }
          const T l = lpv(t, c);
          gref(t, c) = (std::exp(l) - std::exp(ga[t * p.classes + c] + nll - l)) * go;
        }
      }
    }
  });
  return out;
}

std::vector<int64_t> Lengths(const Tensor& t, const char* what) {
  TB_CHECK_SUPPORTED(t.device().is_host_accessible())
      << kOp << ": tensors on " << DeviceString(t.device())
      << " are not supported; tensorbridge computes on the CPU";
  TB_CHECK(IsIntegral(t.dtype(), false) && t.ndim() <= 1, TypeError)
      << kOp << ": " << what << " must be a 1-d integer tensor, got " << DTypeName(t.dtype())
      << " of shape " << ShapeString(t.shape());
  Tensor c = Cast(t, DType::kInt64).contiguous();
  return std::vector<int64_t>(c.data_as<const int64_t>(), c.data_as<const int64_t>() + c.numel());
}

std::tuple<Tensor, Tensor> CtcLossTensor(const Tensor& log_probs, const Tensor& targets,
                                         const Tensor& input_lengths, const Tensor& target_lengths,
                                         int64_t blank, bool zero_infinity) {
  return CtcLoss(log_probs, targets, Lengths(input_lengths, "input_lengths"),
                 Lengths(target_lengths, "target_lengths"), blank, zero_infinity);
}

Tensor CtcLossBackwardTensor(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                             const Tensor& input_lengths, const Tensor& target_lengths,
                             const Tensor& neg_log_likelihood, const Tensor& log_alpha,
                             int64_t blank, bool zero_infinity) {
  return CtcLossBackward(grad, log_probs, targets, Lengths(input_lengths, "input_lengths"),
                         Lengths(target_lengths, "target_lengths"), neg_log_likelihood, log_alpha,
                         blank, zero_infinity);
}

}  // namespace

TB_REGISTER_KERNELS(loss_ctc) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_ctc_loss", cpu, Boxed<&CtcLoss>(), TB_HERE);
  table.RegisterKernel("aten::_ctc_loss.Tensor", cpu, Boxed<&CtcLossTensor>(), TB_HERE);
  table.RegisterKernel("aten::_ctc_loss_backward", cpu, Boxed<&CtcLossBackward>(), TB_HERE);
  table.RegisterKernel("aten::_ctc_loss_backward.Tensor", cpu, Boxed<&CtcLossBackwardTensor>(),
                       TB_HERE);
}

}  // namespace tb
