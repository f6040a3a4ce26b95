// aten::linear above autograd for tensorbridge.Tensors (a kernel on the PythonTLSSnapshot key).
//
// aten::linear is CompositeImplicitAutograd: torch decomposes it above autograd into t,
// view / reshape, mm / addmm and _unsafe_view, each of which reaches the Python-key kernels and
// makes a result wrapper (four wrappers, four trips through the dispatcher per nn.Linear), and
// in training records TBackward, ViewBackward, AddmmBackward (or MmBackward) and
// UnsafeViewBackward, whose backward is as many ops again. This kernel runs the same table ops
// in C++ on the same operands (addmm / mm on the input's rows), with one wrapper for the result.
// Where gradients are to be recorded it records one node of its own, LinearBackward, whose
// backward makes each gradient with one table call: grad_input = grad @ weight,
// grad_weight = grad^T @ input (the input's rows), grad_bias = grad summed over the rows.
//
// The node saves what torch's decomposition saves (the input where the weight wants a gradient,
// the weight where the input wants one) as SavedVariables: torch's version-counter check (a
// saved tensor modified in place raises in backward), saved-tensor hooks, retain_graph and the
// "backward through the graph a second time" error are torch's own. Gradients are handed to the
// engine like any node's (AccumulateGrad, its hooks and DDP's, tensor hooks,
// torch.autograd.grad). With create_graph (grad mode on in backward), or operands the table
// does not take, the backward computes with torch ops (matmul, mm, sum), which autograd records
// for higher-order gradients. Compiled autograd (torch._dynamo.compiled_autograd) traces the
// node as torch's own nodes are traced: compiled_args hands it the saved tensors, and
// apply_with_saved puts a call of a functional backward (the same three formulas in torch ops:
// mm, sum) into the graph it captures, which its compiler then traces into aten ops.
//
// Every other call takes torch's fallback, i.e. the decomposition: a key other than the plain
// CPU ones (autocast, functorch, the Python dispatcher), a TorchDispatchMode, a torch_dispatch
// rule, a forward-mode tangent, operands the Python-key kernels decline, a case at::linear does
// not send to addmm / mm on folded rows, gradients wanted for other than floating operands of
// one dtype or for a bias that is not 1-D, and table errors (the decomposition raises them).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "dispatch/op_table.h"
#include "python_key.h"

namespace tb_pykey {
namespace {

std::atomic<int64_t> g_linear_calls{0};     // calls the kernel served
std::atomic<int64_t> g_linear_recorded{0};  // of those, calls that recorded LinearBackward
std::atomic<bool> g_record{true};           // gradients to record: LinearBackward (else decomposed)

// The table ops the kernel and its backward run.
struct LinearIds {
  tb::OpId mm = 0;
  tb::OpId addmm = 0;
  tb::OpId sum = 0;  // aten::sum.dim_IntList
};

tb::Tensor CallOne(tb::OpId id, tb::Stack& s) {
  tb::OpTable::Global().Call(id, s);
  return s.at(0).to_tensor();
}

tb::Tensor Mm(const LinearIds& ids, const tb::Tensor& a, const tb::Tensor& b) {
  tb::Stack s;
  s.reserve(2);
  s.emplace_back(a);
  s.emplace_back(b);
  return CallOne(ids.mm, s);
}

// `t` with its leading dims folded into one: a 2-D [rows, t's last size].
tb::Tensor Rows(const tb::Tensor& t) {
  return t.ndim() == 2 ? t : t.reshape({-1, t.shape()[t.ndim() - 1]});
}

// `rows` ([M, n]) as `like`'s leading dims with a last dim of n.
tb::Tensor Unfold(const tb::Tensor& rows, const tb::Tensor& like) {
  if (like.ndim() == 2) return rows;
  tb::Dims shape(like.shape());
  shape[like.ndim() - 1] = rows.shape()[1];
  return rows.view(shape);
}

// input @ weight^T (+ bias) as at::linear computes it for the cases the kernel takes.
tb::Tensor Forward(const LinearIds& ids, const tb::Tensor& x, const tb::Tensor& w,
                   const tb::Tensor& b) {
  const tb::Tensor wt = w.transpose(0, 1);
  const tb::Tensor rows = Rows(x);
  if (!b.defined()) return Unfold(Mm(ids, rows, wt), x);
  tb::Stack s;
  s.reserve(5);
  s.emplace_back(b);
  s.emplace_back(rows);
  s.emplace_back(wt);
  s.emplace_back(int64_t{1});
  s.emplace_back(int64_t{1});
  return Unfold(CallOne(ids.addmm, s), x);
}

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

// The gradients in torch ops, which autograd records (create_graph) and compiled autograd
// traces. `x` and `w` are the saved input and weight (undefined where not saved).
variable_list TorchGradients(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w,
                             bool want_x, bool want_w, bool want_b) {
  variable_list out(3);
  const at::Tensor rows = g.reshape({-1, g.size(-1)});
  if (want_x) out[0] = at::matmul(g, w);
  if (want_w) out[1] = rows.t().mm(x.reshape({-1, x.size(-1)}));
  if (want_b) out[2] = rows.sum(0);
  return out;
}

// LinearBackward as compiled autograd calls it: grads = {grad}; args = {want_x, want_w, want_b,
// then the input where want_w, then the weight where want_x}.
variable_list FunctionalBackward(const variable_list& grads, const std::vector<c10::IValue>& args) {
  const bool want_x = args.at(0).toBool();
  const bool want_w = args.at(1).toBool();
  const bool want_b = args.at(2).toBool();
  size_t next = 3;
  const at::Tensor x = want_w ? args.at(next++).toTensor() : at::Tensor();
  const at::Tensor w = want_x ? args.at(next++).toTensor() : at::Tensor();
  if (!grads.at(0).defined()) return variable_list(3);
  return TorchGradients(grads[0], x, w, want_x, want_w, want_b);
}

// The name under which compiled autograd's namespace of functional backwards (one per process)
// holds FunctionalBackward for arguments of this schema, bound on first use. The schemas differ
// only in how many tensors follow the three flags.
std::string FunctionalName(PyObject* compiler, const std::vector<at::TypePtr>& schema) {
  static std::mutex mutex;
  static std::set<size_t> bound;
  std::string name = "tensorbridge_LinearBackward" + std::to_string(schema.size());
  std::lock_guard<std::mutex> lock(mutex);
  if (bound.count(schema.size()) == 0) {
    torch::dynamo::autograd::getPyCompilerInterface()->bind_function(
        compiler, name, FunctionalBackward, schema, /*is_custom_function=*/false,
        /*is_traceable=*/true);
    bound.insert(schema.size());
  }
  return name;
}

// The backward of one aten::linear call; its inputs are (input, weight, bias).
class LinearBackward final : public torch::autograd::Node {
 public:
  LinearBackward(const LinearIds& ids, bool has_bias) : ids_(ids), has_bias_(has_bias) {}

  std::string name() const override { return "tensorbridge::LinearBackward"; }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    input_.reset_data();
    weight_.reset_data();
  }

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const at::Tensor x = input_.unpack();
    const at::Tensor w = weight_.unpack();
    variable_list out(3);
    const at::Tensor& g = grads[0];
    if (!g.defined()) return out;
    // The input's gradient needs the weight (saved where the input wanted a gradient), the
    // weight's the input.
    const bool want_x = w.defined() && task_should_compute_output(0);
    const bool want_w = x.defined() && task_should_compute_output(1);
    const bool want_b = has_bias_ && task_should_compute_output(2);
    if (!c10::GradMode::is_enabled() && OnTable(g, x, w, want_x, want_w, want_b, &out)) {
      return out;
    }
    // Differentiable torch ops: create_graph, or operands the table path declines.
    return TorchGradients(g, x, w, want_x, want_w, want_b);
  }

  // Compiled autograd: what the node's backward depends on (its cache key and graph inputs).
  void compiled_args(torch::dynamo::autograd::CompiledNodeArgs& args) const override {
    args.collect(input_, /*is_output=*/false);
    args.collect(weight_, /*is_output=*/false);
    args.collect(has_bias_);
  }

  // Compiled autograd: the backward as a call of FunctionalBackward in the graph it captures,
  // on the saved tensors' proxies.
  variable_list apply_with_saved(const variable_list& grads,
                                 torch::dynamo::autograd::SwapSavedVariables& saved) override {
    saved.before(input_);
    saved.before(weight_);
    const at::Tensor x = input_.unpack();
    const at::Tensor w = weight_.unpack();
    const bool want_x = w.defined() && task_should_compute_output(0);
    const bool want_w = x.defined() && task_should_compute_output(1);
    const bool want_b = has_bias_ && task_should_compute_output(2);
    std::vector<c10::IValue> args{want_x, want_w, want_b};
    if (want_w) args.emplace_back(x);
    if (want_x) args.emplace_back(w);
    std::vector<at::TypePtr> schema;
    schema.reserve(args.size());
    for (const c10::IValue& arg : args) {
      schema.push_back(arg.isTensor() ? at::TensorType::get() : arg.type());
    }
    const auto& py = torch::dynamo::autograd::getPyCompilerInterface();
    // Bound once per process (the compiler's namespace of functional backwards is global);
    // its argument types depend on which gradients are wanted, so one name per combination.
    const std::string fn_name = FunctionalName(saved.get_py_compiler(), schema);
    using Metadata = std::vector<std::optional<torch::autograd::InputMetadata>>;
    const c10::IValue output_metadata = torch::dynamo::autograd::IValuePacker<Metadata>::pack(
        torch::dynamo::autograd::get_input_metadata(next_edges()));
    variable_list out = py->call_function(saved.get_py_compiler(), "apply_functional", fn_name,
                                          grads, args, output_metadata);
    saved.after(input_);
    saved.after(weight_);
    return out;
  }

  // Saves what the gradients need: the input for the weight's, the weight for the input's.
  void Save(const at::Tensor& input, const at::Tensor& weight) {
    if (weight.requires_grad()) input_ = SavedVariable(input, /*is_output=*/false);
    if (input.requires_grad()) weight_ = SavedVariable(weight, /*is_output=*/false);
  }

 private:
  // The gradients with one table call each, without the GIL; false where an operand is not one
  // the table takes or the table fails (the caller computes them with torch ops).
  bool OnTable(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, bool want_x,
               bool want_w, bool want_b, variable_list* out) const {
    bool any_ours = false;
    tb::Tensor tg, tx, tw;
    try {
      tg = Convert(g, &any_ours);
      if (want_w) tx = Convert(x, &any_ours);
      if (want_x) tw = Convert(w, &any_ours);
    } catch (const Decline&) {
      return false;
    } catch (const c10::Error&) {
      return false;
    }
    tb::Tensor gx, gw, gb;
    {
      GilRelease release;
      try {
        const tb::Tensor rows = Rows(tg);
        if (want_x) gx = Unfold(Mm(ids_, rows, tw), tg);
        if (want_w) gw = Mm(ids_, rows.transpose(0, 1), Rows(tx));
        if (want_b) {
          tb::Stack s;
          s.reserve(4);
          s.emplace_back(rows);
          s.emplace_back(std::vector<int64_t>{0});
          s.emplace_back(false);
          s.emplace_back(tb::Value());
          gb = CallOne(ids_.sum, s);
        }
      } catch (const std::exception&) {
        return false;
      }
    }
    GilAcquire gil;
    if (want_x) (*out)[0] = MakeResult(gx);
    if (want_w) (*out)[1] = MakeResult(gw);
    if (want_b) (*out)[2] = MakeResult(gb);
    return true;
  }

  const LinearIds ids_;
  const bool has_bias_;
  SavedVariable input_;
  SavedVariable weight_;
};

// Whether LinearBackward may record gradients for these operands: floating tensors of one
// dtype and a 1-D bias of the output's width (the decomposition's broadcasting and dtype errors
// stay its own).
bool Recordable(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const c10::ScalarType dtype = input.scalar_type();
  if (!at::isFloatingType(dtype) || weight.scalar_type() != dtype) return false;
  return !bias.defined() ||
         (bias.scalar_type() == dtype && bias.dim() == 1 && bias.size(0) == weight.size(0));
}

class LinearOp final : public c10::OperatorKernel {
 public:
  explicit LinearOp(const LinearIds& ids) : ids_(ids) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    if (!Fast(keys, stack)) SnapshotFallback(op, keys, stack);
  }

 private:
  bool Fast(c10::DispatchKeySet keys, torch::jit::Stack* stack) const {
    if (!kAboveAutogradKeys.isSupersetOf(keys) || g_rules.load(std::memory_order_relaxed) > 0 ||
        g_paused.load(std::memory_order_relaxed) ||
        c10::impl::TorchDispatchModeTLS::stack_len() > 0) {
      return false;
    }
    const size_t first = stack->size() - 3;
    const at::Tensor& input = (*stack)[first].toTensor();
    const at::Tensor& weight = (*stack)[first + 1].toTensor();
    const c10::IValue& bias_v = (*stack)[first + 2];
    const at::Tensor bias = bias_v.isNone() ? at::Tensor() : bias_v.toTensor();
    if (!NoTangent(input) || !NoTangent(weight) || !NoTangent(bias)) return false;
    const bool record = torch::autograd::compute_requires_grad(input, weight, bias);
    if (record && !g_record.load(std::memory_order_relaxed)) return false;
    bool any_ours = false;
    tb::Tensor x, w, b;
    try {
      x = Convert(input, &any_ours);
      w = Convert(weight, &any_ours);
      if (bias.defined()) b = Convert(bias, &any_ours);
    } catch (const Decline&) {
      return false;
    } catch (const c10::Error&) {
      return false;
    }
    const int64_t nd = x.ndim();
    // at::linear's cases: a 2-D input (addmm with a bias), a contiguous 3-D input with a bias
    // (addmm on the flattened rows), else matmul's fold of the leading dims (mm) and the bias
    // added after (left to the decomposition).
    if (!any_ours || w.ndim() != 2 || nd < 2 ||
        (b.defined() && !(nd == 2 || (nd == 3 && x.is_contiguous())))) {
      return false;
    }
    if (record && !Recordable(input, weight, bias)) return false;
    tb::Tensor out;
    {
      GilRelease release;
      try {
        out = Forward(ids_, x, w, b);
      } catch (const std::exception&) {
        return false;  // the decomposition raises it, as before
      }
    }
    at::Tensor result;
    {
      GilAcquire gil;
      result = MakeResult(out);
    }
    if (record) {
      auto node = c10::make_intrusive<LinearBackward>(ids_, bias.defined());
      node->set_next_edges(torch::autograd::collect_next_edges(input, weight, bias));
      node->Save(input, weight);
      torch::autograd::set_history(result, node);
      g_linear_recorded.fetch_add(1, std::memory_order_relaxed);
    }
    torch::jit::drop(*stack, 3);
    stack->push_back(std::move(result));
    g_linear_calls.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  const LinearIds ids_;
};

}  // namespace

void RegisterLinear(torch::Library* above) {
  tb::OpTable& table = tb::OpTable::Global();
  auto mm = table.Find("aten::mm");
  auto addmm = table.Find("aten::addmm");
  auto sum = table.Find("aten::sum.dim_IntList");
  if (!mm || !addmm || !sum) return;
  for (tb::OpId id : {*mm, *addmm, *sum}) {
    if (table.Resolve(id, tb::DeviceType::kCPU).served_by != tb::ServedBy::kKernel) return;
  }
  const LinearIds ids{*mm, *addmm, *sum};
  above->impl("linear", torch::CppFunction::makeFromBoxedFunctor(std::make_unique<LinearOp>(ids)));
}

int64_t LinearCalls() { return g_linear_calls.load(std::memory_order_relaxed); }

int64_t LinearRecorded() { return g_linear_recorded.load(std::memory_order_relaxed); }

}  // namespace tb_pykey

// How many of the aten::linear calls served recorded their own backward node (tests).
extern "C" __attribute__((visibility("default"))) int64_t tb_python_key_linear_recorded() {
  return tb_pykey::LinearRecorded();
}

// Whether calls with gradients to record take the kernel with its own backward node (on != 0,
// the default) or torch's decomposition (on == 0: programs that compile their backward with
// compiled autograd).
extern "C" __attribute__((visibility("default"))) void tb_python_key_linear_record(int on) {
  tb_pykey::g_record.store(on != 0, std::memory_order_relaxed);
}
