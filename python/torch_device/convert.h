// Conversions between torch's boxed values (c10::IValue) and the table's (tb::Value), shared by
// the libtorch-linked libraries of this folder (device.cc, python_key.cc). Header-only: each
// library is its own module, built against one torch release.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <complex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/op_table.h"

namespace tb_torch {

inline bool ToTbDType(c10::ScalarType s, tb::DType* out) {
  using S = c10::ScalarType;
  using D = tb::DType;
  switch (s) {
    case S::Bool: *out = D::kBool; return true;
    case S::Byte: *out = D::kUInt8; return true;
    case S::Char: *out = D::kInt8; return true;
    case S::Short: *out = D::kInt16; return true;
    case S::Int: *out = D::kInt32; return true;
    case S::Long: *out = D::kInt64; return true;
    case S::UInt16: *out = D::kUInt16; return true;
    case S::UInt32: *out = D::kUInt32; return true;
    case S::UInt64: *out = D::kUInt64; return true;
    case S::Half: *out = D::kFloat16; return true;
    case S::BFloat16: *out = D::kBFloat16; return true;
    case S::Float: *out = D::kFloat32; return true;
    case S::Double: *out = D::kFloat64; return true;
    case S::ComplexFloat: *out = D::kComplex64; return true;
    case S::ComplexDouble: *out = D::kComplex128; return true;
    default: return false;
  }
}

inline c10::ScalarType ToTorchDType(tb::DType d) {
  using S = c10::ScalarType;
  using D = tb::DType;
  switch (d) {
    case D::kBool: return S::Bool;
    case D::kUInt8: return S::Byte;
    case D::kInt8: return S::Char;
    case D::kInt16: return S::Short;
    case D::kInt32: return S::Int;
    case D::kInt64: return S::Long;
    case D::kUInt16: return S::UInt16;
    case D::kUInt32: return S::UInt32;
    case D::kUInt64: return S::UInt64;
    case D::kFloat16: return S::Half;
    case D::kBFloat16: return S::BFloat16;
    case D::kFloat32: return S::Float;
    case D::kFloat64: return S::Double;
    case D::kComplex64: return S::ComplexFloat;
    case D::kComplex128: return S::ComplexDouble;
    default:
      C10_THROW_ERROR(TypeError, "tensorbridge: dtype " + std::string(tb::DTypeName(d)) +
                                     " has no torch equivalent");
  }
}

// A tb::Tensor over t's memory; the tb storage holds a reference to t's StorageImpl.
inline tb::Tensor ToTb(const at::Tensor& t) {
  tb::DType dtype;
  TORCH_CHECK(ToTbDType(t.scalar_type(), &dtype), "tensorbridge: unsupported dtype ",
              t.scalar_type());
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(impl);
  auto storage = tb::Storage::Wrap(
      impl->mutable_data(), impl->nbytes(), tb::Device{}, impl, [](void* ctx) noexcept {
        c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx));
      });
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  tb::Tensor out(std::move(storage), t.data_ptr(), tb::IntArrayRef(sizes.data(), sizes.size()),
                 tb::IntArrayRef(strides.data(), strides.size()), dtype, tb::Device{});
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) out.set_wrapped_number(true);
  return out;
}

// How one schema argument converts: by its declared type where the IValue alone is ambiguous
// (ScalarType, Layout and MemoryFormat travel as ints).
enum class ArgKind : uint8_t { kPlain, kDType, kLayout, kMemoryFormat, kDevice };

inline ArgKind KindOf(const c10::TypePtr& declared) {
  c10::TypePtr t = declared;
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  switch (t->kind()) {
    case c10::TypeKind::ScalarTypeType: return ArgKind::kDType;
    case c10::TypeKind::LayoutType: return ArgKind::kLayout;
    case c10::TypeKind::MemoryFormatType: return ArgKind::kMemoryFormat;
    case c10::TypeKind::DeviceObjType: return ArgKind::kDevice;
    default: return ArgKind::kPlain;
  }
}

inline std::vector<int> WrittenReturns(const c10::FunctionSchema& schema) {
  std::vector<int> out;
  for (const auto& ret : schema.returns()) {
    int found = -1;
    const c10::AliasInfo* ra = ret.alias_info();
    if (ra != nullptr && ra->isWrite()) {
      for (size_t i = 0; i < schema.arguments().size() && found < 0; ++i) {
        const c10::AliasInfo* aa = schema.arguments()[i].alias_info();
        if (aa != nullptr && aa->isWrite() && aa->beforeSets() == ra->beforeSets()) {
          found = static_cast<int>(i);
        }
      }
    }
    out.push_back(found);
  }
  return out;
}

// One kernel result as an IValue; `tensor` makes the at::Tensor of each defined result tensor
// (lists' items too).
template <typename TensorFn>
c10::IValue ToIValue(const tb::Value& v, TensorFn&& tensor) {
  switch (v.tag()) {
    case tb::Value::Tag::kNone: return c10::IValue();
    case tb::Value::Tag::kBool: return c10::IValue(v.to_bool());
    case tb::Value::Tag::kInt: return c10::IValue(v.to_int());
    case tb::Value::Tag::kDouble: return c10::IValue(v.to_double());
    case tb::Value::Tag::kComplex: {
      const std::complex<double> c = v.to_complex();
      return c10::IValue(c10::complex<double>(c.real(), c.imag()));
    }
    case tb::Value::Tag::kTensor:  // an undefined result (a gradient output_mask left out)
      // is an undefined at::Tensor, as torch's Python fallback makes of None for a Tensor return
      return c10::IValue(v.to_tensor().defined() ? tensor(v.to_tensor()) : at::Tensor());
    case tb::Value::Tag::kTensorList: {
      c10::List<at::Tensor> out;
      for (const tb::Tensor& t : v.to_tensor_list()) out.push_back(tensor(t));
      return c10::IValue(out);
    }
    case tb::Value::Tag::kIntList: return c10::IValue(v.to_int_list());
    default: TORCH_CHECK(false, "tensorbridge: unsupported result ", v.type_name());
  }
}

// One argument as a table value; `tensor` converts each tensor (lists' items too) and may
// throw to refuse one. The device kind becomes "cpu": the table computes on host memory.
template <typename TensorFn>
tb::Value ToValue(const c10::IValue& v, ArgKind kind, TensorFn&& tensor) {
  if (v.isNone()) return tb::Value();
  switch (kind) {
    case ArgKind::kDType: {
      tb::DType d;
      TORCH_CHECK(ToTbDType(v.toScalarType(), &d), "tensorbridge: unsupported dtype");
      return tb::Value(d);
    }
    case ArgKind::kLayout:
      TORCH_CHECK(v.toLayout() == c10::kStrided, "tensorbridge: strided tensors only");
      return tb::Value("strided");
    case ArgKind::kMemoryFormat:
      switch (v.toMemoryFormat()) {
        case c10::MemoryFormat::Contiguous: return tb::Value("contiguous_format");
        case c10::MemoryFormat::Preserve: return tb::Value("preserve_format");
        case c10::MemoryFormat::ChannelsLast: return tb::Value("channels_last");
        case c10::MemoryFormat::ChannelsLast3d: return tb::Value("channels_last_3d");
        default: TORCH_CHECK(false, "tensorbridge: unknown memory format");
      }
    case ArgKind::kDevice: return tb::Value(std::string("cpu"));
    case ArgKind::kPlain: break;
  }
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? tb::Value(tensor(t)) : tb::Value();
  }
  if (v.isDouble()) return tb::Value(v.toDouble());
  if (v.isComplexDouble()) {
    const c10::complex<double> c = v.toComplexDouble();
    return tb::Value(std::complex<double>(c.real(), c.imag()));
  }
  if (v.isInt()) return tb::Value(static_cast<int64_t>(v.toInt()));
  if (v.isBool()) return tb::Value(v.toBool());
  if (v.isSymInt()) return tb::Value(static_cast<int64_t>(v.toSymInt().expect_int()));
  if (v.isSymFloat()) return tb::Value(v.toSymFloat().expect_float());
  if (v.isString()) return tb::Value(std::string(v.toStringRef()));
  if (v.isIntList()) return tb::Value(v.toIntVector());
  if (v.isDoubleList()) return tb::Value(v.toDoubleVector());
  if (v.isBoolList()) {
    auto l = v.toBoolList();
    return tb::Value(std::vector<bool>(l.begin(), l.end()));
  }
  if (v.isTensorList()) {
    std::vector<tb::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(tensor(t));
    return tb::Value(std::move(out));
  }
  if (v.isList()) {  // Tensor?[], SymInt[]
    std::vector<std::optional<tb::Tensor>> tensors;
    std::vector<int64_t> ints;
    bool all_int = true;
    for (const c10::IValue& item : v.toListRef()) {
      if (item.isNone()) {
        tensors.emplace_back(std::nullopt);
        all_int = false;
      } else if (item.isTensor()) {
        tensors.emplace_back(tensor(item.toTensor()));
        all_int = false;
      } else if (item.isInt() || item.isSymInt()) {
        ints.push_back(item.isInt() ? item.toInt() : item.toSymInt().expect_int());
      } else {
        TORCH_CHECK(false, "tensorbridge: unsupported list item ", item.tagKind());
      }
    }
    if (all_int) return tb::Value(std::move(ints));
    return tb::Value(std::move(tensors));
  }
  TORCH_CHECK(false, "tensorbridge: unsupported argument ", v.tagKind());
}

}  // namespace tb_torch
