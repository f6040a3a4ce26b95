// The device route (prototype): tensorbridge as PyTorch's PrivateUse1 backend.
//
// A PrivateUse1 tensor is an ordinary c10::TensorImpl whose storage is the memory of a wrapped
// array (its DataPtr holds the CPU storage, and so the array's owner, alive). torch's
// dispatcher reaches this library in C++, with no trip through Python:
//   - the table's CPU kernels (kernels/) serve the aten ops they cover, through the boxed
//     calling convention: IValues -> tb::Values over the same memory -> OpTable::Call ->
//     results wrapped as PrivateUse1 tensors over the table's memory;
//   - every other op runs torch's own CPU kernel on zero-copy CPU views (a boxed fallback);
//   - autograd is torch's AutogradPrivateUse1 (the generated VariableType kernels).
// The Python side (tensorbridge/_device_route.py) loads this library with
// torch.ops.load_library and reaches its ops as torch.ops.tensorbridge_device.*.
//
// It links libtorch and the tensorbridge core; the core itself never sees torch.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "convert.h"
#include "dispatch/op_table.h"

namespace tb_device {
namespace {

using tb_torch::ArgKind;
using tb_torch::KindOf;
using tb_torch::ToTb;
using tb_torch::ToTorchDType;
using tb_torch::WrittenReturns;

constexpr c10::DeviceType kDev = c10::DeviceType::PrivateUse1;
const c10::Device kDevice(kDev, 0);

// ---- memory ------------------------------------------------------------------------------

// Memory of new PrivateUse1 tensors (empty, empty_strided): torch's CPU allocator, tagged
// with the PrivateUse1 device.
struct Allocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr cpu = c10::GetCPUAllocator()->allocate(n);
    cpu.unsafe_set_device(kDevice);
    return cpu;
  }
  c10::DeleterFnPtr raw_deleter() const override { return c10::GetCPUAllocator()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    if (count > 0) std::memcpy(dest, src, count);
  }
};
Allocator g_allocator;
REGISTER_ALLOCATOR(kDev, &g_allocator)

// One device, always current, with one stream on which work is done when the call returns
// (the memory is host memory): events are complete once recorded.
struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDev; }
  c10::Device exchangeDevice(c10::Device) const override { return kDevice; }
  c10::Device getDevice() const override { return kDevice; }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, kDevice);
  }
  c10::Stream getDefaultStream(c10::Device) const override {
    return c10::Stream(c10::Stream::DEFAULT, kDevice);
  }
  c10::Stream getNewStream(c10::Device, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, kDevice);
  }
  c10::Stream exchangeStream(c10::Stream) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, kDevice);
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl)

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  at::Device getDeviceFromPtr(void*) const override { return kDevice; }
  // Random ops run on the CPU view with the CPU generator (the fallback passes it along).
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();
  }
};
const bool g_hooks = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());  // lives for the process
  return true;
}();

// A tensor of `device` over the same bytes as `t` (same sizes, strides, offset, dtype). The new
// storage's DataPtr holds a reference to t's storage, so the memory's owner lives as long as
// either tensor.
at::Tensor Rehome(const at::Tensor& t, c10::Device device, bool resizable) {
  const c10::Storage& src = t.storage();
  auto* keep = new c10::Storage(src);
  c10::DataPtr ptr(
      src.data_ptr().get(), keep, [](void* ctx) { delete static_cast<c10::Storage*>(ctx); },
      device);
  c10::Storage storage(c10::Storage::use_byte_size_t(), src.nbytes(), std::move(ptr),
                       resizable ? c10::GetCPUAllocator() : nullptr, resizable);
  const c10::DispatchKeySet keys(device.type() == kDev ? c10::DispatchKey::PrivateUse1
                                                       : c10::DispatchKey::CPU);
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), keys, t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

at::Tensor CpuView(const at::Tensor& t) {
  return t.device().type() == kDev ? Rehome(t, c10::Device(c10::kCPU), /*resizable=*/true) : t;
}

// ---- table kernels: IValue <-> tb::Value -----------------------------------------------------

// A PrivateUse1 tensor over a table result's memory; the DataPtr holds the tb storage.
at::Tensor FromTb(const tb::Tensor& t) {
  const std::shared_ptr<tb::Storage>& src = t.storage();
  auto* keep = new std::shared_ptr<tb::Storage>(src);
  c10::DataPtr ptr(
      src->data(), keep, [](void* ctx) { delete static_cast<std::shared_ptr<tb::Storage>*>(ctx); },
      kDevice);
  c10::Storage storage(c10::Storage::use_byte_size_t(), src->nbytes(), std::move(ptr), nullptr,
                       false);
  const c10::ScalarType st = ToTorchDType(t.dtype());
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      caffe2::TypeMeta::fromScalarType(st));
  const int64_t item = t.element_size();
  const int64_t offset =
      src->data() == nullptr
          ? 0
          : (static_cast<const char*>(t.data()) - static_cast<const char*>(src->data())) / item;
  impl->set_sizes_and_strides(c10::IntArrayRef(t.shape().data(), t.shape().size()),
                              c10::IntArrayRef(t.strides().data(), t.strides().size()), offset);
  return at::Tensor(std::move(impl));
}

struct OpEntry {
  tb::OpId id = 0;
  std::vector<ArgKind> kinds;
  // For each return: the argument it writes and returns (in-place / out=), or -1.
  std::vector<int> returns_arg;
};

OpEntry MakeEntry(const c10::FunctionSchema& schema) {
  OpEntry e;
  const auto& name = schema.operator_name();
  e.id = tb::OpTable::Global().Intern(
      name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
  for (const auto& a : schema.arguments()) e.kinds.push_back(KindOf(a.real_type()));
  e.returns_arg = WrittenReturns(schema);
  return e;
}

c10::IValue FromValue(const tb::Value& v) {
  return tb_torch::ToIValue(v, [](const tb::Tensor& t) { return FromTb(t); });
}

// The boxed kernel of one table op: one conversion each way, the kernel in between. The
// arguments (tensors over PrivateUse1 or CPU memory) stay on torch's stack until the results
// are pushed, which keeps in-place outputs the very tensors passed in.
class TableOp final : public c10::OperatorKernel {
 public:
  explicit TableOp(OpEntry entry) : e_(std::move(entry)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t n = e_.kinds.size();
    const size_t first = stack->size() - n;
    tb::Stack s;
    s.reserve(n);
    for (size_t i = 0; i < n; ++i)
      s.push_back(tb_torch::ToValue((*stack)[first + i], e_.kinds[i], ToTb));
    try {
      tb::OpTable::Global().Call(e_.id, s);
    } catch (const std::exception& ex) {
      TORCH_CHECK(false, op.schema().name(), " (tensorbridge table): ", ex.what());
    }
    const size_t nret = e_.returns_arg.size();
    if (nret == 1 && e_.returns_arg[0] < 0) {  // the common case: one new tensor
      c10::IValue result = FromValue(s.at(0));
      torch::jit::drop(*stack, n);
      stack->push_back(std::move(result));
      return;
    }
    std::vector<c10::IValue> results;
    results.reserve(nret);
    for (size_t r = 0; r < nret; ++r) {
      const int arg = e_.returns_arg[r];
      results.push_back(arg >= 0 ? (*stack)[first + arg] : FromValue(s.at(r)));
    }
    torch::jit::drop(*stack, n);
    for (auto& r : results) stack->push_back(std::move(r));
  }

 private:
  const OpEntry e_;
};

// ---- the fallback: torch's CPU kernel on zero-copy CPU views ---------------------------------

c10::IValue ToCpu(const c10::IValue& v, bool* any) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.device().type() == kDev) {
      *any = true;
      return CpuView(t);
    }
    return v;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) {
      *any |= t.device().type() == kDev;
      out.push_back(CpuView(t));
    }
    return c10::IValue(out);
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& item : v.toListRef()) {
      if (item.isNone()) {
        out.push_back(std::nullopt);
      } else {
        *any |= item.toTensor().device().type() == kDev;
        out.push_back(CpuView(item.toTensor()));
      }
    }
    return c10::IValue(out);
  }
  if (v.isDevice() && v.toDevice().type() == kDev) return c10::IValue(c10::Device(c10::kCPU));
  return v;
}

c10::IValue ToDevice(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() && t.device().is_cpu() ? c10::IValue(Rehome(t, kDevice, false)) : v;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) {
      out.push_back(t.device().is_cpu() ? Rehome(t, kDevice, false) : t);
    }
    return c10::IValue(out);
  }
  return v;
}

// Calls of the fallback per op, for tests and benchmarks (fallback_counts()).
std::mutex g_fallback_mu;
std::map<std::string, int64_t> g_fallback_counts;  // guarded by g_fallback_mu

void CpuFallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  {
    std::lock_guard<std::mutex> lock(g_fallback_mu);
    const auto& name = schema.operator_name();
    ++g_fallback_counts[name.overload_name.empty() ? name.name
                                                   : name.name + "." + name.overload_name];
  }
  const size_t n = schema.arguments().size();
  const size_t first = stack->size() - n;
  std::vector<c10::IValue> originals(stack->begin() + first, stack->end());
  std::vector<c10::IValue> views(n);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    views[i] = ToCpu(originals[i], &any);
    (*stack)[first + i] = views[i];
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const std::vector<int> written = WrittenReturns(schema);
  const size_t nret = schema.returns().size();
  const size_t rfirst = stack->size() - nret;
  for (size_t r = 0; r < nret; ++r) {
    c10::IValue& out = (*stack)[rfirst + r];
    const int arg = written[r];
    if (arg >= 0 && originals[arg].isTensor()) {
      at::Tensor orig = originals[arg].toTensor();
      const at::Tensor& view = views[arg].toTensor();
      if (orig.device().type() == kDev &&
          (view.storage().data() != orig.storage().data() || view.sizes() != orig.sizes() ||
           view.strides() != orig.strides())) {
        // The CPU kernel resized an out= tensor: the original takes the new memory.
        at::Tensor moved = Rehome(view, kDevice, false);
        orig.unsafeGetTensorImpl()->set_storage_keep_dtype(moved.storage());
        orig.unsafeGetTensorImpl()->set_sizes_and_strides(view.sizes(), view.strides(),
                                                          view.storage_offset());
      }
      out = originals[arg];
    } else if (any) {
      out = ToDevice(out);
    }
  }
}

// ---- the ops every backend supplies itself ---------------------------------------------------

at::Tensor Empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                 std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>,
                 std::optional<c10::MemoryFormat> memory_format) {
  return at::detail::empty_generic(size, &g_allocator,
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor EmptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                        std::optional<c10::Device>, std::optional<bool>) {
  return at::detail::empty_strided_generic(size, stride, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor& Copy(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  at::Tensor dst = CpuView(self);
  dst.copy_(CpuView(src), non_blocking);
  return self;
}

at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor d = CpuView(dst);
  d.copy_(CpuView(self), non_blocking);
  return dst;
}

const at::Tensor& Resize(const at::Tensor& self, c10::IntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  const int64_t numel = c10::multiply_integers(size);
  const size_t need = static_cast<size_t>(numel + self.storage_offset()) * self.itemsize();
  if (need > self.storage().nbytes()) {
    c10::DataPtr fresh = g_allocator.allocate(need);
    const size_t old = self.storage().nbytes();
    if (old > 0) std::memcpy(fresh.get(), self.storage().data(), old);
    c10::Storage storage(c10::Storage::use_byte_size_t(), need, std::move(fresh), &g_allocator,
                         true);
    self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(storage));
  }
  self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

// ---- conversions, reached from Python as torch.ops.tensorbridge_device.* --------------------

// A PrivateUse1 tensor over a CPU tensor's memory (no copy).
at::Tensor DeviceView(const at::Tensor& cpu) {
  TORCH_CHECK(cpu.device().is_cpu(), "tensorbridge_device.device_view: expected a CPU tensor, got ",
              cpu.device());
  return Rehome(cpu, kDevice, false);
}

// A CPU tensor over a PrivateUse1 tensor's memory (no copy).
at::Tensor CpuViewOp(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == kDev,
              "tensorbridge_device.cpu_view: expected a tensor on the tensorbridge device, got ",
              t.device());
  return Rehome(t, c10::Device(c10::kCPU), false);
}

// The fallback's calls per op since the last call (which resets them).
std::tuple<std::vector<std::string>, std::vector<int64_t>> FallbackCounts() {
  std::lock_guard<std::mutex> lock(g_fallback_mu);
  std::vector<std::string> names;
  std::vector<int64_t> counts;
  for (const auto& [name, count] : g_fallback_counts) {
    names.push_back(name);
    counts.push_back(count);
  }
  g_fallback_counts.clear();
  return {names, counts};
}

// Registers the table's CPU kernels for the aten ops whose PyTorch definition is a per-backend
// kernel (not a composite, which reaches the backend through other ops) and that return new
// tensors or write their `self` argument; views, factories, copies and out= variants keep
// torch's path. Returns the names registered.
std::vector<std::string> RegisterTable(const std::vector<std::string>& only) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<torch::Library>> libs;
  std::lock_guard<std::mutex> lock(mu);
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  std::vector<std::string> done;
  tb::OpTable& table = tb::OpTable::Global();
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    const std::string qualified =
        name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    if (!only.empty() && std::find(only.begin(), only.end(), qualified) == only.end()) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      continue;
    }
    const auto& schema = handle->schema();
    bool skip = schema.returns().empty();
    for (const auto& a : schema.arguments()) {
      if (a.alias_info() != nullptr && a.alias_info()->isWrite() && a.kwarg_only()) skip = true;
      if (KindOf(a.real_type()) == ArgKind::kDevice) skip = true;
    }
    for (const auto& r : schema.returns()) {
      if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) skip = true;  // views
      if (!r.type()->isSubtypeOf(*c10::TensorType::get())) skip = true;
    }
    if (skip) continue;
    auto id = table.Find(qualified);
    if (!id) continue;
    const tb::ServedBy by = table.Resolve(*id, tb::DeviceType::kCPU).served_by;
    if (by != tb::ServedBy::kKernel && by != tb::ServedBy::kComposite) continue;
    lib->impl(qualified.substr(6).c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                               std::make_unique<TableOp>(MakeEntry(schema))));
    done.push_back(qualified);
  }
  libs.push_back(std::move(lib));
  return done;
}

}  // namespace
}  // namespace tb_device

TORCH_LIBRARY(tensorbridge_device, m) {
  m.def("device_view(Tensor(a) self) -> Tensor(a)", TORCH_FN(tb_device::DeviceView));
  m.def("cpu_view(Tensor(a) self) -> Tensor(a)", TORCH_FN(tb_device::CpuViewOp));
  m.def("fallback_counts() -> (str[], int[])", &tb_device::FallbackCounts);
  m.def("register_table(str[] only) -> str[]",
        [](std::vector<std::string> only) { return tb_device::RegisterTable(only); });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(tb_device::Empty));
  m.impl("empty_strided", TORCH_FN(tb_device::EmptyStrided));
  m.impl("copy_", TORCH_FN(tb_device::Copy));
  m.impl("_copy_from", TORCH_FN(tb_device::CopyFrom));
  m.impl("resize_", TORCH_FN(tb_device::Resize));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tb_device::CpuFallback>());
}
