// Unique elements and slices: aten::_unique2, _unique, unique_dim, unique_consecutive.
//
// As torch's CPU kernels: _unique2 / _unique / unique_dim always sort (the `sorted` flag only
// says the caller wants it); NaNs sort last and no two NaNs are equal, so each stays its own
// value. unique_consecutive collapses runs of equal neighbours. With a dim, the unit is the
// slice along that dim, compared lexicographically. inverse maps each element (or slice) to
// its group; counts is the size of each group; both are int64 tensors of shape [0] when not
// asked for, as torch returns them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/promote_broadcast.h"

namespace tb {
namespace {

// Elements as comparable keys: int64 for integers and bool, double for floating types.
template <typename T>
using Key = std::conditional_t<kernels::kIsFloating<T>, double, int64_t>;

template <typename T>
std::vector<Key<T>> Keys(const Tensor& c) {
  const T* p = c.data_as<const T>();
  std::vector<Key<T>> k(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) k[i] = kernels::Convert<Key<T>>(p[i]);
  return k;
}

template <typename K>
bool IsNan(K v) {
  if constexpr (std::is_floating_point_v<K>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Groups of the units [0, n) (each `width` keys long at keys + i * width), in `order`: a new
// group starts wherever a unit differs from the one before it. Returns the group of each unit
// and the first unit (in `order`) of each group.
template <typename K>
void Group(const std::vector<K>& keys, int64_t width, const std::vector<int64_t>& order,
           std::vector<int64_t>* group_of, std::vector<int64_t>* firsts,
           std::vector<int64_t>* counts) {
  group_of->assign(order.size(), 0);
  int64_t g = -1;
  for (size_t r = 0; r < order.size(); ++r) {
    bool same = r > 0;
    for (int64_t j = 0; same && j < width; ++j) {
      same = keys[order[r] * width + j] == keys[order[r - 1] * width + j];
    }
    if (!same) {
      ++g;
      firsts->push_back(order[r]);
      counts->push_back(0);
    }
    (*group_of)[order[r]] = g;
    ++counts->back();
  }
}

// Lexicographic order of units with NaN after every number.
template <typename K>
bool UnitLess(const std::vector<K>& keys, int64_t width, int64_t a, int64_t b) {
  for (int64_t j = 0; j < width; ++j) {
    const K x = keys[a * width + j], y = keys[b * width + j];
    const bool xn = IsNan(x), yn = IsNan(y);
    if (xn || yn) {
      if (xn != yn) return yn;
      continue;
    }
    if (x < y) return true;
    if (y < x) return false;
  }
  return false;
}

// The shared body: units are the elements (dim unset) or the slices along dim.
std::tuple<Tensor, Tensor, Tensor> UniqueImpl(const Tensor& self, std::optional<int64_t> dim,
                                              bool sort, bool return_inverse, bool return_counts,
                                              const char* op) {
  kernels::CheckHost(op, self);
  Tensor units;  // [n, width]
  int64_t d = 0;
  if (dim) {
    TB_CHECK(self.ndim() > 0, IndexError) << op << ": dim given for a 0-d tensor";
    d = WrapDim(*dim, self.ndim(), op);
    Tensor moved = self.transpose(0, d).contiguous();
    const int64_t n = self.size(d);
    TB_CHECK(n > 0 || self.numel() == 0, ValueError) << op << ": dim " << d << " is empty";
    units = moved.reshape({n, n == 0 ? 0 : moved.numel() / n});
  } else {
    units = self.contiguous().reshape({self.numel(), 1});
  }
  const int64_t n = units.size(0), width = units.size(1);
  std::vector<int64_t> group_of, firsts, counts;
  TB_DISPATCH(self.dtype(), op, TB_TYPES_ALL, [&] {
    using T = scalar_t;
    const std::vector<Key<T>> keys = Keys<T>(units);
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    if constexpr (std::is_integral_v<Key<T>>) {
      if (sort && width == 1) {
        // Integer elements: sort the values alone, then find each element's group by binary
        // search (no NaN, so equal values are exactly one group).
        std::vector<int64_t> vals(keys.begin(), keys.end());
        std::sort(vals.begin(), vals.end());
        vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
        group_of.assign(static_cast<size_t>(n), 0);
        counts.assign(vals.size(), 0);
        firsts.assign(vals.size(), -1);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t g = std::lower_bound(vals.begin(), vals.end(), keys[i]) - vals.begin();
          group_of[i] = g;
          ++counts[g];
          if (firsts[g] < 0) firsts[g] = i;
        }
        return;
      }
    }
    if (sort && width == 1) {
      // Elements: sort (key, position) pairs directly, NaN last, ties by position.
      using K = Key<T>;
      std::vector<std::pair<K, int64_t>> kv(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) kv[i] = {keys[i], i};
      std::sort(kv.begin(), kv.end(), [](const auto& a, const auto& b) {
        const bool an = IsNan(a.first), bn = IsNan(b.first);
        if (an || bn) return an != bn ? bn : a.second < b.second;
        return a.first < b.first || (a.first == b.first && a.second < b.second);
      });
      for (int64_t i = 0; i < n; ++i) order[i] = kv[i].second;
    } else if (sort) {
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return UnitLess(keys, width, a, b); });
    }
    Group(keys, width, order, &group_of, &firsts, &counts);
  });
  Tensor values;
  if (dim) {
    values = GatherBlocks(self, d, firsts);
  } else {
    values = GatherBlocks(units.reshape({n}), 0, firsts);
  }
  Tensor inverse = Tensor::Empty({0}, DType::kInt64);
  if (return_inverse) {
    inverse = dim ? Tensor::Empty({n}, DType::kInt64) : Tensor::Empty(self.shape(), DType::kInt64);
    std::copy(group_of.begin(), group_of.end(), inverse.data_as<int64_t>());
  }
  Tensor cnt = Tensor::Empty({0}, DType::kInt64);
  if (return_counts) {
    cnt = Tensor::Empty({static_cast<int64_t>(counts.size())}, DType::kInt64);
    std::copy(counts.begin(), counts.end(), cnt.data_as<int64_t>());
  }
  return {values, inverse, cnt};
}

std::tuple<Tensor, Tensor, Tensor> Unique2(const Tensor& self, bool /*sorted*/, bool return_inverse,
                                           bool return_counts) {
  return UniqueImpl(self, std::nullopt, true, return_inverse, return_counts, "aten::_unique2");
}

std::tuple<Tensor, Tensor> Unique(const Tensor& self, bool /*sorted*/, bool return_inverse) {
  auto [v, inv, c] = UniqueImpl(self, std::nullopt, true, return_inverse, false, "aten::_unique");
  return {v, inv};
}

std::tuple<Tensor, Tensor, Tensor> UniqueDim(const Tensor& self, int64_t dim, bool /*sorted*/,
                                             bool return_inverse, bool return_counts) {
  return UniqueImpl(self, dim, true, return_inverse, return_counts, "aten::unique_dim");
}

std::tuple<Tensor, Tensor, Tensor> UniqueConsecutive(const Tensor& self, bool return_inverse,
                                                     bool return_counts,
                                                     std::optional<int64_t> dim) {
  return UniqueImpl(self, dim, false, return_inverse, return_counts, "aten::unique_consecutive");
}

std::tuple<Tensor, Tensor, Tensor> UniqueDimConsecutive(const Tensor& self, int64_t dim,
                                                        bool return_inverse, bool return_counts) {
  return UniqueImpl(self, dim, false, return_inverse, return_counts,
                    "aten::unique_dim_consecutive");
}

}  // namespace

TB_REGISTER_KERNELS(unique) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::_unique2", cpu, Boxed<&Unique2>(), TB_HERE);
  table.RegisterKernel("aten::_unique", cpu, Boxed<&Unique>(), TB_HERE);
  table.RegisterKernel("aten::unique_dim", cpu, Boxed<&UniqueDim>(), TB_HERE);
  table.RegisterKernel("aten::unique_consecutive", cpu, Boxed<&UniqueConsecutive>(), TB_HERE);
  table.RegisterKernel("aten::unique_dim_consecutive", cpu, Boxed<&UniqueDimConsecutive>(),
                       TB_HERE);
}

}  // namespace tb
