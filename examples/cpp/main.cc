// Wraps a DLPack tensor and calls aten::add.Tensor through the op table, as a C++ user of
// the installed library would (build: see CMakeLists.txt). Exits non-zero on a wrong result.
#include <cstdio>
#include <vector>

#include "dispatch/op_table.h"
#include "interop/dlpack_convert.h"

namespace {
int deleted = 0;
}

int main() {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  auto* managed = new DLManagedTensorVersioned{};
  managed->version = {1, 3};
  managed->deleter = [](DLManagedTensorVersioned* self) {
    ++deleted;
    delete self;
  };
  managed->dl_tensor.data = data.data();
  managed->dl_tensor.device = {kDLCPU, 0};
  managed->dl_tensor.ndim = 2;
  managed->dl_tensor.dtype = {kDLFloat, 32, 1};
  managed->dl_tensor.shape = shape;
  {
    tb::Tensor x = tb::ImportDLPack(managed);
    if (x.data() != data.data()) {
      std::puts("FAIL: import copied the data");
      return 1;
    }
    tb::Stack stack = {x, x, tb::Scalar(int64_t{1})};
    tb::OpTable::Global().Call("aten::add.Tensor", stack);
    const tb::Tensor& y = stack.at(0).to_tensor();
    for (int i = 0; i < 6; ++i) {
      if (y.data_as<float>()[i] != 2 * data[i]) {
        std::printf("FAIL: element %d is %f\n", i, y.data_as<float>()[i]);
        return 1;
      }
    }
  }
  if (deleted != 1) {
    std::printf("FAIL: deleter ran %d times\n", deleted);
    return 1;
  }
  std::puts("consumer OK: find_package(tensorbridge), zero-copy import, aten::add.Tensor");
  return 0;
}
