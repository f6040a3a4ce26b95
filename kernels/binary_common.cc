// The element-wise driver and type rules shared by the binary, comparison and ternary
// kernels (declared in kernels/binary_internal.h).
#include <algorithm>
#include <string>

#include "kernels/binary_internal.h"
#include "kernels/layout.h"

namespace tb::kernels {
namespace {

// `in` reads element i exactly where `out` writes element i (same shape assumed).
bool SameElements(const Tensor& in, const Tensor& out) {
  if (in.data() != out.data() || in.element_size() != out.element_size()) return false;
  for (int64_t d = 0; d < out.ndim(); ++d) {
    if (out.shape()[d] != 1 && in.strides()[d] != out.strides()[d]) return false;
  }
  return true;
}

// Two elements of `t` at one address (a broadcast dimension).
bool HasInternalOverlap(const Tensor& t) {
  for (int64_t d = 0; d < t.ndim(); ++d) {
    if (t.shape()[d] > 1 && t.strides()[d] == 0) return true;
  }
  return false;
}

}  // namespace

bool CanCast(DType from, DType to) {
  if (IsComplex(from) && !IsComplex(to)) return false;
  if (IsFloatingPoint(from) && IsIntegral(to, true)) return false;
  if (from != DType::kBool && to == DType::kBool) return false;
  return true;
}

DType ScalarDType(const Scalar& s) {
  if (s.is_bool()) return DType::kBool;
  if (s.is_integral()) return DType::kInt64;
  if (s.is_complex()) return DType::kComplex128;
  return DType::kFloat64;
}

Tensor WrapScalar(const Scalar& s) { return WrapNumber(Value(s)); }

void CheckAlpha(const char* op, DType result, const Scalar& alpha, const char* name) {
  TB_CHECK(IsComplex(result) || !alpha.is_complex(), RuntimeError)
      << op << ": for non-complex input tensors, argument " << name
      << " must not be a complex number";
  TB_CHECK(!alpha.is_bool() || result == DType::kBool, TypeError)
      << op << ": boolean " << name << " only supported for bool results, got "
      << DTypeName(result);
  TB_CHECK(IsFloatingPoint(result) || IsComplex(result) || !alpha.is_floating_point(), TypeError)
      << op << ": for integral input tensors (result " << DTypeName(result) << "), argument "
      << name << " must not be a floating point number, got " << alpha.to_double();
}

void CheckIntegral(const char* op, DType dtype, bool allow_bool) {
  TB_CHECK(IsIntegral(dtype, allow_bool), TypeError)
      << op << ": supports only integer" << (allow_bool ? " and bool" : "") << " tensors, got "
      << DTypeName(dtype);
}

void CheckNotBool(const char* op, DType dtype) {
  TB_CHECK(dtype != DType::kBool, TypeError) << op << ": not implemented for bool tensors";
}

void CheckFloating(const char* op, DType dtype) {
  TB_CHECK_SUPPORTED(!IsComplex(dtype))
      << op << ": dtype " << DTypeName(dtype) << " is not supported";
  TB_CHECK(IsFloatingPoint(dtype), TypeError)
      << op << ": supports only floating-point tensors, got " << DTypeName(dtype);
}

Tensor Elementwise(const char* op, const std::vector<Input>& inputs, DType result,
                   const Tensor* dest, const ElementwiseBody& body) {
  // New results of C-contiguous operands of one shape, already of their compute dtype (most
  // ops on small tensors): nothing to broadcast, permute or convert.
  if (dest == nullptr && !inputs.empty()) {
    const IntArrayRef shape0 = inputs[0].tensor->shape();
    bool plain = true;
    for (const Input& in : inputs) {
      const Tensor& t = *in.tensor;
      plain = plain && t.defined() && t.device().is_cpu() && t.dtype() == in.dtype &&
              IntArrayRef(t.shape()) == shape0 && t.is_contiguous();
    }
    if (plain) {
      std::vector<Tensor> operands;
      operands.reserve(inputs.size());
      for (const Input& in : inputs) operands.push_back(*in.tensor);
      Tensor out = Tensor::Empty(shape0, result);
      if (out.numel() > 0) body(out, operands);
      return out;
    }
  }
  std::vector<IntArrayRef> shapes;
  for (const Input& in : inputs) {
    CheckHost(op, *in.tensor);
    shapes.push_back(in.tensor->shape());
  }
  Dims shape = ::tb::BroadcastShapes(shapes, op);
  if (dest != nullptr) {
    CheckHost(op, *dest);
    TB_CHECK(IntArrayRef(dest->shape()) == IntArrayRef(shape), ValueError)
        << op << ": output with shape " << ShapeString(dest->shape())
        << " doesn't match the broadcast shape " << ShapeString(shape);
    TB_CHECK(CanCast(result, dest->dtype()), TypeError)
        << op << ": result type " << DTypeName(result)
        << " can't be cast to the desired output type " << DTypeName(dest->dtype());
    TB_CHECK(!HasInternalOverlap(*dest), ValueError)
        << op << ": more than one element of the written-to tensor (shape "
        << ShapeString(dest->shape()) << ", strides " << ShapeString(dest->strides())
        << ") refers to a single memory location; clone() it first";
    dest->mutable_data();  // BufferError for read-only memory
  }
  // The loops run over every operand permuted so that the result's innermost dimension comes
  // last: a new result is then allocated C-contiguous in that order (torch's layout for it),
  // and inputs sharing the layout take the contiguous fast paths.
  const Tensor* few[4];  // the operands, in TensorIterator's order (no allocation for <= 4)
  std::vector<const Tensor*> many(inputs.size() + 1 > 4 ? inputs.size() + 1 : 0);
  const Tensor** operands = many.empty() ? few : many.data();
  size_t n = 0;
  if (dest != nullptr) operands[n++] = dest;
  for (const Input& in : inputs) operands[n++] = in.tensor;
  const ElementwiseLayout layout(shape, operands, n);
  std::vector<Tensor> cast;
  cast.reserve(inputs.size());
  for (const Input& in : inputs) {
    const Tensor& t = *in.tensor;
    if (!layout.permuted()) {
      Tensor c = Cast(t, in.dtype);
      cast.push_back(IntArrayRef(c.shape()) == IntArrayRef(shape) ? std::move(c) : c.expand(shape));
    } else if (IntArrayRef(t.shape()) == IntArrayRef(shape)) {
      // Converted in the loop order: the copy is contiguous in it.
      cast.push_back(Cast(layout.In(t), in.dtype));
    } else {
      cast.push_back(layout.In(Cast(t, in.dtype).expand(shape)));
    }
  }
  const int64_t numel = ShapeNumel(shape);
  if (dest == nullptr) {
    Tensor out = layout.NewResult(result);
    if (numel > 0) body(out, cast);
    return layout.permuted() ? layout.Out(out) : out;
  }
  const Tensor d = layout.In(*dest);
  bool temp = dest->dtype() != result;
  for (const Tensor& c : cast) {
    if (!temp && MayOverlap(c, d) && !SameElements(c, d)) temp = true;
  }
  if (numel == 0) return *dest;
  if (!temp) {
    body(d, cast);
    return *dest;
  }
  Tensor out = layout.NewResult(result);
  body(out, cast);
  CopyCast(d, out);
  return *dest;
}

}  // namespace tb::kernels
