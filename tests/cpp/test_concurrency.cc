// Threads: kernels, the op table, the host buffer cache and plans used from several threads at
// once. Kernel results are compared bit for bit with the same calls made on one thread first
// (one kernel, one input: one answer). The suite also runs under ThreadSanitizer
// (-DTB_SANITIZE=thread, OMP_NUM_THREADS=1), where it runs fewer iterations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bridge/host_allocator.h"
#include "dispatch/op_call.h"
#include "dispatch/op_table.h"
#include "dispatch/plan.h"
#include "test_util.h"

namespace tb {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kSlowdown = 20;  // ThreadSanitizer runs code 5-15x slower
#else
constexpr int kSlowdown = 1;
#endif
constexpr int kThreads = 4;

// Runs fn(thread index) on `n` threads at once and waits for them.
void OnThreads(int n, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < n) {
      }
      fn(t);
    });
  }
  for (auto& th : threads) th.join();
}

Tensor Random(IntArrayRef shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  Tensor t = Tensor::Empty(shape, DType::kFloat32);
  auto* p = static_cast<float*>(t.mutable_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data(), y.data(), static_cast<size_t>(x.nbytes())) == 0;
}

// ---- kernels ---------------------------------------------------------------------------------

// One kernel case: inputs made from a seed, and the call.
struct Case {
  std::string name;
  std::function<std::vector<Tensor>(uint32_t seed)> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> call;
};

std::vector<Case> OneDnnCases() {
  static const OpRef mm("aten::mm"), addmm("aten::addmm"), bmm("aten::bmm");
  static const OpRef conv("aten::convolution"), avg_pool("aten::avg_pool2d");
  static const OpRef softmax("aten::_softmax"), layer_norm("aten::native_layer_norm");
  static const OpRef batch_norm("aten::native_batch_norm"), gelu("aten::gelu");
  static const OpRef addmm_act("tensorbridge::addmm_act");
  static const OpRef conv_relu("tensorbridge::convolution_relu");
  const std::vector<int64_t> one{1, 1}, zero{0, 0};
  auto rnd = [](std::vector<std::vector<int64_t>> shapes) {
    return [shapes](uint32_t seed) {
      std::vector<Tensor> out;
      for (size_t i = 0; i < shapes.size(); ++i) {
        out.push_back(Random(shapes[i], seed * 31 + static_cast<uint32_t>(i)));
      }
      return out;
    };
  };
  using In = const std::vector<Tensor>&;
  return {
      // oneDNN's brgemm matmul: its scratchpad holds the A/B block addresses of the call.
      {"mm 33x17x9", rnd({{33, 17}, {17, 9}}), [](In a) { return mm(a[0], a[1]).tensor(); }},
      {"mm 64x64x48", rnd({{64, 64}, {64, 48}}), [](In a) { return mm(a[0], a[1]).tensor(); }},
      // A few rows times a transposed weight: the inner product.
      {"mm inner product", rnd({{4, 64}, {32, 64}}),
       [](In a) { return mm(a[0], a[1].transpose(0, 1)).tensor(); }},
      {"addmm bias", rnd({{40}, {12, 24}, {24, 40}}),
       [](In a) { return addmm(a[0], a[1], a[2]).tensor(); }},
      {"bmm", rnd({{3, 20, 16}, {3, 16, 12}}), [](In a) { return bmm(a[0], a[1]).tensor(); }},
      {"convolution", rnd({{2, 3, 10, 10}, {4, 3, 3, 3}, {4}}),
       [=](In a) {
         return conv(a[0], a[1], a[2], one, one, one, false, zero, int64_t{1}).tensor();
       }},
      {"avg_pool2d", rnd({{2, 3, 12, 12}}),
       [](In a) {
         return avg_pool(a[0], std::vector<int64_t>{3, 3}, std::vector<int64_t>{2, 2}).tensor();
       }},
      {"softmax", rnd({{16, 70}}), [](In a) { return softmax(a[0], int64_t{1}, false).tensor(); }},
      {"layer_norm", rnd({{16, 48}, {48}, {48}}),
       [](In a) { return layer_norm(a[0], std::vector<int64_t>{48}, a[1], a[2], 1e-5).tensor(0); }},
      {"batch_norm", rnd({{4, 6, 5, 5}, {6}, {6}}),
       [](In a) {
         return batch_norm(a[0], a[1], a[2], Value(), Value(), true, 0.1, 1e-5).tensor(0);
       }},
      {"gelu", rnd({{64, 1024}}), [](In a) { return gelu(a[0]).tensor(); }},
      {"addmm_act", rnd({{40}, {12, 24}, {24, 40}}),
       [](In a) {
         return addmm_act
             .WithKeywords({Value(a[0]), Value(a[1]), Value(a[2])}, {{"activation", Value("gelu")}})
             .tensor();
       }},
      {"convolution_relu", rnd({{2, 3, 10, 10}, {4, 3, 3, 3}, {4}}),
       [=](In a) {
         return conv_relu(a[0], a[1], a[2], one, one, one, false, zero, int64_t{1}).tensor();
       }},
  };
}

// Every oneDNN-backed family from kThreads threads at once, each thread cycling through its
// own inputs: a primitive shared through the cache must give each call its own temporaries.
// Before calls had their own scratchpads, "mm 33x17x9" went wrong in about 1 of 1,500 calls.
TEST(ConcurrentKernels, OneDnnFamiliesMatchTheirSingleThreadedResults) {
  constexpr int kInputs = 8;  // per thread
  const int calls = 1500 / kSlowdown;
  for (const Case& c : OneDnnCases()) {
    SCOPED_TRACE(c.name);
    std::vector<std::vector<Tensor>> inputs;
    std::vector<Tensor> want;
    for (int i = 0; i < kThreads * kInputs; ++i) {
      inputs.push_back(c.inputs(static_cast<uint32_t>(i)));
      want.push_back(c.call(inputs.back()));
    }
    std::atomic<int> wrong{0};
    OnThreads(kThreads, [&](int t) {
      for (int k = 0; k < calls; ++k) {
        const int i = t * kInputs + k % kInputs;
        if (!SameBits(c.call(inputs[i]), want[i])) wrong.fetch_add(1);
      }
    });
    EXPECT_EQ(wrong.load(), 0) << "of " << kThreads * calls << " calls";
  }
}

// ---- the op table ----------------------------------------------------------------------------

BoxedKernel Tag(std::string tag) {
  return [tag](const OpInfo&, Stack& s) {
    s.clear();
    s.emplace_back(tag);
  };
}

// Calls, lookups, registrations, the legal set, the fallback handler, new ops, counters and
// dumps all at once on one table.
TEST(ConcurrentOpTable, EveryOperationAtOnce) {
  OpTable table;
  auto base = table.RegisterKernel("stress::op", DeviceType::kCPU, Tag("kernel"), "base");
  auto comp = table.RegisterComposite("stress::op", Tag("composite"), "composite");
  auto dec = table.RegisterDecomposition("stress::op", Tag("decomposition"), "decomposition");
  const OpId op = *table.Find("stress::op");
  const int rounds = 3000 / kSlowdown;
  std::atomic<int> wrong{0}, done{0};
  OnThreads(6, [&](int t) {
    for (int k = 0; k < rounds; ++k) {
      switch (t) {
        case 0:
        case 1: {  // callers
          Stack s;
          table.Call(op, s);
          const std::string& tag = s.at(0).to_string();
          if (tag != "kernel" && tag != "temp" && tag != "composite" && tag != "decomposition") {
            wrong.fetch_add(1);
          }
          Resolution r = table.Resolve(op, DeviceType::kCPU);
          if (r.served_by == ServedBy::kMissing) wrong.fetch_add(1);
          break;
        }
        case 2: {  // registrations that undo themselves
          RegistrationHandle h =
              table.RegisterKernel("stress::op", DeviceType::kCPU, Tag("temp"), "temp");
          break;
        }
        case 3:  // the legal set and the fallback handler
          table.SetLegal(op, k % 2 == 0);
          if (k % 16 == 0) table.SetFallback(Tag("fallback"));
          break;
        case 4: {  // new ops interned and found by name
          const std::string name = "stress::new_" + std::to_string(k % 512);
          const OpId id = table.Intern(name);
          if (table.Find(name) != id || table.Info(id).qualified != name) wrong.fetch_add(1);
          break;
        }
        case 5:  // counters and dumps
          if (table.Counters(op).calls > static_cast<uint64_t>(2 * rounds)) wrong.fetch_add(1);
          if (k % 64 == 0) table.ResetCounters();
          if (k % 256 == 0 && table.Dump().find("stress::op") == std::string::npos) {
            wrong.fetch_add(1);
          }
          break;
      }
    }
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), 6);
  EXPECT_EQ(wrong.load(), 0);
  table.SetLegal(op, true);
  Stack s;
  table.Call(op, s);
  EXPECT_EQ(s.at(0).to_string(), "kernel");
}

// ---- the host buffer cache -------------------------------------------------------------------

// Blocks of many size classes (cached and not) allocated and freed on several threads while
// another changes the limit and empties the cache: no block is ever handed to two owners.
TEST(ConcurrentHostCache, NoBlockHasTwoOwners) {
  const HostCacheStats before = HostCache();
  const int rounds = 4000 / kSlowdown;
  std::atomic<int> wrong{0};
  OnThreads(kThreads + 1, [&](int t) {
    std::mt19937 gen(static_cast<uint32_t>(t));
    if (t == kThreads) {  // the cache's owner side
      for (int k = 0; k < rounds / 8; ++k) {
        SetHostCacheLimit(k % 2 ? (uint64_t{1} << 20) : (uint64_t{64} << 20));
        if (k % 4 == 0) EmptyHostCache();
        (void)HostCache();
      }
      return;
    }
    static const size_t kSizes[] = {8, 64, 100, 1000, 4096, 70000, size_t{1} << 17, 300000};
    std::vector<std::pair<unsigned char*, size_t>> held;
    for (int k = 0; k < rounds; ++k) {
      const size_t n = kSizes[gen() % (sizeof(kSizes) / sizeof(kSizes[0]))];
      auto* p = static_cast<unsigned char*>(HostAllocate(n));
      std::memset(p, t + 1, n);
      held.emplace_back(p, n);
      if (held.size() > 6 || k == rounds - 1) {  // free the oldest, checking nobody wrote it
        while (!held.empty()) {
          auto [q, m] = held.front();
          for (size_t i = 0; i < m; i += 61) {
            if (q[i] != t + 1) {
              wrong.fetch_add(1);
              break;
            }
          }
          HostFree(q, m);
          held.erase(held.begin());
          if (held.size() <= 3 && k != rounds - 1) break;
        }
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
  SetHostCacheLimit(before.limit_bytes);
}

// ---- plans -----------------------------------------------------------------------------------

// One plan (linear + relu, fused, then a softmax) run from several threads with different
// inputs while another turns profiling on and off and reads the node times.
TEST(ConcurrentPlan, RunsFromSeveralThreadsMatchOneThread) {
  using Arg = Plan::Arg;
  Plan plan;
  const int w = plan.AddInput("w"), b = plan.AddInput("b"), x = plan.AddInput("x");
  const int wt = plan.AddNode("aten::permute", {Arg::Of(w), Arg::Const(std::vector<int64_t>{1, 0})},
                              1, "permute")[0];
  const int y = plan.AddNode("tensorbridge::addmm_act",
                             {Arg::Of(b), Arg::Of(x), Arg::Of(wt), Arg::Const(int64_t{1}),
                              Arg::Const(int64_t{1}), Arg::Const("relu"), Arg::Const("none")},
                             1, "addmm_act")[0];
  const int z = plan.AddNode(
      "aten::_softmax", {Arg::Of(y), Arg::Const(int64_t{1}), Arg::Const(false)}, 1, "softmax")[0];
  plan.SetOutputs({Arg::Of(z), Arg::Of(y)});
  plan.Finalize();

  constexpr int kInputs = 6;
  std::vector<Stack> inputs;
  std::vector<Stack> want;
  for (int i = 0; i < kThreads * kInputs; ++i) {
    const auto s = static_cast<uint32_t>(i * 3);
    inputs.push_back({Random({40, 24}, s), Random({40}, s + 1), Random({33, 24}, s + 2)});
    want.push_back(plan.Run(inputs.back()));
  }
  const int calls = 600 / kSlowdown;
  std::atomic<int> wrong{0};
  std::atomic<bool> stop{false};
  std::thread profiler([&] {
    while (!stop.load()) {
      plan.SetProfiling(true);
      const auto times = plan.NodeTimes();
      if (times.size() != 3 || times[1].op != "tensorbridge::addmm_act") wrong.fetch_add(1);
      plan.SetProfiling(false);
    }
  });
  OnThreads(kThreads, [&](int t) {
    for (int k = 0; k < calls; ++k) {
      const int i = t * kInputs + k % kInputs;
      Stack got = plan.Run(inputs[i]);
      if (got.size() != 2 || !SameBits(got[0].to_tensor(), want[i][0].to_tensor()) ||
          !SameBits(got[1].to_tensor(), want[i][1].to_tensor())) {
        wrong.fetch_add(1);
      }
    }
  });
  stop.store(true);
  profiler.join();
  EXPECT_EQ(wrong.load(), 0) << "of " << kThreads * calls << " runs";
}

}  // namespace
}  // namespace tb
