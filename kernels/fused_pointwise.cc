// tensorbridge::pointwise(Tensor[] inputs, SymInt[] size, str program) -> Tensor[]: a group of
// element-wise ops that the compile backend's fusion pass (python/tensorbridge/_fuse.py) puts
// in place of a chain of ATen nodes, run as one loop over blocks of the output.
//
// The program is text, one instruction per ';':
//   "T f32" / "T f64"        the type every value is computed in (first instruction)
//   "op d a [b [c]]"         register d = op(a, b, c); operands are registers "rN" or
//                            constants "kVALUE" (strtod syntax: 0.5, -inf, nan)
//   "O r dtype"              an output: register r, stored as dtype (float32, float64, bool;
//                            bfloat16 or float16 from a float32 program)
//   "rsum d a" / "rmax d a"  row reductions: d = the sum / max (NaN propagating) of a over
//                            the last dimension of `size`, the same for every element of a row
//   "P r dtype"              a per-row output: register r's value of each row, of shape
//                            `size` with the last dimension 1
//   "S r dtype"              a column-sum output: register r summed over every dimension of
//                            `size` but the last (in float64, in block order), of shape `size`
//                            with every dimension but the last 1 (a norm's weight gradient)
//   "L d0 d1 .."             the outputs' layout: the dims of `size` in memory order, outer
//                            to inner (a permutation; without it, row-major). The outputs are
//                            dense in that order (a transposed value keeps its strides), and
//                            the loop runs over it. Not with "rsum", "rmax" or "S".
//   "C d [-]iA [-]iB .."     register d holds the concatenation along the last dim of `size`
//                            of inputs A, B, ... (negated where marked): each of the full
//                            rank, broadcast in every other dim, their last dims summing to
//                            size[-1]. Those inputs are read only so (rotate_half of rotary
//                            embeddings: "C r5 -i3 i2").
// Registers 0 .. len(inputs) - 1 hold the inputs, each broadcast to `size` and converted to the
// compute type as it is loaded. Outputs are dense tensors of shape `size` (row-major, or laid
// out as "L" says).
//
// The output is cut into blocks of kBlock elements; each block loads its inputs (a pointer into
// the input where it is contiguous and of the compute type, else a converting gather into a
// scratch register), runs the instructions over the block, and stores the outputs, so the
// intermediates stay in registers of a few KB (the L1 cache) and are never written to memory.
// Blocks run in parallel for large outputs; a program with a row reduction takes whole rows
// per block, so a reduction sees its whole row and fuses with its prologue and epilogue (RMS
// norm, softmax). The instruction loops are built for AVX-512, AVX2 and the baseline and picked
// by the CPU's features (kernels/fused_pointwise_math.cc).
// Programs are parsed once and cached by their text.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/cpu/isa_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/fused_pointwise_internal.h"

namespace tb {
namespace {

constexpr int64_t kBlock = 512;
constexpr int64_t kParallelMin = 1 << 15;  // elements below which one thread runs the group

using fused_pointwise::Instr;
using fused_pointwise::kOpName;
using fused_pointwise::Op;
using fused_pointwise::Program;

// An input as the loop sees it: broadcast to the output's (coalesced) shape.
struct Operand {
  const char* data = nullptr;
  DType dtype = DType::kFloat32;
  Dims strides;            // elements, per coalesced dim (0: broadcast)
  bool direct = false;     // contiguous like the output and of the compute type
  bool unit_rows = false;  // of the compute type, with unit stride along the inner dim
  bool scalar = false;     // one element for the whole output
  bool part = false;       // read only as a part of a "C" register
  int64_t width = 0;       // a part: its size along the last dim
};

template <typename T, typename In>
void Gather(const Operand& op, const Dims& shape, int64_t start, int64_t n, T* out) {
  const In* base = reinterpret_cast<const In*>(op.data);
  const int nd = static_cast<int>(shape.size());
  // The multi-index of `start`, and the offset of its row's first element.
  int64_t idx[16];
  int64_t rem = start, row = 0;
  for (int k = nd - 1; k >= 0; --k) {
    idx[k] = rem % shape[k];
    rem /= shape[k];
    if (k < nd - 1) row += idx[k] * op.strides[k];
  }
  const int64_t inner = shape[nd - 1], s = op.strides[nd - 1];
  int64_t col = idx[nd - 1], done = 0;
  while (true) {
    const int64_t m = std::min(inner - col, n - done);
    const In* x = base + row + col * s;
    if (s == 1) {
      for (int64_t i = 0; i < m; ++i) out[done + i] = kernels::Convert<T>(x[i]);
    } else {
      for (int64_t i = 0; i < m; ++i) out[done + i] = kernels::Convert<T>(x[i * s]);
    }
    done += m;
    if (done >= n) return;
    col = 0;
    for (int k = nd - 2; k >= 0; --k) {
      row += op.strides[k];
      if (++idx[k] < shape[k]) break;
      row -= idx[k] * op.strides[k];
      idx[k] = 0;
    }
  }
}

// `count` elements of a row of a part (x[j * s]), negated or not, into dst[0, count).
template <typename T, typename In>
TB_INLINE void CopyPart(const In* x, int64_t s, int64_t count, bool neg, T* dst) {
  if (neg) {
    for (int64_t j = 0; j < count; ++j) dst[j] = -kernels::Convert<T>(x[j * s]);
  } else if (s == 1) {
    for (int64_t j = 0; j < count; ++j) dst[j] = kernels::Convert<T>(x[j]);
  } else {
    for (int64_t j = 0; j < count; ++j) dst[j] = kernels::Convert<T>(x[j * s]);
  }
}

// A "C" register over elements [start, start + n) of the loop: row by row (the row's outer
// index carried from row to row, as Gather does), each part's columns from that part.
template <typename T>
void GatherCat(const Program::Cat& cat, const std::vector<Operand>& ops, const Dims& shape,
               int64_t start, int64_t n, T* out) {
  const int nd = static_cast<int>(shape.size());
  const int64_t width = shape[nd - 1];
  const size_t np = cat.parts.size();
  int64_t idx[16];
  int64_t rem = start / width;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
  }
  // Per part: the offset of the current row, and the first column it fills.
  Dims off(np, 0), first(np, 0);
  int64_t begin = 0;
  for (size_t k = 0; k < np; ++k) {
    const Operand& o = ops[cat.parts[k].first];
    for (int d = 0; d < nd - 1; ++d) off[k] += idx[d] * o.strides[d];
    first[k] = begin;
    begin += o.width;
  }
  int64_t col0 = start % width;
  for (int64_t i = 0; i < n;) {
    const int64_t m = std::min(width - col0, n - i);
    for (size_t k = 0; k < np; ++k) {
      const Operand& o = ops[cat.parts[k].first];
      const int64_t lo = std::max(first[k], col0), hi = std::min(first[k] + o.width, col0 + m);
      if (lo >= hi) continue;
      const int64_t s = o.strides[nd - 1], at = off[k] + (lo - first[k]) * s;
      const bool neg = cat.parts[k].second;
      T* dst = out + i + (lo - col0);
      if (o.dtype == (std::is_same_v<T, float> ? DType::kFloat32 : DType::kFloat64)) {
        CopyPart<T, T>(reinterpret_cast<const T*>(o.data) + at, s, hi - lo, neg, dst);
      } else {
        TB_DISPATCH(o.dtype, kOpName, TB_TYPES_ALL, [&] {
          CopyPart<T, scalar_t>(reinterpret_cast<const scalar_t*>(o.data) + at, s, hi - lo, neg,
                                dst);
        });
      }
    }
    i += m;
    col0 = 0;
    for (int d = nd - 2; d >= 0; --d) {  // the next row
      for (size_t k = 0; k < np; ++k) off[k] += ops[cat.parts[k].first].strides[d];
      if (++idx[d] < shape[d]) break;
      for (size_t k = 0; k < np; ++k) off[k] -= idx[d] * ops[cat.parts[k].first].strides[d];
      idx[d] = 0;
    }
  }
}

// d[0, n) = the sum (max, NaN propagating) of a[0, n), in 16 partial results so that the loop
// vectorises.
template <typename T, typename F>
TB_INLINE T Fold(const T* a, int64_t n, T init, F f) {
  T acc[16];
  std::fill(acc, acc + 16, init);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] = f(acc[j], a[i + j]);
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] = f(acc[j], a[i]);
  for (int w = 8; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] = f(acc[j], acc[j + w]);
  }
  return acc[0];
}

template <typename T>
void RowReduce(Op op, const T* a, int64_t n, T* d) {
  const T r = op == Op::kRowSum ? Fold(a, n, T(0), [](T x, T v) { return x + v; })
                                : Fold(a, n, -std::numeric_limits<T>::infinity(),
                                       [](T x, T v) { return v > x || v != v ? v : x; });
  std::fill(d, d + n, r);
}

// Stores every `step`-th of v[0, n) (step 1, or a row's length for a per-row output) into out
// from element `at` on, converted to out's dtype (bool: nonzero; 16-bit floats: rounded).
template <typename T>
void Store(const Tensor& out, int64_t at, const T* v, int64_t n, int64_t step) {
  TB_DISPATCH(out.dtype(), kOpName, TB_TYPES_ALL, [&] {
    scalar_t* o = static_cast<scalar_t*>(out.mutable_data()) + at;
    for (int64_t i = 0, j = 0; i < n; i += step, ++j) o[j] = kernels::Convert<scalar_t>(v[i]);
  });
}

// acc[c] += v[i] for the elements v[0, n) of flat indices from `start` on, c = column (index
// modulo `cols`): runs of whole columns, each a loop that vectorises.
template <typename T>
void AddColumns(const T* v, int64_t n, int64_t start, int64_t cols, double* acc) {
  int64_t col = start % cols;
  for (int64_t i = 0; i < n;) {
    const int64_t m = std::min(cols - col, n - i);
    for (int64_t k = 0; k < m; ++k) acc[col + k] += static_cast<double>(v[i + k]);
    i += m;
    col = 0;
  }
}

// The calling thread's scratch memory of at least `bytes` bytes (64-byte aligned, kept for
// the thread's next calls): a program's operand pointers and registers.
char* Scratch(size_t bytes) {
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t bytes = 0;
  };
  thread_local Buffer buf;
  if (buf.bytes < bytes + 64) {
    buf.data.reset(new char[bytes + 64]);
    buf.bytes = bytes + 64;
  }
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(buf.data.get()) + 63) &
                                 ~static_cast<uintptr_t>(63));
}

template <typename T>
void RunProgram(const Program& p, const std::vector<Operand>& ins, const Dims& shape, int64_t numel,
                int64_t cols, const std::vector<Tensor>& outs) {
  // Long rows are cut into blocks within a row, so that inputs with unit inner stride (a
  // broadcast bias, a strided slice) are read in place; short rows into blocks of whole rows.
  // A program with a row reduction takes whole rows per block: one long row, or as many short
  // ones as fit in kBlock.
  const int nd = static_cast<int>(shape.size());
  const int64_t inner = shape[nd - 1];
  const int64_t rows_per_block = p.rows ? std::max<int64_t>(1, kBlock / inner) : 0;
  const int64_t blk = p.rows ? rows_per_block * inner : kBlock;
  const bool by_row = p.rows ? rows_per_block == 1 : inner >= kBlock / 2 && nd > 1;
  const int64_t per_row = p.rows ? 1 : by_row ? (inner + kBlock - 1) / kBlock : 0;
  const int64_t blocks = by_row ? numel / inner * per_row : (numel + blk - 1) / blk;
  const bool parallel = numel >= kParallelMin;
  // Column sums: per share of the blocks, one row of `cols` float64 sums per "S" output; the
  // shares are added in block order at the end (the same result on every run).
  std::vector<int> col_sums(p.outputs.size(), -1);
  int num_col_sums = 0;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    if (p.col_sum[k]) col_sums[k] = num_col_sums++;
  }
  std::mutex shares_mu;
  std::vector<std::pair<int64_t, std::vector<double>>> shares;
  auto body = [&](int64_t b0, int64_t b1) {
    std::vector<double> sums(static_cast<size_t>(num_col_sums * cols), 0.0);
    // 64-byte aligned registers (whole cache lines for the vector loads and stores), in the
    // thread's scratch memory, kept from call to call.
    const size_t ptr_bytes = (p.num_regs * sizeof(const T*) + 63) / 64 * 64;
    char* scratch = Scratch(ptr_bytes + static_cast<size_t>(p.num_regs) * blk * sizeof(T));
    const T** src = reinterpret_cast<const T**>(scratch);
    T* base = reinterpret_cast<T*>(scratch + ptr_bytes);
    std::fill(src, src + p.num_regs, nullptr);
    auto reg = [&](int r) { return base + static_cast<int64_t>(r) * blk; };
    for (const auto& [r, v] : p.constants) {
      std::fill(reg(r), reg(r) + blk, static_cast<T>(v));
      src[r] = reg(r);
    }
    for (size_t k = 0; k < ins.size(); ++k) {
      if (ins[k].scalar && !ins[k].part) {
        T v{};
        TB_DISPATCH(ins[k].dtype, kOpName, TB_TYPES_ALL, [&] {
          v = kernels::Convert<T>(*reinterpret_cast<const scalar_t*>(ins[k].data));
        });
        std::fill(reg(static_cast<int>(k)), reg(static_cast<int>(k)) + blk, v);
        src[k] = reg(static_cast<int>(k));
      }
    }
    for (int64_t b = b0; b < b1; ++b) {
      int64_t start, n, row = 0, col = 0;
      if (by_row) {
        row = b / per_row;
        col = b % per_row * blk;
        start = row * inner + col;
        n = std::min(blk, inner - col);
      } else {
        start = b * blk;
        n = std::min(blk, numel - start);
      }
      for (size_t k = 0; k < ins.size(); ++k) {
        const Operand& op = ins[k];
        if (op.scalar || op.part) continue;
        if (op.direct) {
          src[k] = reinterpret_cast<const T*>(op.data) + start;
          continue;
        }
        if (by_row && op.unit_rows) {
          int64_t off = col, rem = row;
          for (int d = nd - 2; d >= 0; --d) {
            off += rem % shape[d] * op.strides[d];
            rem /= shape[d];
          }
          src[k] = reinterpret_cast<const T*>(op.data) + off;
          continue;
        }
        T* dst = reg(static_cast<int>(k));
        TB_DISPATCH(op.dtype, kOpName, TB_TYPES_ALL,
                    [&] { Gather<T, scalar_t>(op, shape, start, n, dst); });
        src[k] = dst;
      }
      for (const Program::Cat& cat : p.cats) {
        T* dst = reg(cat.reg);
        GatherCat<T>(cat, ins, shape, start, n, dst);
        src[cat.reg] = dst;
      }
      for (const Instr& in : p.code) {
        const int o = p.writes_output[in.d];
        T* d = o >= 0 ? static_cast<T*>(outs[o].mutable_data()) + start : reg(in.d);
        if (in.op == Op::kRowSum || in.op == Op::kRowMax) {
          for (int64_t s = 0; s < n; s += inner) RowReduce<T>(in.op, src[in.a] + s, inner, d + s);
        } else if (!fused_pointwise::Arith(in.op, d, src[in.a], src[in.b], src[in.c], n)) {
          fused_pointwise::Math(in.op, d, src[in.a], src[in.b], n);
        }
        src[in.d] = d;
      }
      for (size_t k = 0; k < p.outputs.size(); ++k) {
        if (p.writes_output[p.outputs[k].first] == static_cast<int>(k)) continue;  // written
        const T* v = src[p.outputs[k].first];
        if (col_sums[k] >= 0) {
          AddColumns(v, n, start, cols, sums.data() + col_sums[k] * cols);
        } else if (p.per_row[k]) {  // a row's value: its first element
          Store(outs[k], start / inner, v, n, inner);
        } else if (p.outputs[k].second == p.compute) {
          std::memcpy(static_cast<T*>(outs[k].mutable_data()) + start, v, n * sizeof(T));
        } else {
          Store(outs[k], start, v, n, 1);
        }
      }
    }
    if (num_col_sums > 0) {
      std::lock_guard<std::mutex> lock(shares_mu);
      shares.emplace_back(b0, std::move(sums));
    }
  };
  if (!parallel) {
    body(0, blocks);
  } else {
    kernels::ForEachThreadShare(blocks, body);
  }
  if (num_col_sums == 0) return;
  std::sort(shares.begin(), shares.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<double> total(static_cast<size_t>(num_col_sums * cols), 0.0);
  for (const auto& share : shares) {
    for (size_t i = 0; i < total.size(); ++i) total[i] += share.second[i];
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    if (col_sums[k] >= 0) Store(outs[k], 0, total.data() + col_sums[k] * cols, cols, 1);
  }
}

// The outputs, made in the loop's order, as views in the logical order of `size` (with the
// program's layout: the dims permuted back; without: themselves).
std::vector<Tensor> Logical(const Program& p, std::vector<Tensor> outs) {
  if (p.layout.empty()) return outs;
  std::vector<int64_t> back(p.layout.size());
  for (size_t i = 0; i < p.layout.size(); ++i) back[p.layout[i]] = static_cast<int64_t>(i);
  for (Tensor& t : outs) t = t.permute(back);
  return outs;
}

}  // namespace

std::vector<Tensor> fused_pointwise::Run(const std::vector<Tensor>& inputs,
                                         const std::vector<int64_t>& size,
                                         const std::string& program) {
  return RunParsed(inputs, size, *CachedProgram(program, static_cast<int>(inputs.size())));
}

std::vector<Tensor> fused_pointwise::RunParsed(const std::vector<Tensor>& inputs,
                                               const std::vector<int64_t>& size, const Program& p) {
  TB_CHECK(static_cast<int>(inputs.size()) == p.num_inputs, ValueError)
      << kOpName << ": the program takes " << p.num_inputs << " inputs, got " << inputs.size();
  int64_t numel = 1;
  for (int64_t s : size) {
    TB_CHECK(s >= 0, ValueError) << kOpName << ": negative size " << s;
    numel *= s;
  }
  TB_CHECK(size.size() <= 12, ValueError) << kOpName << ": at most 12 dimensions";
  const int nd = static_cast<int>(size.size());
  TB_CHECK(p.layout.empty() || static_cast<int>(p.layout.size()) == nd, ValueError)
      << kOpName << ": a layout of " << p.layout.size() << " dimensions for a size of " << nd;
  // The loop runs over the outputs' memory order: `size` in the layout's order (outer to
  // inner), the inputs' strides likewise.
  auto logical = [&](int d) { return p.layout.empty() ? d : p.layout[d]; };
  Dims psize(nd);
  for (int d = 0; d < nd; ++d) psize[d] = size[logical(d)];
  // Per input: element strides broadcast to `size`, in the loop's order.
  std::vector<Dims> strides(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    TB_CHECK(t.ndim() <= nd, ValueError) << kOpName << ": input " << k << " of shape " << t.ndim()
                                         << "-d does not broadcast to " << nd << "-d";
    TB_CHECK_SUPPORTED(!IsComplex(t.dtype()))
        << kOpName << ": dtype " << DTypeName(t.dtype()) << " is not supported";
    Dims st(nd, 0);
    const int lead = nd - static_cast<int>(t.ndim());
    const bool part = !p.part.empty() && p.part[k];
    TB_CHECK(!part || (t.ndim() == nd && nd > 0), ValueError)
        << kOpName << ": a part of a C register has " << t.ndim() << " dims, the size " << nd;
    for (int d = 0; d < t.ndim(); ++d) {
      const int64_t s = t.shape()[d];
      if (part && d == nd - 1) {  // its own width along the last dim
        st[d] = t.strides()[d];
        continue;
      }
      TB_CHECK(s == size[lead + d] || s == 1, ValueError)
          << kOpName << ": input " << k << " has size " << s << " at dim " << d
          << ", which does not broadcast to " << size[lead + d];
      st[lead + d] = s == 1 ? 0 : t.strides()[d];
    }
    strides[k] = Dims(nd);
    for (int d = 0; d < nd; ++d) strides[k][d] = st[logical(d)];
  }
  TB_CHECK(!p.rows || (nd > 0 && size[nd - 1] > 0), ValueError)
      << kOpName << ": a row reduction needs a last dimension of at least one element";
  std::vector<Tensor> outs;
  outs.reserve(p.outputs.size());
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    Dims shape = psize;
    if (p.per_row[k]) shape[nd - 1] = 1;
    if (p.col_sum[k]) {
      TB_CHECK(nd > 0, ValueError)
          << kOpName << ": a column-sum output needs at least one dimension";
      for (int d = 0; d < nd - 1; ++d) shape[d] = 1;
    }
    outs.push_back(Tensor::Empty(shape, p.outputs[k].second));
  }
  if (numel == 0) {
    for (size_t k = 0; k < outs.size(); ++k) {  // sums over no rows
      if (p.col_sum[k] && outs[k].numel() > 0) {
        std::memset(outs[k].mutable_data(), 0, outs[k].numel() * DTypeSize(outs[k].dtype()));
      }
    }
    return Logical(p, std::move(outs));
  }
  // Coalesce: drop size-1 dims, merge a dim into the one outside it where every input steps
  // over it exactly (the output is contiguous in the loop's order).
  Dims shape;
  std::vector<Operand> ops(inputs.size());
  for (int d = 0; d < nd; ++d) {
    // The reduced dim, and the dim a "C" register concatenates along, stay dims of their own.
    const bool last_of_rows = (p.rows || !p.cats.empty()) && d == nd - 1;
    if (psize[d] == 1 && !last_of_rows) continue;
    bool merge = shape.size() > 0 && !last_of_rows;
    for (size_t k = 0; k < inputs.size() && merge; ++k) {
      const Dims& cs = ops[k].strides;
      if (cs[cs.size() - 1] != strides[k][d] * psize[d]) merge = false;
    }
    if (merge) {
      shape[shape.size() - 1] *= psize[d];
      for (size_t k = 0; k < inputs.size(); ++k) {
        Dims& cs = ops[k].strides;
        cs[cs.size() - 1] = strides[k][d];
      }
    } else {
      shape.push_back(psize[d]);
      for (size_t k = 0; k < inputs.size(); ++k) ops[k].strides.push_back(strides[k][d]);
    }
  }
  if (shape.size() == 0) {
    shape.push_back(1);
    for (Operand& o : ops) o.strides.push_back(0);
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    Operand& o = ops[k];
    o.data = static_cast<const char*>(inputs[k].data());
    o.dtype = inputs[k].dtype();
    bool all_zero = true;
    for (int64_t s : o.strides) all_zero &= s == 0;
    o.scalar = all_zero;
    int64_t dense = 1;
    o.direct = o.dtype == p.compute;
    for (size_t d = shape.size(); d-- > 0;) {
      o.direct = o.direct && o.strides[d] == dense;
      dense *= shape[d];
    }
    o.unit_rows = o.dtype == p.compute && o.strides[o.strides.size() - 1] == 1;
    if (!p.part.empty() && p.part[k]) {
      o.part = true;
      o.scalar = o.direct = o.unit_rows = false;
      o.width = inputs[k].shape()[nd - 1];
    }
  }
  for (const Program::Cat& cat : p.cats) {
    int64_t total = 0;
    for (const auto& [k, neg] : cat.parts) total += ops[k].width;
    TB_CHECK(nd > 0 && total == size[nd - 1], ValueError)
        << kOpName << ": the parts of a C register take " << total << " of the last dim's "
        << (nd > 0 ? size[nd - 1] : 0) << " elements";
  }
  const int64_t cols = nd > 0 ? size.back() : 1;
  if (p.compute == DType::kFloat32) {
    RunProgram<float>(p, ops, shape, numel, cols, outs);
  } else {
    RunProgram<double>(p, ops, shape, numel, cols, outs);
  }
  return Logical(p, std::move(outs));
}

Tensor fused_pointwise::Float32Activation(const char* op, std::initializer_list<const Tensor*> in) {
  const Tensor& first = **in.begin();
  std::vector<Tensor> inputs;
  for (const Tensor* t : in) {
    if (t->dtype() != DType::kFloat32 || !t->is_contiguous() || t->shape() != first.shape()) {
      return Tensor();
    }
    inputs.push_back(*t);
  }
  // "T f32;<op> rK r0 .. rK-1;O rK float32", one text per op (cached programs are keyed by it).
  const int k = static_cast<int>(inputs.size());
  std::string text = "T f32;" + std::string(op) + " r" + std::to_string(k);
  for (int i = 0; i < k; ++i) text += " r" + std::to_string(i);
  text += ";O r" + std::to_string(k) + " float32";
  const std::vector<int64_t> size(first.shape().begin(), first.shape().end());
  return Run(inputs, size, text)[0];
}

TB_REGISTER_KERNELS(fused_pointwise) {
  OpTable& t = OpTable::Global();
  t.Define("tensorbridge::pointwise(Tensor[] inputs, SymInt[] size, str program) -> Tensor[]");
  table.RegisterKernel("tensorbridge::pointwise", DeviceType::kCPU, Boxed<&fused_pointwise::Run>(),
                       TB_HERE);
}

}  // namespace tb
