// The op table: ATen operator names -> kernels, with composites, decompositions, the
// fallback handler, the backend-legal set and per-op counters.
//
// Registration happens under a lock; lookups and calls read an immutable snapshot per op
// through an atomic pointer, so they take no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bridge/api.h"
#include "dispatch/op_name.h"
#include "dispatch/schema.h"
#include "dispatch/value.h"

namespace tb {

class OpTable;

// What a kernel learns about the op it serves (for error messages and shared kernels).
struct OpInfo {
  OpId id;
  OpName name;
  std::string qualified;                   // "aten::add.Tensor"
  const FunctionSchema* schema = nullptr;  // PyTorch's schema; null for schema-less ops
};

// A kernel takes its arguments from the stack and leaves its results there.
using BoxedKernel = std::function<void(const OpInfo& op, Stack& stack)>;

// How a call is served, in lookup order.
enum class ServedBy : uint8_t {
  kKernel = 1,         // a kernel for the op and device
  kComposite = 2,      // a whole kernel for a composite op (device independent)
  kDecomposition = 3,  // a rewrite into other table ops
  kFallback = 4,       // the fallback handler (PyTorch eager, installed by the Python layer)
  kMissing = 5,        // nothing: calling raises an error that lists what exists
};
TB_API const char* ServedByName(ServedBy s);

struct Resolution {
  const BoxedKernel* kernel = nullptr;  // null when kMissing
  ServedBy served_by = ServedBy::kMissing;
  const char* reason = "";             // why this step was taken
  const std::string* where = nullptr;  // who registered the kernel (null for the fallback)
  // "composite kernel (registered at kernels/activation.cc:40)"
  TB_API std::string Describe() const;
};

// Undoes a registration when destroyed (or on reset()). Movable, not copyable.
class TB_API RegistrationHandle {
 public:
  RegistrationHandle() = default;
  RegistrationHandle(OpTable* table, OpId op, uint64_t token)
      : table_(table), op_(op), token_(token) {}
  RegistrationHandle(RegistrationHandle&& o) noexcept { *this = std::move(o); }
  RegistrationHandle& operator=(RegistrationHandle&& o) noexcept;
  RegistrationHandle(const RegistrationHandle&) = delete;
  RegistrationHandle& operator=(const RegistrationHandle&) = delete;
  ~RegistrationHandle() { reset(); }
  void reset();
  // Keeps the registration for the life of the process (static registration).
  void release() { table_ = nullptr; }

 private:
  OpTable* table_ = nullptr;
  OpId op_ = 0;
  uint64_t token_ = 0;
};

struct OpCounters {
  uint64_t calls = 0;
  uint64_t kernel = 0;
  uint64_t composite = 0;
  uint64_t decomposition = 0;
  uint64_t fallback = 0;
  uint64_t declined = 0;  // of the fallbacks, calls whose kernel declined its input
  uint64_t time_ns = 0;   // only while profiling is on
};

class TB_API OpTable {
 public:
  // Called with the op and its stack when no kernel serves it (step 4).
  using FallbackHandler = std::function<void(const OpInfo& op, Stack& stack)>;

  // The process-wide table every kernel file registers into.
  static OpTable& Global();

  OpTable();
  ~OpTable();
  OpTable(const OpTable&) = delete;
  OpTable& operator=(const OpTable&) = delete;

  // The id of an op name, creating an (empty) entry on first use.
  OpId Intern(std::string_view qualified);
  // Declares a schema for an op outside aten (aten ops have PyTorch's schemas built in).
  OpId Define(std::string_view schema_text);
  // The id of a known op, or nullopt.
  std::optional<OpId> Find(std::string_view qualified) const;
  const OpInfo& Info(OpId op) const;
  size_t size() const;

  // Registration. The latest registration for a slot wins; removing it restores the one
  // before. `debug` says who registered ("kernels/binary.cc:42", "python: my_gelu").
  RegistrationHandle RegisterKernel(std::string_view op, DeviceType device, BoxedKernel fn,
                                    std::string debug);
  RegistrationHandle RegisterComposite(std::string_view op, BoxedKernel fn, std::string debug);
  RegistrationHandle RegisterDecomposition(std::string_view op, BoxedKernel fn, std::string debug);
  void SetFallback(FallbackHandler handler);
  bool has_fallback() const;
  // Whether a call whose kernel declines its input (a dtype or device it has no loop for:
  // Error::declined(), bridge/error.h) is retried on the fallback handler, counted as a
  // fallback (and as declined). On by default; off, the kernel's NotImplementedError stands.
  void SetFallbackOnDecline(bool on) { fallback_on_decline_.store(on); }
  bool fallback_on_decline() const { return fallback_on_decline_.load(); }

  // The backend-legal set: a composite that is not legal is decomposed (step 3).
  void SetLegal(OpId op, bool legal);
  bool IsLegal(OpId op) const;
  // True when a kernel (or composite kernel) is registered for the op, legal or not.
  bool HasKernel(OpId op, DeviceType device) const;
  // Composite ops: those with a registered decomposition.
  std::vector<OpId> Composites() const;

  // Lookup: numbered steps in one function, returning the kernel and the reason.
  Resolution Resolve(OpId op, DeviceType device) const;
  // Resolves, counts and runs, on the tensor arguments' device (lists too; CPU without one).
  void Call(OpId op, Stack& stack);
  void Call(std::string_view qualified, Stack& stack);
  // Runs a resolution obtained earlier (plans resolve once, at build), counting it.
  void CallResolved(OpId op, const Resolution& r, Stack& stack);
  // Calls by name as a user would: positional and keyword arguments bound against the
  // schema (defaults filled, types checked); returns the results.
  Stack CallWithArgs(OpId op, Stack positional,
                     std::vector<std::pair<std::string, Value>> keywords = {});

  // Counters.
  OpCounters Counters(OpId op) const;
  void ResetCounters();
  void SetProfiling(bool on);
  bool profiling() const { return profiling_.load(std::memory_order_relaxed); }

  // Every op with the kernels registered for it, one line each.
  std::string Dump() const;

 private:
  friend class RegistrationHandle;
  struct Entry;
  struct Slot;
  enum class SlotKind : uint8_t { kKernel, kComposite, kDecomposition };

  RegistrationHandle Register(std::string_view op, SlotKind kind, DeviceType device, BoxedKernel fn,
                              std::string debug);
  void Unregister(OpId op, uint64_t token);
  void Rebuild(Entry& e);  // with mu_ held
  [[noreturn]] void ReportMissing(OpId op, DeviceType device) const;

  mutable std::mutex mu_;
  // Entries never move once created: lookups index this array without the lock.
  static constexpr size_t kMaxOps = 1 << 14;
  std::unique_ptr<std::atomic<Entry*>[]> entries_;
  std::atomic<size_t> size_{0};
  std::unordered_map<std::string, OpId> ids_;                     // guarded by mu_
  std::vector<std::unique_ptr<FunctionSchema>> defined_schemas_;  // guarded by mu_
  std::shared_ptr<FallbackHandler> fallback_;                     // read with atomic_load
  std::atomic<bool> profiling_{false};
  std::atomic<bool> fallback_on_decline_{true};
  uint64_t next_token_ = 1;
};

// ---- typed registration -------------------------------------------------------------------
// A kernel written as an ordinary C++ function, e.g.
//   Tensor Add(const Tensor& self, const Tensor& other, const Scalar& alpha);
// is boxed by Boxed<&Add>() into a BoxedKernel that checks and unboxes its arguments.
namespace detail {

[[noreturn]] TB_API void ThrowArgType(const OpInfo& op, size_t index, const char* expected,
                                      const Value& got);

template <typename T>
struct Unbox;

template <>
struct Unbox<Tensor> {
  static const Tensor& get(const Value& v, const OpInfo& op, size_t i) {
    if (!v.is_tensor()) ThrowArgType(op, i, "Tensor", v);
    return v.to_tensor();
  }
};
template <>
struct Unbox<std::optional<Tensor>> {
  static std::optional<Tensor> get(const Value& v, const OpInfo& op, size_t i) {
    if (v.is_none()) return std::nullopt;
    return Unbox<Tensor>::get(v, op, i);
  }
};
template <>
struct Unbox<int64_t> {
  static int64_t get(const Value& v, const OpInfo& op, size_t i) {
    if (v.is_int()) return v.to_int();
    if (v.is_bool()) return v.to_bool();
    ThrowArgType(op, i, "int", v);
  }
};
template <>
struct Unbox<double> {
  static double get(const Value& v, const OpInfo& op, size_t i) {
    if (v.is_double() || v.is_int()) return v.to_double();
    if (v.is_bool()) return v.to_bool();
    ThrowArgType(op, i, "float", v);
  }
};
template <>
struct Unbox<bool> {
  static bool get(const Value& v, const OpInfo& op, size_t i) {
    if (!v.is_bool()) ThrowArgType(op, i, "bool", v);
    return v.to_bool();
  }
};
template <>
struct Unbox<Scalar> {
  static Scalar get(const Value& v, const OpInfo& op, size_t i) {
    if (!v.is_scalar()) ThrowArgType(op, i, "Scalar", v);
    return v.to_scalar();
  }
};
template <>
struct Unbox<DType> {
  static DType get(const Value& v, const OpInfo& op, size_t i) {
    if (v.tag() != Value::Tag::kDType) ThrowArgType(op, i, "ScalarType", v);
    return v.to_dtype();
  }
};
template <>
struct Unbox<std::string> {
  static const std::string& get(const Value& v, const OpInfo& op, size_t i) {
    if (v.tag() != Value::Tag::kString) ThrowArgType(op, i, "str", v);
    return v.to_string();
  }
};
template <>
struct Unbox<std::vector<int64_t>> {
  // A single int stands for a one-element list, as ATen's int[1] arguments allow.
  static std::vector<int64_t> get(const Value& v, const OpInfo& op, size_t i) {
    if (v.tag() == Value::Tag::kIntList) return v.to_int_list();
    if (v.is_int()) return {v.to_int()};
    ThrowArgType(op, i, "int[]", v);
  }
};
template <>
struct Unbox<std::vector<Tensor>> {
  static const std::vector<Tensor>& get(const Value& v, const OpInfo& op, size_t i) {
    if (v.tag() != Value::Tag::kTensorList) ThrowArgType(op, i, "Tensor[]", v);
    return v.to_tensor_list();
  }
};
template <>
struct Unbox<std::vector<double>> {
  static std::vector<double> get(const Value& v, const OpInfo& op, size_t i) {
    if (v.tag() == Value::Tag::kDoubleList) return v.to_double_list();
    if (v.tag() == Value::Tag::kIntList) {
      return std::vector<double>(v.to_int_list().begin(), v.to_int_list().end());
    }
    ThrowArgType(op, i, "float[]", v);
  }
};
template <>
struct Unbox<std::vector<bool>> {
  static const std::vector<bool>& get(const Value& v, const OpInfo& op, size_t i) {
    if (v.tag() != Value::Tag::kBoolList) ThrowArgType(op, i, "bool[]", v);
    return v.to_bool_list();
  }
};
template <>
struct Unbox<std::vector<std::optional<Tensor>>> {
  static const std::vector<std::optional<Tensor>>& get(const Value& v, const OpInfo& op, size_t i) {
    if (v.tag() != Value::Tag::kOptionalTensorList) ThrowArgType(op, i, "Tensor?[]", v);
    return v.to_optional_tensor_list();
  }
};
// Arguments a kernel takes as they come (layout, device, memory_format, generator, ...).
template <>
struct Unbox<Value> {
  static const Value& get(const Value& v, const OpInfo&, size_t) { return v; }
};
template <typename T>
struct Unbox<std::optional<T>> {
  static std::optional<T> get(const Value& v, const OpInfo& op, size_t i) {
    if (v.is_none()) return std::nullopt;
    return Unbox<T>::get(v, op, i);
  }
};

template <typename T>
void PushResult(Stack& s, T&& r) {
  s.emplace_back(std::forward<T>(r));
}
template <typename... T>
void PushResult(Stack& s, std::tuple<T...>&& r) {
  std::apply([&](auto&&... x) { (s.emplace_back(std::move(x)), ...); }, std::move(r));
}

TB_API void CheckArity(const OpInfo& op, const Stack& s, size_t expected);
// "kernels/binary.cc:50": the path relative to the source tree, however the build named it.
TB_API std::string SourceLocation(const char* file, int line);

template <typename R, typename... A, size_t... I>
void CallTyped(R (*fn)(A...), const OpInfo& op, Stack& s, std::index_sequence<I...>) {
  constexpr size_t n = sizeof...(A);
  CheckArity(op, s, n);
  if constexpr (std::is_void_v<R>) {
    fn(Unbox<std::decay_t<A>>::get(s[I], op, I)...);
    s.clear();
  } else {
    R r = fn(Unbox<std::decay_t<A>>::get(s[I], op, I)...);
    s.clear();
    PushResult(s, std::move(r));
  }
}

template <typename R, typename... A>
void CallTypedFn(R (*fn)(A...), const OpInfo& op, Stack& s) {
  CallTyped(fn, op, s, std::index_sequence_for<A...>{});
}

}  // namespace detail

template <auto Fn>
BoxedKernel Boxed() {
  return [](const OpInfo& op, Stack& s) { detail::CallTypedFn(Fn, op, s); };
}

}  // namespace tb

// Static registration: one block per kernel file.
//   TB_REGISTER_KERNELS(binary) {
//     table.RegisterKernel("aten::add.Tensor", DeviceType::kCPU, Boxed<&Add>(), TB_HERE);
//   }
#define TB_HERE (::tb::detail::SourceLocation(__FILE__, __LINE__))
#define TB_REGISTER_KERNELS(group)                                                \
  static void TbRegister_##group(::tb::KernelRegistrar& table);                   \
  static ::tb::KernelRegistrar tb_registrar_##group(#group, &TbRegister_##group); \
  static void TbRegister_##group(::tb::KernelRegistrar& table)

namespace tb {
// Runs one kernel file's registration block at load time, keeping its registrations for the
// life of the process.
class TB_API KernelRegistrar {
 public:
  KernelRegistrar(const char* group, void (*fn)(KernelRegistrar&));
  void RegisterKernel(std::string_view op, DeviceType device, BoxedKernel fn, std::string debug);
  void RegisterComposite(std::string_view op, BoxedKernel fn, std::string debug);
  void RegisterDecomposition(std::string_view op, BoxedKernel fn, std::string debug);
};
}  // namespace tb
