// XLA FFI handler "tensorbridge_plan": runs a registered Plan on XLA's buffers, no Python.
//
// tensorbridge.call_torch captures a torch function once per input signature into a Plan and
// registers it here under an integer id; inside jax.jit the function lowers to an XLA custom
// call of this handler with the id as its `plan_id` attribute. Each call wraps XLA's argument
// buffers as read-only Tensors (no copy), runs the plan in C++ and copies its outputs into
// XLA's result buffers. Plans are kept for the life of the process: a compiled executable may
// hold an id at any time.
//
// Compiled against the header-only XLA FFI API (third_party/xla_ffi, or TB_XLA_FFI_INCLUDE);
// jaxlib checks the API version the handler was compiled for when it is registered.
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "dispatch/plan.h"
#include "py_common.h"
#include "xla/ffi/api/ffi.h"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace tb::py {

namespace {

std::mutex g_registry_mutex;
std::vector<std::shared_ptr<const Plan>> g_plans;  // index = plan id
std::atomic<uint64_t> g_runs{0};
std::atomic<uint64_t> g_failures{0};
// OpenMP threads of one handler call (0: OpenMP's default). XLA runs the handler on its own
// worker threads, which already share the cores with XLA's thread pool.
std::atomic<int> g_threads{1};

std::shared_ptr<const Plan> FindPlan(int64_t id) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (id < 0 || id >= static_cast<int64_t>(g_plans.size())) return nullptr;
  return g_plans[static_cast<size_t>(id)];
}

namespace ffi = xla::ffi;

bool ToDType(ffi::DataType t, DType* out) {
  switch (t) {
    case ffi::DataType::PRED: *out = DType::kBool; return true;
    case ffi::DataType::S8: *out = DType::kInt8; return true;
    case ffi::DataType::S16: *out = DType::kInt16; return true;
    case ffi::DataType::S32: *out = DType::kInt32; return true;
    case ffi::DataType::S64: *out = DType::kInt64; return true;
    case ffi::DataType::U8: *out = DType::kUInt8; return true;
    case ffi::DataType::U16: *out = DType::kUInt16; return true;
    case ffi::DataType::U32: *out = DType::kUInt32; return true;
    case ffi::DataType::U64: *out = DType::kUInt64; return true;
    case ffi::DataType::F16: *out = DType::kFloat16; return true;
    case ffi::DataType::BF16: *out = DType::kBFloat16; return true;
    case ffi::DataType::F32: *out = DType::kFloat32; return true;
    case ffi::DataType::F64: *out = DType::kFloat64; return true;
    case ffi::DataType::C64: *out = DType::kComplex64; return true;
    case ffi::DataType::C128: *out = DType::kComplex128; return true;
    default: return false;
  }
}

// A Tensor over an XLA buffer, which XLA owns and keeps alive for the whole call.
Tensor WrapBuffer(const ffi::AnyBuffer& buf, bool read_only, const char* what, size_t index) {
  DType dtype;
  TB_CHECK(ToDType(buf.element_type(), &dtype), TypeError)
      << "tensorbridge_plan: " << what << " " << index << " has XLA element type "
      << static_cast<int>(buf.element_type()) << ", which tensorbridge has no dtype for";
  auto dims = buf.dimensions();
  Dims shape(IntArrayRef(dims.begin(), dims.size()));
  const int64_t numel = ShapeNumel(shape);
  const size_t nbytes = static_cast<size_t>(numel) * DTypeSize(dtype);
  auto storage = Storage::Wrap(buf.untyped_data(), nbytes, Device{}, nullptr, nullptr);
  return Tensor(std::move(storage), buf.untyped_data(), shape, ContiguousStrides(shape), dtype,
                Device{}, read_only);
}

// g_threads applied to the calling thread's OpenMP settings for one handler call, and the
// thread's own setting restored after it: XLA may run the handler on the caller's thread (the
// Python main thread), whose thread count torch reads (torch.get_num_threads) and dynamo
// guards on.
class ThreadsForCall {
 public:
  ThreadsForCall() {
#ifdef _OPENMP
    const int want = g_threads.load(std::memory_order_relaxed);
    saved_ = omp_get_max_threads();
    if (want > 0 && want != saved_) {
      omp_set_num_threads(want);
      changed_ = true;
    }
#endif
  }
  ~ThreadsForCall() {
#ifdef _OPENMP
    if (changed_) omp_set_num_threads(saved_);
#endif
  }
  ThreadsForCall(const ThreadsForCall&) = delete;
  ThreadsForCall& operator=(const ThreadsForCall&) = delete;

 private:
  int saved_ = 0;
  bool changed_ = false;
};

void RunPlan(int64_t plan_id, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  ThreadsForCall threads;
  std::shared_ptr<const Plan> plan = FindPlan(plan_id);
  TB_CHECK(plan != nullptr, ValueError) << "tensorbridge_plan: no plan with id " << plan_id;
  Stack inputs;
  inputs.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto buf = args.get<ffi::AnyBuffer>(i);
    TB_CHECK(buf.has_value(), TypeError)
        << "tensorbridge_plan: argument " << i << " is not a buffer";
    inputs.emplace_back(WrapBuffer(*buf, /*read_only=*/true, "argument", i));
  }
  Stack outputs = plan->Run(std::move(inputs));
  TB_CHECK(outputs.size() == rets.size(), ValueError)
      << "tensorbridge_plan: the plan returned " << outputs.size() << " values for " << rets.size()
      << " results";
  for (size_t i = 0; i < rets.size(); ++i) {
    auto ret = rets.get<ffi::AnyBuffer>(i);
    TB_CHECK(ret.has_value(), TypeError) << "tensorbridge_plan: result " << i << " is not a buffer";
    Tensor dst = WrapBuffer(**ret, /*read_only=*/false, "result", i);
    TB_CHECK(outputs[i].is_tensor(), TypeError) << "tensorbridge_plan: output " << i << " is a "
                                                << outputs[i].type_name() << ", not a tensor";
    const Tensor& src = outputs[i].to_tensor();
    TB_CHECK(src.dtype() == dst.dtype() && src.shape() == dst.shape(), ValueError)
        << "tensorbridge_plan: output " << i << " is " << DTypeName(src.dtype())
        << ShapeString(src.shape()) << ", the result buffer " << DTypeName(dst.dtype())
        << ShapeString(dst.shape());
    if (dst.numel() > 0) dst.copy_from(src);
  }
}

ffi::Error PlanHandlerImpl(int64_t plan_id, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  try {
    RunPlan(plan_id, args, rets);
  } catch (const std::exception& e) {
    g_failures.fetch_add(1, std::memory_order_relaxed);
    return ffi::Error(ffi::ErrorCode::kInternal, e.what());
  }
  g_runs.fetch_add(1, std::memory_order_relaxed);
  return ffi::Error::Success();
}

}  // namespace
}  // namespace tb::py

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    TbPlanHandler, tb::py::PlanHandlerImpl,
    xla::ffi::Ffi::Bind().Attr<int64_t>("plan_id").RemainingArgs().RemainingRets());

namespace tb::py {

void BindFfi(py::module_& m) {
  m.attr("_ffi_api_version") = py::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
  m.def(
      "_ffi_handler", []() { return py::capsule(reinterpret_cast<void*>(&TbPlanHandler)); },
      "The XLA FFI handler that runs registered plans, as a PyCapsule.");
  m.def(
      "_ffi_register_plan",
      [](std::shared_ptr<Plan> plan) {
        TB_CHECK(plan != nullptr, TypeError) << "_ffi_register_plan: no plan";
        std::lock_guard<std::mutex> lock(g_registry_mutex);
        g_plans.push_back(std::move(plan));
        return static_cast<int64_t>(g_plans.size()) - 1;
      },
      py::arg("plan"), "Keeps a finalized plan for the FFI handler; returns its id.");
  m.def(
      "_ffi_set_threads",
      [](int n) {
        TB_CHECK(n >= 0, ValueError) << "ffi_threads must be >= 0 (0: OpenMP's default), got " << n;
        g_threads.store(n, std::memory_order_relaxed);
      },
      py::arg("n"), "OpenMP threads of one FFI handler call (0: OpenMP's default).");
  m.def(
      "_ffi_metrics",
      [] {
        py::dict d;
        {
          std::lock_guard<std::mutex> lock(g_registry_mutex);
          d["plans"] = g_plans.size();
        }
        d["runs"] = g_runs.load(std::memory_order_relaxed);
        d["failures"] = g_failures.load(std::memory_order_relaxed);
        return d;
      },
      "Plans registered for the FFI handler, and its successful and failed runs.");
}

}  // namespace tb::py
