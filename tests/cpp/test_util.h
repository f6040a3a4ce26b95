// Helpers shared by the GoogleTest files: checking that a statement throws a tb::Error of a
// given kind and reading its message; a tensor made from a list of values and the values of a
// tensor; an op called through the global table.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "bridge/error.h"
#include "bridge/tensor.h"
#include "dispatch/op_table.h"

namespace tb::testing {

// Runs `fn`, expects a tb::Error of `kind` whose message contains `expected`; returns the message
// ("" and a failure otherwise).
inline std::string ErrorOf(const std::function<void()>& fn, ErrorKind kind,
                           const std::string& expected) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << ErrorKindName(e.kind()) << ": " << e.message();
    EXPECT_NE(e.message().find(expected), std::string::npos)
        << "the message \"" << e.message() << "\" does not contain \"" << expected << "\"";
    return e.message();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected tb::Error(" << ErrorKindName(kind) << "), got " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected tb::Error(" << ErrorKindName(kind) << "), nothing was thrown";
  return "";
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A new contiguous tensor of `shape` and `dtype` holding `values` (C++ type T of that dtype).
template <typename T>
Tensor FromValues(IntArrayRef shape, DType dtype, const std::vector<T>& values) {
  Tensor t = Tensor::Empty(shape, dtype);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  if (!values.empty()) std::memcpy(t.mutable_data(), values.data(), values.size() * sizeof(T));
  return t;
}

// The elements of `t` (C++ type T of its dtype) in row-major order of its shape, read
// through its strides.
template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> out;
  if (t.numel() == 0) return out;
  const int64_t nd = t.ndim();
  std::vector<int64_t> index(static_cast<size_t>(nd), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < nd; ++d) offset += index[d] * t.strides()[d];
    out.push_back(t.data_as<const T>()[offset]);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++index[d] < t.shape()[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// Calls `op` ("aten::add.Tensor") with `stack` through OpTable::Global(), as users reach it;
// returns the stack of results.
inline Stack Call(const char* op, Stack stack) {
  OpTable::Global().Call(op, stack);
  return stack;
}

}  // namespace tb::testing

// EXPECT_TB_ERROR(kValueError, "view: shape [5, 5] is invalid", t.view({5, 5})): the statement
// throws a tb::Error of that kind whose message contains the text; the expression's value is
// the whole message.
#define EXPECT_TB_ERROR(kind, expected, ...)                                              \
  ([&] {                                                                                  \
    SCOPED_TRACE(#__VA_ARGS__);                                                           \
    return ::tb::testing::ErrorOf([&] { __VA_ARGS__; }, ::tb::ErrorKind::kind, expected); \
  }())
