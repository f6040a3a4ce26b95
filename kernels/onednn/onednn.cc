#include "kernels/onednn/onednn.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kernels/onednn/onednn_internal.h"

namespace tb {
namespace {

// Debian's oneDNN 2.6 dies with SIGILL in its AMX bf16 kernels on CPUs with AMX, so unless
// the user chose an ISA, oneDNN is capped below AMX. This must run before any other oneDNN
// call, so it runs when the library is loaded.
bool CapIsa() {
  if (std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr || std::getenv("DNNL_MAX_CPU_ISA") != nullptr) {
    return false;
  }
  return dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_bf16) == dnnl_success;
}

const bool kIsaCapped = CapIsa();

}  // namespace

bool OneDnnIsaCapped() { return kIsaCapped; }

std::string OneDnnEffectiveIsa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_all: return "all";
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "other";
  }
}

std::string OneDnnVersion() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

namespace onednn {

namespace {

std::mutex& CreatedMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

// Primitives created by implementation name; guarded by CreatedMutex().
std::map<std::string, int64_t>& CreatedCounts() {
  static auto* counts = new std::map<std::string, int64_t>();
  return *counts;
}

}  // namespace

void CountCreated(const dnnl::primitive& prim) {
  const char* name = nullptr;
  if (dnnl_primitive_desc_query(prim.get_primitive_desc(), dnnl_query_impl_info_str, 0, &name) !=
          dnnl_success ||
      name == nullptr) {
    name = "unknown";
  }
  std::lock_guard<std::mutex> lock(CreatedMutex());
  ++CreatedCounts()[name];
}

dnnl::engine& Engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& Stream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

dnnl::primitive_attr Attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {

// Up to this size, a thread keeps its scratchpad between executions; larger ones (rare: im2col
// buffers of large convolutions) are made for the call and freed after it.
constexpr size_t kKeptScratchpadBytes = size_t{16} << 20;

dnnl::memory ScratchpadMemory(size_t nbytes) {
  return dnnl::memory(dnnl::memory::desc({static_cast<dnnl::memory::dim>(nbytes)},
                                         dnnl::memory::data_type::u8, dnnl::memory::format_tag::a),
                      Engine());
}

}  // namespace

void Execute(const dnnl::primitive& prim, std::unordered_map<int, dnnl::memory> args) {
  const_dnnl_primitive_desc_t pd = prim.get_primitive_desc();
  const_dnnl_primitive_attr_t attr = nullptr;
  dnnl_scratchpad_mode_t mode = dnnl_scratchpad_mode_library;
  TB_ICHECK(dnnl_primitive_desc_get_attr(pd, &attr) == dnnl_success &&
            dnnl_primitive_attr_get_scratchpad_mode(attr, &mode) == dnnl_success &&
            mode == dnnl_scratchpad_mode_user)
      << "a oneDNN primitive made without onednn::Attr() (a library-managed scratchpad is "
         "shared by every thread that runs the primitive)";
  const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  const size_t nbytes = md != nullptr ? dnnl_memory_desc_get_size(md) : 0;
  if (nbytes > kKeptScratchpadBytes) {
    args.insert_or_assign(DNNL_ARG_SCRATCHPAD, ScratchpadMemory(nbytes));
  } else if (nbytes > 0) {
    // This thread's scratchpad, grown to the largest asked for on the thread (a primitive
    // takes a larger one than it needs). One execution uses it at a time: Execute does not
    // nest, and OpenMP workers inside the call share their caller's.
    thread_local dnnl::memory kept;
    thread_local size_t kept_bytes = 0;
    if (nbytes > kept_bytes) {
      kept_bytes = (nbytes + 4095) / 4096 * 4096;
      kept = ScratchpadMemory(kept_bytes);
    }
    args.insert_or_assign(DNNL_ARG_SCRATCHPAD, kept);
  }
  dnnl::stream& stream = Stream();
  prim.execute(stream, args);
  stream.wait();  // the scratchpad must outlive the execution
}

dnnl::memory ThreadTemporary(const dnnl::memory::desc& md, int slot) {
  constexpr int kSlots = 3;
  TB_ICHECK(slot >= 0 && slot < kSlots) << "onednn::ThreadTemporary: no slot " << slot;
  const size_t nbytes = md.get_size();
  if (nbytes > kKeptScratchpadBytes) return dnnl::memory(md, Engine());
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  thread_local std::array<std::unique_ptr<void, Free>, kSlots> buffers;
  thread_local std::array<size_t, kSlots> sizes{};
  if (nbytes > sizes[slot] || !buffers[slot]) {
    const size_t want = std::max<size_t>(4096, (nbytes + 4095) / 4096 * 4096);
    buffers[slot].reset(std::aligned_alloc(64, want));
    TB_CHECK(buffers[slot] != nullptr, RuntimeError)
        << "oneDNN: could not allocate " << want << " bytes for a reordered operand";
    sizes[slot] = want;
  }
  return dnnl::memory(md, Engine(), buffers[slot].get());
}

dnnl::primitive Cached(const std::string& key, const std::function<dnnl::primitive()>& make) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::string, dnnl::primitive>();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  dnnl::primitive p = make();  // outside the lock: creation can take milliseconds
  CountCreated(p);
  std::lock_guard<std::mutex> lock(mu);
  return cache->emplace(key, p).first->second;
}

dnnl::memory::data_type DataType(DType dtype, const char* op) {
  using dt = dnnl::memory::data_type;
  switch (dtype) {
    case DType::kFloat32: return dt::f32;
    case DType::kBFloat16: return dt::bf16;
    case DType::kFloat16: return dt::f16;
    case DType::kInt32: return dt::s32;
    case DType::kInt8: return dt::s8;
    case DType::kUInt8: return dt::u8;
    default:
      TB_THROW(NotImplementedError)
          << op << ": dtype " << DTypeName(dtype) << " is not supported by this oneDNN kernel";
  }
}

}  // namespace onednn

std::map<std::string, int64_t> OneDnnPrimitivesCreated() {
  std::lock_guard<std::mutex> lock(onednn::CreatedMutex());
  return onednn::CreatedCounts();
}

}  // namespace tb
