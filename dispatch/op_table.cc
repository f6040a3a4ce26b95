#include "dispatch/op_table.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "bridge/error.h"

namespace tb {

const char* ServedByName(ServedBy s) {
  switch (s) {
    case ServedBy::kKernel: return "kernel";
    case ServedBy::kComposite: return "composite";
    case ServedBy::kDecomposition: return "decomposition";
    case ServedBy::kFallback: return "fallback";
    case ServedBy::kMissing: return "missing";
  }
  return "?";
}

struct OpTable::Slot {
  uint64_t token;
  SlotKind kind;
  DeviceType device;
  BoxedKernel fn;
  std::string debug;
};

namespace {
// What lookups read: rebuilt under the lock at each (un)registration, never changed after.
struct Snapshot {
  std::vector<std::pair<DeviceType, const void*>> kernels;  // device -> Slot*
  const void* composite = nullptr;
  const void* decomposition = nullptr;
};
}  // namespace

struct OpTable::Entry {
  OpInfo info;
  std::vector<Slot*> live;  // registration order; guarded by mu_
  // Slots and snapshots are kept until the table dies: a lock-free reader may still hold one.
  std::vector<std::unique_ptr<Slot>> all_slots;
  std::vector<std::unique_ptr<Snapshot>> all_snapshots;
  std::atomic<const Snapshot*> snapshot{nullptr};
  std::atomic<bool> legal{true};
  std::atomic<uint64_t> calls{0}, kernel{0}, composite{0}, decomposition{0}, fallback{0},
      declined{0}, time_ns{0};
};

RegistrationHandle& RegistrationHandle::operator=(RegistrationHandle&& o) noexcept {
  if (this != &o) {
    reset();
    table_ = o.table_;
    op_ = o.op_;
    token_ = o.token_;
    o.table_ = nullptr;
  }
  return *this;
}

void RegistrationHandle::reset() {
  if (table_ != nullptr) {
    table_->Unregister(op_, token_);
    table_ = nullptr;
  }
}

OpTable& OpTable::Global() {
  // Never destroyed: kernels registered at load time and Python handles may outlive any
  // static destruction order.
  static OpTable* table = new OpTable();
  return *table;
}

OpTable::OpTable() : entries_(new std::atomic<Entry*>[kMaxOps]) {
  for (size_t i = 0; i < kMaxOps; ++i) entries_[i].store(nullptr, std::memory_order_relaxed);
}

OpTable::~OpTable() {
  size_t n = size_.load();
  for (size_t i = 0; i < n; ++i) delete entries_[i].load();
}

OpId OpTable::Intern(std::string_view qualified) {
  OpName name = OpName::Parse(qualified);
  std::string key = name.ToString();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  size_t n = size_.load(std::memory_order_relaxed);
  TB_CHECK(n < kMaxOps, RuntimeError) << "op table is full (" << kMaxOps << " ops)";
  auto* e = new Entry();
  e->info = OpInfo{static_cast<OpId>(n), std::move(name), key, nullptr};
  if (e->info.name.name.rfind("aten::", 0) == 0) e->info.schema = FindAtenSchema(key);
  auto* snap = new Snapshot();
  e->all_snapshots.emplace_back(snap);
  e->snapshot.store(snap, std::memory_order_release);
  entries_[n].store(e, std::memory_order_release);
  size_.store(n + 1, std::memory_order_release);
  ids_.emplace(key, static_cast<OpId>(n));
  return static_cast<OpId>(n);
}

OpId OpTable::Define(std::string_view schema_text) {
  auto schema = std::make_unique<FunctionSchema>(FunctionSchema::Parse(schema_text));
  OpId id = Intern(schema->name().ToString());
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = *entries_[id].load();
  if (e.info.schema != nullptr) {
    if (e.info.schema->ToString() != schema->ToString()) {
      TB_THROW(ValueError) << "op " << e.info.qualified << " already has the schema "
                           << e.info.schema->ToString();
    }
    return id;
  }
  e.info.schema = schema.get();
  defined_schemas_.push_back(std::move(schema));
  return id;
}

std::optional<OpId> OpTable::Find(std::string_view qualified) const {
  std::string key = OpName::Parse(qualified).ToString();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(key);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const OpInfo& OpTable::Info(OpId op) const {
  TB_CHECK(op < size_.load(std::memory_order_acquire), ValueError) << "unknown op id " << op;
  return entries_[op].load(std::memory_order_acquire)->info;
}

size_t OpTable::size() const { return size_.load(std::memory_order_acquire); }

RegistrationHandle OpTable::Register(std::string_view op, SlotKind kind, DeviceType device,
                                     BoxedKernel fn, std::string debug) {
  TB_CHECK(static_cast<bool>(fn), ValueError) << "registering an empty kernel for " << op;
  OpId id = Intern(op);
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = *entries_[id].load();
  auto slot =
      std::make_unique<Slot>(Slot{next_token_++, kind, device, std::move(fn), std::move(debug)});
  e.live.push_back(slot.get());
  uint64_t token = slot->token;
  e.all_slots.push_back(std::move(slot));
  Rebuild(e);
  return RegistrationHandle(this, id, token);
}

RegistrationHandle OpTable::RegisterKernel(std::string_view op, DeviceType device, BoxedKernel fn,
                                           std::string debug) {
  return Register(op, SlotKind::kKernel, device, std::move(fn), std::move(debug));
}
RegistrationHandle OpTable::RegisterComposite(std::string_view op, BoxedKernel fn,
                                              std::string debug) {
  return Register(op, SlotKind::kComposite, DeviceType::kCPU, std::move(fn), std::move(debug));
}
RegistrationHandle OpTable::RegisterDecomposition(std::string_view op, BoxedKernel fn,
                                                  std::string debug) {
  return Register(op, SlotKind::kDecomposition, DeviceType::kCPU, std::move(fn), std::move(debug));
}

void OpTable::Unregister(OpId op, uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = *entries_[op].load();
  auto it = std::find_if(e.live.begin(), e.live.end(), [&](Slot* s) { return s->token == token; });
  if (it == e.live.end()) return;
  e.live.erase(it);
  Rebuild(e);
}

void OpTable::Rebuild(Entry& e) {
  auto snap = std::make_unique<Snapshot>();
  // Later registrations win: walk in order, overwriting.
  for (Slot* s : e.live) {
    switch (s->kind) {
      case SlotKind::kKernel: {
        auto it = std::find_if(snap->kernels.begin(), snap->kernels.end(),
                               [&](const auto& p) { return p.first == s->device; });
        if (it == snap->kernels.end())
          snap->kernels.emplace_back(s->device, s);
        else
          it->second = s;
        break;
      }
      case SlotKind::kComposite: snap->composite = s; break;
      case SlotKind::kDecomposition: snap->decomposition = s; break;
    }
  }
  e.snapshot.store(snap.get(), std::memory_order_release);
  e.all_snapshots.push_back(std::move(snap));
}

void OpTable::SetFallback(FallbackHandler handler) {
  auto p = handler ? std::make_shared<FallbackHandler>(std::move(handler)) : nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  // Old handlers stay alive in retired_ so that a call already holding one can finish.
  static std::vector<std::shared_ptr<FallbackHandler>>* retired =
      new std::vector<std::shared_ptr<FallbackHandler>>();
  if (fallback_) retired->push_back(fallback_);
  std::atomic_store(&fallback_, p);
}

bool OpTable::has_fallback() const { return std::atomic_load(&fallback_) != nullptr; }

void OpTable::SetLegal(OpId op, bool legal) {
  Info(op);  // validates the id
  entries_[op].load()->legal.store(legal, std::memory_order_release);
}

bool OpTable::HasKernel(OpId op, DeviceType device) const {
  Info(op);
  const Snapshot& snap = *entries_[op].load()->snapshot.load();
  if (snap.composite != nullptr) return true;
  for (const auto& [dev, slot] : snap.kernels) {
    if (dev == device) return true;
  }
  return false;
}

std::vector<OpId> OpTable::Composites() const {
  std::vector<OpId> out;
  size_t n = size_.load();
  for (size_t i = 0; i < n; ++i) {
    if (entries_[i].load()->snapshot.load()->decomposition != nullptr) {
      out.push_back(static_cast<OpId>(i));
    }
  }
  return out;
}

bool OpTable::IsLegal(OpId op) const {
  Info(op);
  return entries_[op].load()->legal.load(std::memory_order_acquire);
}

std::string Resolution::Describe() const {
  std::string s = reason;
  if (where != nullptr) s += " (registered at " + *where + ")";
  return s;
}

Resolution OpTable::Resolve(OpId op, DeviceType device) const {
  TB_CHECK(op < size_.load(std::memory_order_acquire), ValueError) << "unknown op id " << op;
  const Entry& e = *entries_[op].load(std::memory_order_acquire);
  const Snapshot& snap = *e.snapshot.load(std::memory_order_acquire);
  const bool legal = e.legal.load(std::memory_order_relaxed);
  auto from = [](const void* slot, ServedBy by, const char* why) {
    const auto* s = static_cast<const Slot*>(slot);
    return Resolution{&s->fn, by, why, &s->debug};
  };
  // (1) A kernel for this op and device, unless the op was taken out of the legal set.
  if (legal) {
    for (const auto& [dev, slot] : snap.kernels) {
      if (dev == device) return from(slot, ServedBy::kKernel, "kernel for this device");
    }
  }
  // (2) A composite kernel: the whole op, device independent.
  if (legal && snap.composite != nullptr) {
    return from(snap.composite, ServedBy::kComposite, "composite kernel");
  }
  // (3) A decomposition into other table ops: taken when the op has no kernel, or when the
  //     user narrowed the legal set to exclude it.
  if (snap.decomposition != nullptr) {
    return from(snap.decomposition, ServedBy::kDecomposition,
                legal ? "decomposition (no kernel for this device)"
                      : "decomposition (op is not in the backend-legal set)");
  }
  // (4) The fallback handler.
  if (auto fb = std::atomic_load(&fallback_)) {
    return Resolution{fb.get(), ServedBy::kFallback, "fallback handler (no kernel registered)",
                      nullptr};
  }
  // (5) Nothing serves it.
  return Resolution{nullptr, ServedBy::kMissing, "no kernel, decomposition or fallback", nullptr};
}

void OpTable::ReportMissing(OpId op, DeviceType device) const {
  const Entry& e = *entries_[op].load();
  const Snapshot& snap = *e.snapshot.load();
  std::ostringstream os;
  os << e.info.qualified << " has no kernel for device " << DeviceTypeName(device);
  if (!snap.kernels.empty()) {
    os << "; it has kernels for:";
    for (const auto& [dev, slot] : snap.kernels) os << " " << DeviceTypeName(dev);
  } else {
    os << "; it has no kernels";
  }
  if (!e.legal.load()) os << " (and it is outside the backend-legal set)";
  // Other overloads of the same op, which may be what the caller meant.
  std::vector<std::string> others;
  size_t n = size_.load();
  for (size_t i = 0; i < n; ++i) {
    const Entry& o = *entries_[i].load();
    if (i != op && o.info.name.name == e.info.name.name && !o.snapshot.load()->kernels.empty()) {
      others.push_back(o.info.qualified);
    }
  }
  if (!others.empty()) {
    os << ". Registered overloads of " << e.info.name.name << ":";
    for (const auto& s : others) os << " " << s;
  }
  os << ". No fallback handler is installed.";
  TB_THROW(NotImplementedError) << os.str();
}

void OpTable::Call(OpId op, Stack& stack) {
  TB_CHECK(op < size_.load(std::memory_order_acquire), ValueError) << "unknown op id " << op;
  Entry& e = *entries_[op].load(std::memory_order_acquire);
  // The device is the tensors' device, those in lists (cat, index) included; they must agree
  // (0-d CPU numbers may join any).
  DeviceType device = DeviceType::kCPU;
  bool found = false;
  auto visit = [&](const Tensor& t) {
    if (!t.defined() || t.is_wrapped_number()) return;
    if (!found) {
      device = t.device().type;
      found = true;
    } else if (t.device().type != device) {
      TB_THROW(ValueError) << e.info.qualified << ": tensors on different devices ("
                           << DeviceTypeName(device) << " and " << DeviceTypeName(t.device().type)
                           << ")";
    }
  };
  for (const Value& v : stack) {
    if (v.is_tensor()) {
      visit(v.to_tensor());
    } else if (v.tag() == Value::Tag::kTensorList) {
      for (const Tensor& t : v.to_tensor_list()) visit(t);
    } else if (v.tag() == Value::Tag::kOptionalTensorList) {
      for (const auto& t : v.to_optional_tensor_list()) {
        if (t) visit(*t);
      }
    }
  }
  Resolution r = Resolve(op, device);
  if (r.served_by == ServedBy::kMissing) {
    e.calls.fetch_add(1, std::memory_order_relaxed);
    ReportMissing(op, device);
  }
  CallResolved(op, r, stack);
}

void OpTable::CallResolved(OpId op, const Resolution& r, Stack& stack) {
  Entry& e = *entries_[op].load(std::memory_order_acquire);
  e.calls.fetch_add(1, std::memory_order_relaxed);
  std::atomic<uint64_t>* served = nullptr;
  switch (r.served_by) {
    case ServedBy::kKernel: served = &e.kernel; break;
    case ServedBy::kComposite: served = &e.composite; break;
    case ServedBy::kDecomposition: served = &e.decomposition; break;
    case ServedBy::kFallback: served = &e.fallback; break;
    case ServedBy::kMissing: ReportMissing(op, DeviceType::kCPU); return;
  }
  served->fetch_add(1, std::memory_order_relaxed);
  const auto t0 =
      profiling() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  const size_t nargs = stack.size();
  try {
    (*r.kernel)(e.info, stack);
  } catch (const Error& err) {
    // A kernel declining its input: the fallback serves the call instead, unless the kernel
    // already consumed its arguments (a boxed kernel that pops them), which none of the typed
    // kernels do before returning.
    std::shared_ptr<FallbackHandler> fb;
    if (!err.declined() || r.served_by == ServedBy::kFallback || !fallback_on_decline() ||
        stack.size() != nargs || !(fb = std::atomic_load(&fallback_))) {
      throw;
    }
    served->fetch_sub(1, std::memory_order_relaxed);
    e.fallback.fetch_add(1, std::memory_order_relaxed);
    e.declined.fetch_add(1, std::memory_order_relaxed);
    (*fb)(e.info, stack);
  }
  if (profiling()) {
    auto dt = std::chrono::steady_clock::now() - t0;
    e.time_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count(),
                        std::memory_order_relaxed);
  }
}

void OpTable::Call(std::string_view qualified, Stack& stack) {
  auto id = Find(qualified);
  if (!id) {
    TB_THROW(NotImplementedError) << OpName::Parse(qualified).ToString()
                                  << " is not a known op: nothing was registered for it";
  }
  Call(*id, stack);
}

Stack OpTable::CallWithArgs(OpId op, Stack positional,
                            std::vector<std::pair<std::string, Value>> keywords) {
  const OpInfo& info = Info(op);
  Stack stack;
  if (info.schema != nullptr) {
    stack = info.schema->Bind(std::move(positional), std::move(keywords));
  } else {
    TB_CHECK(keywords.empty(), TypeError)
        << info.qualified << " has no schema, so it takes positional arguments only";
    stack = std::move(positional);
  }
  Call(op, stack);
  return stack;
}

OpCounters OpTable::Counters(OpId op) const {
  Info(op);
  const Entry& e = *entries_[op].load();
  return OpCounters{e.calls.load(),         e.kernel.load(),   e.composite.load(),
                    e.decomposition.load(), e.fallback.load(), e.declined.load(),
                    e.time_ns.load()};
}

void OpTable::ResetCounters() {
  size_t n = size_.load();
  for (size_t i = 0; i < n; ++i) {
    Entry& e = *entries_[i].load();
    for (auto* c : {&e.calls, &e.kernel, &e.composite, &e.decomposition, &e.fallback, &e.declined,
                    &e.time_ns}) {
      c->store(0, std::memory_order_relaxed);
    }
  }
}

void OpTable::SetProfiling(bool on) { profiling_.store(on, std::memory_order_relaxed); }

std::string OpTable::Dump() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  size_t n = size_.load();
  for (size_t i = 0; i < n; ++i) {
    const Entry& e = *entries_[i].load();
    os << e.info.qualified << (e.legal.load() ? "" : " [not legal: decomposed]") << "\n";
    const Snapshot& snap = *e.snapshot.load();
    for (const auto& [dev, slot] : snap.kernels) {
      os << "  kernel[" << DeviceTypeName(dev) << "]: " << static_cast<const Slot*>(slot)->debug
         << "\n";
    }
    if (snap.composite) {
      os << "  composite: " << static_cast<const Slot*>(snap.composite)->debug << "\n";
    }
    if (snap.decomposition) {
      os << "  decomposition: " << static_cast<const Slot*>(snap.decomposition)->debug << "\n";
    }
  }
  return os.str();
}

namespace detail {

void ThrowArgType(const OpInfo& op, size_t index, const char* expected, const Value& got) {
  std::string name;
  if (op.schema != nullptr && index < op.schema->arguments().size()) {
    name = " '" + op.schema->arguments()[index].name + "'";
  }
  TB_THROW(TypeError) << op.qualified << ": argument " << index << name << " expected " << expected
                      << " but got " << got.type_name();
}

std::string SourceLocation(const char* file, int line) {
  std::string_view f(file);
  size_t best = std::string_view::npos;
  for (const char* layer :
       {"bridge/", "interop/", "dispatch/", "kernels/", "python/", "tests/", "benchmarks/"}) {
    size_t pos = f.rfind(layer);
    if (pos != std::string_view::npos && (pos == 0 || f[pos - 1] == '/') &&
        (best == std::string_view::npos || pos > best)) {
      best = pos;
    }
  }
  if (best != std::string_view::npos) f = f.substr(best);
  return std::string(f) + ":" + std::to_string(line);
}

void CheckArity(const OpInfo& op, const Stack& s, size_t expected) {
  if (s.size() != expected) {
    TB_THROW(TypeError) << op.qualified << ": expected " << expected << " arguments, got "
                        << s.size();
  }
}

}  // namespace detail

KernelRegistrar::KernelRegistrar(const char* group, void (*fn)(KernelRegistrar&)) { fn(*this); }

void KernelRegistrar::RegisterKernel(std::string_view op, DeviceType device, BoxedKernel fn,
                                     std::string debug) {
  OpTable::Global().RegisterKernel(op, device, std::move(fn), std::move(debug)).release();
}
void KernelRegistrar::RegisterComposite(std::string_view op, BoxedKernel fn, std::string debug) {
  OpTable::Global().RegisterComposite(op, std::move(fn), std::move(debug)).release();
}
void KernelRegistrar::RegisterDecomposition(std::string_view op, BoxedKernel fn,
                                            std::string debug) {
  OpTable::Global().RegisterDecomposition(op, std::move(fn), std::move(debug)).release();
}

}  // namespace tb
