// Tests for dispatch/op_table.h: names and ids, the numbered lookup steps, registrations,
// counters, the global table. Typed (unboxed) kernels and Values: test_boxed.cc.
//
// Most tests use a local `OpTable table;` so that they are independent of each other and of
// the kernels registered into OpTable::Global() at load time; the last group checks those.
#include "dispatch/op_table.h"

#include <gtest/gtest.h>

#include "tests/cpp/test_util.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tb {
namespace {

using ::tb::testing::Contains;

// ---- helpers -----------------------------------------------------------------------------------

// A kernel that replaces its arguments with one string result naming itself.
BoxedKernel Marker(std::string tag) {
  return [tag = std::move(tag)](const OpInfo&, Stack& s) {
    s.clear();
    s.emplace_back(tag);
  };
}

// Calls `op` and returns the string its kernel left on the stack.
std::string CallTag(OpTable& table, std::string_view op, Stack args = {}) {
  table.Call(op, args);
  EXPECT_EQ(args.size(), 1u);
  if (args.size() != 1 || args[0].tag() != Value::Tag::kString) return "<no string result>";
  return args[0].to_string();
}

Tensor CpuTensor(std::vector<float> values) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(values.size())}, DType::kFloat32);
  float* p = static_cast<float*>(t.mutable_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

// A tensor that claims to live on a CUDA device; only its description is ever read.
Tensor CudaTensor() {
  static float fake[1] = {0.f};
  Device cuda{DeviceType::kCUDA, 0};
  auto storage = Storage::Wrap(fake, sizeof(fake), cuda, nullptr, nullptr);
  return Tensor(storage, fake, {1}, {1}, DType::kFloat32, cuda);
}

// ---- names and ids -----------------------------------------------------------------------------

TEST(OpTableTest, InternFindAndInfo) {
  OpTable table;
  EXPECT_EQ(table.size(), 0u);
  OpId a = table.Intern("test::a.x");
  EXPECT_EQ(table.Intern("test::a.x"), a);
  OpId b = table.Intern("test::b");
  EXPECT_NE(a, b);
  EXPECT_EQ(table.Intern("test::b.default"), b);  // torch's spelling of the default overload
  EXPECT_EQ(table.size(), 2u);

  EXPECT_EQ(table.Find("test::a.x"), std::optional<OpId>(a));
  EXPECT_EQ(table.Find("test::b.default"), std::optional<OpId>(b));
  EXPECT_EQ(table.Find("test::a"), std::nullopt);
  EXPECT_EQ(table.Find("test::zzz"), std::nullopt);
  EXPECT_TB_ERROR(kValueError, "operator name 'no_namespace' must look like 'aten::add' or",
                  table.Find("no_namespace"));
  EXPECT_TB_ERROR(kValueError, "operator name 'no_namespace' must look like 'aten::add' or",
                  table.Intern("no_namespace"));

  const OpInfo& info = table.Info(a);
  EXPECT_EQ(info.id, a);
  EXPECT_EQ(info.qualified, "test::a.x");
  EXPECT_EQ(info.name.name, "test::a");
  EXPECT_EQ(info.name.overload, "x");
  EXPECT_EQ(table.Info(b).qualified, "test::b");
  EXPECT_TB_ERROR(kValueError, "unknown op id 99", table.Info(99));
}

TEST(OpTableTest, ServedByNames) {
  EXPECT_STREQ(ServedByName(ServedBy::kKernel), "kernel");
  EXPECT_STREQ(ServedByName(ServedBy::kComposite), "composite");
  EXPECT_STREQ(ServedByName(ServedBy::kDecomposition), "decomposition");
  EXPECT_STREQ(ServedByName(ServedBy::kFallback), "fallback");
  EXPECT_STREQ(ServedByName(ServedBy::kMissing), "missing");
}

// ---- the lookup steps --------------------------------------------------------------------------

TEST(OpTableTest, KernelStep) {
  OpTable table;
  RegistrationHandle h =
      table.RegisterKernel("test::op", DeviceType::kCPU, Marker("cpu"), "a.cc:1");
  OpId op = *table.Find("test::op");
  Resolution r = table.Resolve(op, DeviceType::kCPU);
  EXPECT_EQ(r.served_by, ServedBy::kKernel);
  EXPECT_STREQ(r.reason, "kernel for this device");
  ASSERT_NE(r.kernel, nullptr);
  ASSERT_NE(r.where, nullptr);
  EXPECT_EQ(*r.where, "a.cc:1");
  EXPECT_EQ(r.Describe(), "kernel for this device (registered at a.cc:1)");
  EXPECT_EQ(CallTag(table, "test::op"), "cpu");

  Resolution cuda = table.Resolve(op, DeviceType::kCUDA);
  EXPECT_EQ(cuda.served_by, ServedBy::kMissing);
  EXPECT_EQ(cuda.kernel, nullptr);
  EXPECT_EQ(cuda.where, nullptr);
  EXPECT_STREQ(cuda.reason, "no kernel, decomposition or fallback");
  EXPECT_EQ(cuda.Describe(), "no kernel, decomposition or fallback");
}

TEST(OpTableTest, DeviceComesFromTheFirstTensorArgument) {
  OpTable table;
  auto cpu = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("cpu"), "cpu");
  auto cuda = table.RegisterKernel("test::op", DeviceType::kCUDA, Marker("cuda"), "cuda");
  EXPECT_EQ(CallTag(table, "test::op", {CudaTensor()}), "cuda");
  EXPECT_EQ(CallTag(table, "test::op", {CpuTensor({1})}), "cpu");
  // Tensors on different devices are refused, naming both.
  try {
    CallTag(table, "test::op", {1, CudaTensor(), CpuTensor({1})});
    ADD_FAILURE() << "tensors on cuda and cpu were accepted together";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_NE(std::string(e.what()).find("different devices (cuda and cpu)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(CallTag(table, "test::op", {1, 2.5}), "cpu");  // no tensor: CPU
  EXPECT_EQ(CallTag(table, "test::op"), "cpu");
}

TEST(OpTableTest, CompositeStep) {
  OpTable table;
  auto comp = table.RegisterComposite("test::op", Marker("composite"), "comp.cc:7");
  OpId op = *table.Find("test::op");
  for (DeviceType d : {DeviceType::kCPU, DeviceType::kCUDA}) {
    Resolution r = table.Resolve(op, d);
    EXPECT_EQ(r.served_by, ServedBy::kComposite);
    EXPECT_STREQ(r.reason, "composite kernel");
    ASSERT_NE(r.where, nullptr);
    EXPECT_EQ(*r.where, "comp.cc:7");
  }
  EXPECT_EQ(CallTag(table, "test::op", {CudaTensor()}), "composite");

  // A kernel for the device comes first.
  auto kernel = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("kernel"), "k");
  EXPECT_EQ(table.Resolve(op, DeviceType::kCPU).served_by, ServedBy::kKernel);
  EXPECT_EQ(table.Resolve(op, DeviceType::kCUDA).served_by, ServedBy::kComposite);
  EXPECT_EQ(CallTag(table, "test::op", {CpuTensor({1})}), "kernel");
  EXPECT_EQ(CallTag(table, "test::op", {CudaTensor()}), "composite");
}

TEST(OpTableTest, DecompositionWhenThereIsNoKernel) {
  OpTable table;
  auto dec = table.RegisterDecomposition("test::op", Marker("decomposition"), "dec.cc:3");
  OpId op = *table.Find("test::op");
  Resolution r = table.Resolve(op, DeviceType::kCPU);
  EXPECT_EQ(r.served_by, ServedBy::kDecomposition);
  EXPECT_STREQ(r.reason, "decomposition (no kernel for this device)");
  ASSERT_NE(r.where, nullptr);
  EXPECT_EQ(*r.where, "dec.cc:3");
  EXPECT_EQ(CallTag(table, "test::op"), "decomposition");

  auto kernel = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("kernel"), "k");
  EXPECT_EQ(CallTag(table, "test::op"), "kernel");
  EXPECT_EQ(CallTag(table, "test::op", {CudaTensor()}), "decomposition");
  // A composite comes before a decomposition.
  auto comp = table.RegisterComposite("test::op", Marker("composite"), "c");
  EXPECT_EQ(CallTag(table, "test::op", {CudaTensor()}), "composite");
}

TEST(OpTableTest, DecompositionWhenTheOpIsNotLegal) {
  OpTable table;
  auto kernel = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("kernel"), "k");
  auto comp = table.RegisterComposite("test::op", Marker("composite"), "c");
  auto dec = table.RegisterDecomposition("test::op", Marker("decomposition"), "d");
  OpId op = *table.Find("test::op");
  EXPECT_TRUE(table.IsLegal(op));
  EXPECT_EQ(CallTag(table, "test::op"), "kernel");

  table.SetLegal(op, false);
  EXPECT_FALSE(table.IsLegal(op));
  Resolution r = table.Resolve(op, DeviceType::kCPU);
  EXPECT_EQ(r.served_by, ServedBy::kDecomposition);
  EXPECT_STREQ(r.reason, "decomposition (op is not in the backend-legal set)");
  EXPECT_EQ(CallTag(table, "test::op"), "decomposition");
  EXPECT_EQ(CallTag(table, "test::op", {CudaTensor()}), "decomposition");

  table.SetLegal(op, true);
  EXPECT_EQ(CallTag(table, "test::op"), "kernel");

  // Not legal and nothing to decompose into: missing, and the message says why.
  dec.reset();
  table.SetLegal(op, false);
  EXPECT_EQ(table.Resolve(op, DeviceType::kCPU).served_by, ServedBy::kMissing);
  std::string msg =
      EXPECT_TB_ERROR(kNotImplementedError,
                      "test::op has no kernel for device cpu; it has kernels for: cpu (and it",
                      CallTag(table, "test::op"));
  EXPECT_TRUE(Contains(msg, "outside the backend-legal set")) << msg;

  EXPECT_TB_ERROR(kValueError, "unknown op id 1234", table.SetLegal(1234, false));
  EXPECT_TB_ERROR(kValueError, "unknown op id 1234", table.IsLegal(1234));
}

TEST(OpTableTest, DecompositionRewritesIntoOtherTableOps) {
  OpTable table;
  // test::double(int) -> 2 * int; test::quad is decomposed into two test::double calls.
  auto dbl = table.RegisterKernel(
      "test::double", DeviceType::kCPU,
      [](const OpInfo&, Stack& s) {
        int64_t x = s.at(0).to_int();
        s.clear();
        s.emplace_back(2 * x);
      },
      "dbl");
  auto quad = table.RegisterDecomposition(
      "test::quad",
      [&table](const OpInfo&, Stack& s) {
        table.Call("test::double", s);
        table.Call("test::double", s);
      },
      "quad");
  Stack s{int64_t{5}};
  table.Call("test::quad", s);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].to_int(), 20);
  EXPECT_EQ(table.Counters(*table.Find("test::quad")).decomposition, 1u);
  EXPECT_EQ(table.Counters(*table.Find("test::double")).kernel, 2u);
}

TEST(OpTableTest, FallbackStep) {
  OpTable table;
  EXPECT_FALSE(table.has_fallback());
  std::vector<std::string> seen;
  table.SetFallback([&seen](const OpInfo& op, Stack& s) {
    seen.push_back(op.qualified);
    size_t n = s.size();
    s.clear();
    s.emplace_back("fallback with " + std::to_string(n));
  });
  EXPECT_TRUE(table.has_fallback());

  OpId op = table.Intern("test::nothing.here");
  Resolution r = table.Resolve(op, DeviceType::kCPU);
  EXPECT_EQ(r.served_by, ServedBy::kFallback);
  EXPECT_STREQ(r.reason, "fallback handler (no kernel registered)");
  EXPECT_NE(r.kernel, nullptr);
  EXPECT_EQ(r.where, nullptr);
  EXPECT_EQ(CallTag(table, "test::nothing.here", {1, 2, 3}), "fallback with 3");
  EXPECT_EQ(seen, (std::vector<std::string>{"test::nothing.here"}));

  // Kernels, composites and decompositions all come before the fallback.
  auto kernel = table.RegisterKernel("test::k", DeviceType::kCPU, Marker("kernel"), "k");
  auto dec = table.RegisterDecomposition("test::d", Marker("decomposition"), "d");
  EXPECT_EQ(CallTag(table, "test::k"), "kernel");
  EXPECT_EQ(CallTag(table, "test::d"), "decomposition");
  EXPECT_EQ(CallTag(table, "test::k", {CudaTensor()}), "fallback with 1");  // no cuda kernel
  EXPECT_EQ(seen.size(), 2u);

  // Replacing and removing the handler.
  table.SetFallback(Marker("second"));
  EXPECT_EQ(CallTag(table, "test::nothing.here"), "second");
  table.SetFallback(nullptr);
  EXPECT_FALSE(table.has_fallback());
  EXPECT_EQ(table.Resolve(op, DeviceType::kCPU).served_by, ServedBy::kMissing);
  EXPECT_TB_ERROR(kNotImplementedError,
                  "test::nothing.here has no kernel for device cpu; it has no kernels. No",
                  CallTag(table, "test::nothing.here"));
}

TEST(OpTableTest, MissingNamesTheOpDevicesAndOtherOverloads) {
  OpTable table;
  auto cuda = table.RegisterKernel("test::foo", DeviceType::kCUDA, Marker("cuda"), "c");
  auto rocm = table.RegisterKernel("test::foo", DeviceType::kROCM, Marker("rocm"), "r");
  auto other = table.RegisterKernel("test::foo.other", DeviceType::kCPU, Marker("o"), "o");
  table.Intern("test::foo.nokernels");  // an overload without kernels is not suggested
  auto bar = table.RegisterKernel("test::bar", DeviceType::kCPU, Marker("bar"), "b");

  std::string msg =
      EXPECT_TB_ERROR(kNotImplementedError,
                      "test::foo has no kernel for device cpu; it has kernels for: cuda rocm.",
                      CallTag(table, "test::foo", {CpuTensor({1})}));
  EXPECT_TRUE(Contains(msg, "test::foo has no kernel for device cpu")) << msg;
  EXPECT_TRUE(Contains(msg, "it has kernels for: cuda rocm")) << msg;
  EXPECT_TRUE(Contains(msg, "Registered overloads of test::foo: test::foo.other")) << msg;
  EXPECT_FALSE(Contains(msg, "nokernels")) << msg;
  EXPECT_FALSE(Contains(msg, "test::bar")) << msg;
  EXPECT_TRUE(Contains(msg, "No fallback handler is installed")) << msg;

  std::string none = EXPECT_TB_ERROR(
      kNotImplementedError, "test::foo.nokernels has no kernel for device cpu; it has no kernels.",
      CallTag(table, "test::foo.nokernels"));
  EXPECT_TRUE(Contains(none, "test::foo.nokernels has no kernel for device cpu")) << none;
  EXPECT_TRUE(Contains(none, "it has no kernels")) << none;
  EXPECT_TRUE(Contains(none, "test::foo.other")) << none;

  std::string unknown = EXPECT_TB_ERROR(
      kNotImplementedError, "test::unknown is not a known op: nothing was registered for it",
      CallTag(table, "test::unknown"));
  EXPECT_TRUE(Contains(unknown, "test::unknown")) << unknown;
  EXPECT_TRUE(Contains(unknown, "not a known op")) << unknown;

  Stack s;
  EXPECT_TB_ERROR(kValueError, "unknown op id 12345", table.Call(OpId{12345}, s));
}

// Resolve() is public and takes an OpId as Info(), Counters() and SetLegal() do, but it does
// not check it: an id the table never issued dereferences a null entry (a crash) instead of
// raising ValueError. Run in a child process so that the crash fails only this test.
TEST(OpTableDeathTest, ResolveOfAnUnknownIdIsAValueError) {
  EXPECT_EXIT(
      {
        OpTable table;
        table.Intern("test::one");
        int code = 2;
        try {
          table.Resolve(OpId{7}, DeviceType::kCPU);
        } catch (const Error& e) {
          code = e.kind() == ErrorKind::kValueError ? 0 : 1;
        }
        std::exit(code);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---- registration handles ----------------------------------------------------------------------

TEST(OpTableTest, LatestRegistrationWinsAndResetRestoresThePrevious) {
  OpTable table;
  RegistrationHandle a = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("a"), "a");
  EXPECT_EQ(CallTag(table, "test::op"), "a");
  RegistrationHandle b = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("b"), "b");
  EXPECT_EQ(CallTag(table, "test::op"), "b");
  EXPECT_EQ(*table.Resolve(*table.Find("test::op"), DeviceType::kCPU).where, "b");
  {
    RegistrationHandle c = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("c"), "c");
    EXPECT_EQ(CallTag(table, "test::op"), "c");
  }  // destruction unregisters
  EXPECT_EQ(CallTag(table, "test::op"), "b");
  b.reset();
  EXPECT_EQ(CallTag(table, "test::op"), "a");
  b.reset();  // a second reset does nothing
  EXPECT_EQ(CallTag(table, "test::op"), "a");
  a.reset();
  EXPECT_EQ(table.Resolve(*table.Find("test::op"), DeviceType::kCPU).served_by, ServedBy::kMissing);

  // Removing an older registration leaves the newer one serving.
  RegistrationHandle x = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("x"), "x");
  RegistrationHandle y = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("y"), "y");
  x.reset();
  EXPECT_EQ(CallTag(table, "test::op"), "y");
  y.reset();
  EXPECT_EQ(table.Resolve(*table.Find("test::op"), DeviceType::kCPU).served_by, ServedBy::kMissing);
}

TEST(OpTableTest, HandlesMoveAndRelease) {
  OpTable table;
  RegistrationHandle h = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("a"), "a");
  RegistrationHandle moved(std::move(h));
  h.reset();  // NOLINT(bugprone-use-after-move): a moved-from handle owns nothing
  EXPECT_EQ(CallTag(table, "test::op"), "a");

  // Move assignment drops the registration the target held.
  moved = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("b"), "b");
  EXPECT_EQ(CallTag(table, "test::op"), "b");
  moved.reset();
  EXPECT_EQ(table.Resolve(*table.Find("test::op"), DeviceType::kCPU).served_by, ServedBy::kMissing);

  // release() keeps the registration for the life of the table.
  {
    RegistrationHandle kept = table.RegisterComposite("test::op", Marker("kept"), "kept");
    kept.release();
  }
  EXPECT_EQ(CallTag(table, "test::op"), "kept");

  // Slots are independent: removing a kernel leaves the composite and decomposition.
  RegistrationHandle k = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("k"), "k");
  RegistrationHandle d = table.RegisterDecomposition("test::op", Marker("d"), "d");
  EXPECT_EQ(CallTag(table, "test::op"), "k");
  k.reset();
  EXPECT_EQ(CallTag(table, "test::op"), "kept");
}

TEST(OpTableTest, EmptyKernelsAreRefused) {
  OpTable table;
  EXPECT_TB_ERROR(kValueError, "registering an empty kernel for test::op",
                  table.RegisterKernel("test::op", DeviceType::kCPU, BoxedKernel(), "x"));
  EXPECT_TB_ERROR(kValueError, "registering an empty kernel for test::op",
                  table.RegisterComposite("test::op", nullptr, "x"));
  EXPECT_TB_ERROR(kValueError, "operator name 'no_namespace' must look like 'aten::add' or",
                  table.RegisterKernel("no_namespace", DeviceType::kCPU, Marker("m"), "x"));
}

// Lookups take no lock: calls racing with registrations see either the old or the new kernel,
// never a freed one (AddressSanitizer checks the "never freed" part).
TEST(OpTableTest, CallsRaceWithRegistrations) {
  OpTable table;
  auto base = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("base"), "base");
  const OpId op = *table.Find("test::op");  // Call(OpId) is the lock-free path
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, calls{0};
  std::vector<std::thread> callers;
  callers.reserve(2);
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&] {
      while (!stop.load()) {
        Stack s;
        table.Call(op, s);
        const std::string& tag = s.at(0).to_string();
        if (tag != "base" && tag != "temp") wrong.fetch_add(1);
        calls.fetch_add(1);
      }
    });
  }
  // Register and unregister while the callers run (no yield: on a loaded machine a yielding
  // thread can wait a whole time slice per iteration).
  int registrations = 0;
  while (registrations < 200 || calls.load() < 2000) {
    RegistrationHandle temp = table.RegisterKernel("test::op", DeviceType::kCPU, Marker("temp"),
                                                   "temp " + std::to_string(registrations));
    ++registrations;
  }
  stop.store(true);
  for (auto& th : callers) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(CallTag(table, "test::op"), "base");
  EXPECT_EQ(table.Counters(op).kernel, static_cast<uint64_t>(calls.load()) + 1);
}

// ---- counters, profiling, dump -----------------------------------------------------------------

TEST(OpTableTest, CountersCountEachStep) {
  OpTable table;
  auto k = table.RegisterKernel("test::k", DeviceType::kCPU, Marker("k"), "k");
  auto c = table.RegisterComposite("test::c", Marker("c"), "c");
  auto d = table.RegisterDecomposition("test::d", Marker("d"), "d");
  OpId f = table.Intern("test::f");
  table.SetFallback(Marker("f"));
  OpId kid = *table.Find("test::k");

  for (int i = 0; i < 3; ++i) CallTag(table, "test::k");
  CallTag(table, "test::k", {CudaTensor()});  // served by the fallback
  for (int i = 0; i < 2; ++i) CallTag(table, "test::c");
  CallTag(table, "test::d");
  for (int i = 0; i < 4; ++i) CallTag(table, "test::f");

  OpCounters ck = table.Counters(kid);
  EXPECT_EQ(ck.calls, 4u);
  EXPECT_EQ(ck.kernel, 3u);
  EXPECT_EQ(ck.fallback, 1u);
  EXPECT_EQ(ck.composite, 0u);
  EXPECT_EQ(ck.decomposition, 0u);
  EXPECT_EQ(ck.time_ns, 0u);  // profiling is off
  OpCounters cc = table.Counters(*table.Find("test::c"));
  EXPECT_EQ(cc.calls, 2u);
  EXPECT_EQ(cc.composite, 2u);
  EXPECT_EQ(cc.kernel, 0u);
  OpCounters cd = table.Counters(*table.Find("test::d"));
  EXPECT_EQ(cd.calls, 1u);
  EXPECT_EQ(cd.decomposition, 1u);
  OpCounters cf = table.Counters(f);
  EXPECT_EQ(cf.calls, 4u);
  EXPECT_EQ(cf.fallback, 4u);

  table.ResetCounters();
  for (OpId op : {kid, *table.Find("test::c"), *table.Find("test::d"), f}) {
    OpCounters z = table.Counters(op);
    EXPECT_EQ(z.calls + z.kernel + z.composite + z.decomposition + z.fallback + z.time_ns, 0u);
  }
  CallTag(table, "test::k");
  EXPECT_EQ(table.Counters(kid).kernel, 1u);
  EXPECT_TB_ERROR(kValueError, "unknown op id 999", table.Counters(999));
}

TEST(OpTableTest, ProfilingAccumulatesTime) {
  OpTable table;
  auto k = table.RegisterKernel(
      "test::slow", DeviceType::kCPU,
      [](const OpInfo&, Stack& s) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); },
      "slow");
  OpId op = *table.Find("test::slow");
  EXPECT_FALSE(table.profiling());
  Stack s;
  table.Call(op, s);
  EXPECT_EQ(table.Counters(op).time_ns, 0u);
  table.SetProfiling(true);
  EXPECT_TRUE(table.profiling());
  table.Call(op, s);
  uint64_t t = table.Counters(op).time_ns;
  EXPECT_GE(t, 2'000'000u);
  table.SetProfiling(false);
  table.Call(op, s);
  EXPECT_EQ(table.Counters(op).time_ns, t);
  EXPECT_EQ(table.Counters(op).calls, 3u);
}

TEST(OpTableTest, DumpListsOpsAndRegistrations) {
  OpTable table;
  auto k = table.RegisterKernel("test::dumped.Tensor", DeviceType::kCPU, Marker("k"), "k.cc:1");
  auto kc = table.RegisterKernel("test::dumped.Tensor", DeviceType::kCUDA, Marker("k"), "k.cc:2");
  auto c = table.RegisterComposite("test::dumped.Tensor", Marker("c"), "comp.cc:2");
  auto d = table.RegisterDecomposition("test::other", Marker("d"), "dec.cc:3");
  table.SetLegal(*table.Find("test::other"), false);
  std::string dump = table.Dump();
  EXPECT_TRUE(Contains(dump, "test::dumped.Tensor\n")) << dump;
  EXPECT_TRUE(Contains(dump, "  kernel[cpu]: k.cc:1\n")) << dump;
  EXPECT_TRUE(Contains(dump, "  kernel[cuda]: k.cc:2\n")) << dump;
  EXPECT_TRUE(Contains(dump, "  composite: comp.cc:2\n")) << dump;
  EXPECT_TRUE(Contains(dump, "test::other [not legal: decomposed]\n")) << dump;
  EXPECT_TRUE(Contains(dump, "  decomposition: dec.cc:3\n")) << dump;
  k.reset();
  EXPECT_FALSE(Contains(table.Dump(), "k.cc:1")) << table.Dump();
}

// ---- the global table ----------------------------------------------------------------------

TEST(GlobalOpTableTest, BuiltInKernelsAreRegistered) {
  OpTable& g = OpTable::Global();
  EXPECT_EQ(&g, &OpTable::Global());
  struct Expect {
    const char* op;
    const char* file;
  };
  for (const Expect& e :
       {Expect{"aten::add.Tensor", "kernels/binary.cc"},
        Expect{"aten::sub.Tensor", "kernels/binary.cc"},
        Expect{"aten::mul.Tensor", "kernels/binary.cc"}, Expect{"aten::mm", "kernels/matmul.cc"},
        Expect{"aten::relu", "kernels/activation.cc"},
        Expect{"aten::gelu", "kernels/activation.cc"}}) {
    SCOPED_TRACE(e.op);
    std::optional<OpId> id = g.Find(e.op);
    ASSERT_TRUE(id.has_value());
    EXPECT_EQ(g.Info(*id).qualified, e.op);
    Resolution r = g.Resolve(*id, DeviceType::kCPU);
    EXPECT_EQ(r.served_by, ServedBy::kKernel);
    ASSERT_NE(r.where, nullptr);
    EXPECT_TRUE(Contains(*r.where, e.file)) << *r.where;
    EXPECT_TRUE(Contains(g.Dump(), e.op));
  }
  EXPECT_EQ(g.Find("aten::gelu.default"), g.Find("aten::gelu"));
}

TEST(GlobalOpTableTest, TemporaryRegistrationOnTheGlobalTable) {
  OpTable& g = OpTable::Global();
  OpId relu = *g.Find("aten::relu");
  ASSERT_FALSE(g.has_fallback());
  EXPECT_EQ(g.Resolve(relu, DeviceType::kCUDA).served_by, ServedBy::kMissing);
  {
    RegistrationHandle h =
        g.RegisterKernel("aten::relu", DeviceType::kCUDA, Marker("cuda relu"), "test_op_table.cc");
    EXPECT_EQ(g.Resolve(relu, DeviceType::kCUDA).served_by, ServedBy::kKernel);
    EXPECT_EQ(CallTag(g, "aten::relu", {CudaTensor()}), "cuda relu");
    // The CPU kernel is untouched.
    EXPECT_TRUE(Contains(*g.Resolve(relu, DeviceType::kCPU).where, "kernels/activation.cc"));
  }
  EXPECT_EQ(g.Resolve(relu, DeviceType::kCUDA).served_by, ServedBy::kMissing);
  std::string msg = EXPECT_TB_ERROR(
      kNotImplementedError, "aten::relu has no kernel for device cuda; it has kernels for: cpu. No",
      CallTag(g, "aten::relu", {CudaTensor()}));
  EXPECT_TRUE(Contains(msg, "aten::relu has no kernel for device cuda")) << msg;
  EXPECT_TRUE(Contains(msg, "it has kernels for: cpu")) << msg;

  // Overloads are suggested from the global table too.
  std::string add = EXPECT_TB_ERROR(
      kNotImplementedError, "aten::add.Tensor has no kernel for device cuda; it has kernels for:",
      CallTag(g, "aten::add.Tensor", {CudaTensor()}));
  EXPECT_TRUE(Contains(add, "aten::add.Tensor has no kernel for device cuda")) << add;
}

}  // namespace
}  // namespace tb
