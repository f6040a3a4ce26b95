// Question: where do the nanoseconds of our side of a DLPack import and export go?
// Baseline: one malloc + free of the size of a Storage with its control block. Parts: making
// and dropping a Storage, validating a DLTensor and building the Tensor over an existing
// storage (ImportDLTensor), the whole import of a managed tensor (ImportDLPack, tensor dropped,
// so the deleter runs), copying a Tensor, and the export of a tensor plus its deleter.
// The producer's own cost (torch's export) is measured by benchmarks/bench_dlpack.py.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "interop/dlpack_convert.h"

namespace {

float g_buffer[32];
int64_t g_shape[2] = {4, 8};
int64_t g_strides[2] = {8, 1};

DLTensor Described() {
  return DLTensor{g_buffer, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, g_shape, g_strides, 0};
}

void BM_MallocFree64(benchmark::State& state) {
  for (auto _ : state) {
    void* p = std::malloc(64);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}
BENCHMARK(BM_MallocFree64);

void BM_StorageWrapAndDrop(benchmark::State& state) {
  for (auto _ : state) {
    auto s = tb::Storage::Wrap(g_buffer, sizeof(g_buffer), tb::Device{}, nullptr, nullptr);
    benchmark::DoNotOptimize(s.get());
  }
}
BENCHMARK(BM_StorageWrapAndDrop);

void BM_ImportDLTensorOverAStorage(benchmark::State& state) {
  DLTensor dl = Described();
  auto s = tb::Storage::Wrap(g_buffer, sizeof(g_buffer), tb::Device{}, nullptr, nullptr);
  for (auto _ : state) benchmark::DoNotOptimize(tb::ImportDLTensor(dl, s, false));
}
BENCHMARK(BM_ImportDLTensorOverAStorage);

void BM_ImportDLPackAndDrop(benchmark::State& state) {
  DLTensor dl = Described();
  for (auto _ : state) {
    DLManagedTensorVersioned m{};
    m.version = DLPackVersion{TB_DLPACK_MAJOR_VERSION, TB_DLPACK_MINOR_VERSION};
    m.deleter = [](DLManagedTensorVersioned*) {};
    m.dl_tensor = dl;
    benchmark::DoNotOptimize(tb::ImportDLPack(&m));
  }
}
BENCHMARK(BM_ImportDLPackAndDrop);

void BM_TensorCopy(benchmark::State& state) {
  tb::Tensor t = tb::ImportDLTensor(
      Described(), tb::Storage::Wrap(g_buffer, sizeof(g_buffer), tb::Device{}, nullptr, nullptr),
      false);
  for (auto _ : state) {
    tb::Tensor copy = t;
    benchmark::DoNotOptimize(copy.data());
  }
}
BENCHMARK(BM_TensorCopy);

void BM_ExportAndDelete(benchmark::State& state) {
  tb::Tensor t = tb::ImportDLTensor(
      Described(), tb::Storage::Wrap(g_buffer, sizeof(g_buffer), tb::Device{}, nullptr, nullptr),
      false);
  for (auto _ : state) {
    DLManagedTensorVersioned* m = tb::ExportDLPackVersioned(t);
    benchmark::DoNotOptimize(m);
    m->deleter(m);
  }
}
BENCHMARK(BM_ExportAndDelete);

}  // namespace

BENCHMARK_MAIN();
