// Question: what does one call through the op table cost, apart from the kernel?
// Baseline: calling the same no-op kernel directly. Also: lookup alone, and the import of a
// DLPack tensor (the per-tensor cost of wrapping foreign memory).
#include <benchmark/benchmark.h>

#include "dispatch/op_table.h"
#include "interop/dlpack_convert.h"

namespace {

tb::Tensor Identity(const tb::Tensor& x) { return x; }

void BM_DirectCall(benchmark::State& state) {
  tb::Tensor x = tb::Tensor::Empty({4}, tb::DType::kFloat32);
  for (auto _ : state) benchmark::DoNotOptimize(Identity(x));
}
BENCHMARK(BM_DirectCall);

void BM_TableLookup(benchmark::State& state) {
  tb::OpTable table;
  auto handle = table.RegisterKernel("bench::identity", tb::DeviceType::kCPU,
                                     tb::Boxed<&Identity>(), "bench");
  tb::OpId id = *table.Find("bench::identity");
  for (auto _ : state) benchmark::DoNotOptimize(table.Resolve(id, tb::DeviceType::kCPU));
}
BENCHMARK(BM_TableLookup);

void BM_TableBoxedCall(benchmark::State& state) {
  tb::OpTable table;
  auto handle = table.RegisterKernel("bench::identity", tb::DeviceType::kCPU,
                                     tb::Boxed<&Identity>(), "bench");
  tb::OpId id = *table.Find("bench::identity");
  tb::Tensor x = tb::Tensor::Empty({4}, tb::DType::kFloat32);
  tb::Stack stack;
  stack.reserve(4);
  for (auto _ : state) {
    stack.clear();
    stack.emplace_back(x);
    table.Call(id, stack);
    benchmark::DoNotOptimize(stack.data());
  }
}
BENCHMARK(BM_TableBoxedCall);

void BM_ImportDLPack(benchmark::State& state) {
  float data[6] = {};
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned m{};
  m.version = {1, 3};
  m.dl_tensor.data = data;
  m.dl_tensor.device = {kDLCPU, 0};
  m.dl_tensor.ndim = 2;
  m.dl_tensor.dtype = {kDLFloat, 32, 1};
  m.dl_tensor.shape = shape;
  m.deleter = nullptr;  // static memory: nothing to release
  for (auto _ : state) benchmark::DoNotOptimize(tb::ImportDLPack(&m));
}
BENCHMARK(BM_ImportDLPack);

}  // namespace

BENCHMARK_MAIN();
