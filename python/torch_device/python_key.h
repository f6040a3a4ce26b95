// What the two sources of libtb_torch_python_key.so share: python_key.cc (the kernels on the
// Python and PythonTLSSnapshot keys, the wrappers' shallow copies, registration) and
// python_key_linear.cc (aten::linear above autograd, with its own backward node).
#pragma once

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/DispatchKeySet.h>
#include <torch/library.h>

#include <atomic>
#include <cstdint>

#include "bridge/error.h"
#include "bridge/tensor.h"

namespace tb_pykey {

struct Decline {};  // an argument the fast path does not take: the call goes to Python

// The keys of a plain dense CPU tensor (with autograd): anything else (conjugate or negative
// views, sparse, functorch or functionalization wrappers) takes the Python route.
constexpr c10::DispatchKeySet kPlainKeys = c10::DispatchKeySet(c10::DispatchKey::CPU) |
                                           c10::DispatchKeySet(c10::DispatchKey::AutogradCPU) |
                                           c10::DispatchKeySet(c10::DispatchKey::ADInplaceOrView) |
                                           c10::DispatchKeySet(c10::DispatchKey::AutocastCPU);

// A tensor with the Python key also carries PythonTLSSnapshot, the highest key: torch's
// fallback there redispatches to autograd (VariableType), ADInplaceOrView and the Python key.
// For an op that returns new tensors and writes no argument, where autograd has nothing to
// record (no gradient wanted, no forward-mode tangent), those layers only box and unbox the
// arguments, so a kernel on PythonTLSSnapshot may run the table itself. Calls that carry any
// other key (autocast, functorch, functionalization, the Python dispatcher) take torch's
// fallback.
constexpr c10::DispatchKeySet kAboveAutogradKeys =
    c10::DispatchKeySet(c10::DispatchKey::PythonTLSSnapshot) |
    c10::DispatchKeySet(c10::DispatchKey::Python) |
    kPlainKeys.remove(c10::DispatchKey::AutocastCPU);

// torch_dispatch rules registered for tensorbridge.Tensor (torch.library's
// register_torch_dispatch): while there are some, every call takes the Python route, which
// looks them up.
extern std::atomic<int64_t> g_rules;
// Every call takes the Python route while set (tensorbridge._tensor._python_route(), for
// benchmarks that time both routes in one process).
extern std::atomic<bool> g_paused;

// Releases the GIL for its scope where the calling thread holds it (torch's Python bindings
// release it before dispatching; other callers may not).
class GilRelease {
 public:
  GilRelease() : saved_(PyGILState_Check() != 0 ? PyEval_SaveThread() : nullptr) {}
  ~GilRelease() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* saved_;
};

// Holds the GIL for its scope.
class GilAcquire {
 public:
  GilAcquire() : state_(PyGILState_Ensure()) {}
  ~GilAcquire() { PyGILState_Release(state_); }
  GilAcquire(const GilAcquire&) = delete;
  GilAcquire& operator=(const GilAcquire&) = delete;

 private:
  PyGILState_STATE state_;
};

// A tensor argument as a table tensor: a tensorbridge.Tensor's Array (`*any_ours` set), or a
// zero-copy view of a plain dense CPU tensor; throws Decline for anything else.
tb::Tensor Convert(const at::Tensor& t, bool* any_ours);

// A new tensorbridge.Tensor over a table result, the GIL held: its TensorImpl (wrapper.h),
// its Python object of the class, and the object's Array. The object lives as long as the
// TensorImpl is referenced (torch's PyObject preservation).
at::Tensor MakeResult(const tb::Tensor& t);

// `t` (undefined, or a tensor) has no forward-mode tangent and is no other class's tensor with
// the Python key (those go below without a try at converting them).
bool NoTangent(const at::Tensor& t);

// Autograd records nothing for `t`: NoTangent, and no gradient wanted (grad mode off, or `t`
// does not require one).
bool NoAutograd(const at::Tensor& t);

// torch's PythonTLSSnapshot fallback (PythonFallbackKernel.cpp): the keys below, with the
// Python TLS snapshot taken where this is the outermost call.
void SnapshotFallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                      torch::jit::Stack* stack);

// What torch's own Python-key fallback does (the top TorchDispatchMode's __torch_dispatch__,
// else the subclasses', else the keys below), for a kernel on the Python key that declines.
void PythonFallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                    torch::jit::Stack* stack);

// The Array behind `t` where it is a tensorbridge.Tensor with data, else nullptr. Reads
// pointers only (no GIL needed): the caller holds `t`, whose Python object keeps its Array.
const tb::Tensor* OurArray(const at::Tensor& t);

// Whether no TorchDispatchMode is active, no torch_dispatch rule is registered for the class
// and the Python route is not forced: the conditions of every kernel of this library.
bool MayServe();

// python_key_c10d.cc: registers the in-place collectives' kernels on `c10d` (a Python-key
// library of the c10d namespace).
void RegisterCollectives(torch::Library* c10d);

// python_key_linear.cc: registers aten::linear's kernel on `above` (the PythonTLSSnapshot
// library) where the table serves mm and addmm with kernels; the calls it served (tests), and
// of those the calls that recorded their own backward node.
void RegisterLinear(torch::Library* above);
int64_t LinearCalls();
int64_t LinearRecorded();

}  // namespace tb_pykey
