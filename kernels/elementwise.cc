#include "kernels/elementwise_internal.h"

namespace tb::kernels {

Dims BroadcastShapes(IntArrayRef a, IntArrayRef b, const char* op) {
  const size_t nd = std::max(a.size(), b.size());
  Dims out(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t x = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    int64_t y = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    if (x != y && x != 1 && y != 1) {
      TB_THROW(ValueError) << op << ": shapes " << ShapeString(a) << " and " << ShapeString(b)
                           << " cannot be broadcast together (dimension " << i << ": " << x
                           << " vs " << y << ")";
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

}  // namespace tb::kernels
