// The in-place collectives c10d::allreduce_ and c10d::broadcast_ on tensorbridge.Tensors, on
// torch's Python key.
//
// Their first argument is the list of tensors they write, their returns that list and a Work
// handle. The Python route (tensorbridge/_distributed.py) runs torch's op on zero-copy torch
// views of the wrapped memory and hands back the very tensors it was given; DDP calls
// broadcast_ on the flattened buffers before every forward. This kernel does the same in C++:
// each tensorbridge.Tensor of the list becomes a plain CPU tensor over its memory (which holds
// the memory alive), the op's CPU kernel runs (gloo, ...; process group, reduce op and options
// pass through untouched), and the first return is the list given. Every other call takes
// torch's Python fallback, i.e. that route: a mode, a torch_dispatch rule, a tensor of another
// kind or with read-only memory (the route raises its BufferError), a tensor among the other
// arguments.
#include <ATen/ATen.h>

#include <utility>

#include "convert.h"
#include "python/src/storage_ref.h"
#include "python_key.h"

namespace tb_pykey {
namespace {

// A plain CPU tensor over `t`'s memory, holding a reference to its storage.
at::Tensor Alias(const tb::Tensor& t) {
  void* ref = tb::NewStorageRef(t);
  return at::from_blob(
      t.data(), c10::IntArrayRef(t.shape().data(), t.shape().size()),
      c10::IntArrayRef(t.strides().data(), t.strides().size()),
      [ref](void*) { tb::ReleaseStorageRef(ref); },
      at::TensorOptions().dtype(tb_torch::ToTorchDType(t.dtype())));
}

class CollectiveOp final : public c10::OperatorKernel {
 public:
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    if (!Fast(op, stack)) PythonFallback(op, keys, stack);
  }

 private:
  static bool Fast(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    if (!MayServe()) return false;
    const size_t n = op.schema().arguments().size();
    const size_t first = stack->size() - n;
    if (!(*stack)[first].isTensorList()) return false;
    for (size_t i = first + 1; i < stack->size(); ++i) {
      if ((*stack)[i].isTensor() || (*stack)[i].isTensorList()) return false;
    }
    c10::List<at::Tensor> given = (*stack)[first].toTensorList();
    c10::List<at::Tensor> views;
    views.reserve(given.size());
    bool any_ours = false;
    for (const at::Tensor& t : given) {
      const tb::Tensor* array = OurArray(t);
      if (array != nullptr) {
        if (array->read_only()) return false;
        views.push_back(Alias(*array));
        any_ours = true;
      } else if (kPlainKeys.isSupersetOf(t.key_set()) && t.has_storage() &&
                 t.layout() == c10::kStrided) {
        views.push_back(t);
      } else {
        return false;
      }
    }
    if (!any_ours) return false;
    (*stack)[first] = c10::IValue(std::move(views));
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    (*stack)[stack->size() - op.schema().returns().size()] = c10::IValue(std::move(given));
    return true;
  }
};

}  // namespace

void RegisterCollectives(torch::Library* c10d) {
  for (const char* name : {"allreduce_", "broadcast_"}) {
    auto handle = c10::Dispatcher::singleton().findOp({std::string("c10d::") + name, ""});
    if (!handle || handle->hasKernelForDispatchKey(c10::DispatchKey::Python)) continue;
    const auto& schema = handle->schema();
    if (schema.arguments().empty() || schema.returns().size() != 2) continue;
    c10d->impl(name, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<CollectiveOp>()));
  }
}

}  // namespace tb_pykey
