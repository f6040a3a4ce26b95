// Errors. Two tiers:
//  - user errors, typed as the Python exception they become:
//        TB_THROW(ValueError) << "aten::add: expected 2 arguments, got " << n;
//  - internal invariants, which are bugs in tensorbridge when they fail:
//        TB_ICHECK(ndim >= 0) << "ndim " << ndim;
#pragma once

#include <exception>
#include <sstream>
#include <string>
#include <utility>

#include "bridge/api.h"

namespace tb {

enum class ErrorKind {
  kValueError,
  kTypeError,
  kBufferError,
  kIndexError,
  kNotImplementedError,
  kRuntimeError,
  kInternalError,
};

TB_API const char* ErrorKindName(ErrorKind kind);

class TB_API Error : public std::exception {
 public:
  explicit Error(ErrorKind kind, std::string message = {}, bool declined = false)
      : kind_(kind), message_(std::move(message)), declined_(declined) {}

  ErrorKind kind() const noexcept { return kind_; }
  // True for a kernel's refusal of a dtype, device or element size it has no loop for
  // (TB_DECLINE: a NotImplementedError). The op table serves such a call with its fallback
  // handler when one is installed; Python sees tensorbridge.KernelDeclinedError, a subclass
  // of NotImplementedError.
  bool declined() const noexcept { return declined_; }
  const std::string& message() const noexcept { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

  // Streams append to the message; used by TB_THROW on a temporary.
  template <typename T>
  Error&& operator<<(const T& value) && {
    std::ostringstream os;
    os << value;
    message_ += os.str();
    return std::move(*this);
  }

 private:
  ErrorKind kind_;
  std::string message_;
  bool declined_;
};

}  // namespace tb

#define TB_THROW(Kind) throw ::tb::Error(::tb::ErrorKind::k##Kind)

// A kernel declining an input it has no loop for (a dtype, a device, an element size):
// TB_DECLINE << "aten::cumsum: dtype complex64 is not supported". A NotImplementedError
// marked declined(), so that the fallback may serve the call.
#define TB_DECLINE throw ::tb::Error(::tb::ErrorKind::kNotImplementedError, {}, true)

// Internal invariant: failing it is a tensorbridge bug, reported with the place it failed.
#define TB_ICHECK(cond)                                                                    \
  if (cond) {                                                                              \
  } else                                                                                   \
    throw ::tb::Error(::tb::ErrorKind::kInternalError)                                     \
        << "tensorbridge internal error at " << __FILE__ << ":" << __LINE__ << ": check `" \
        << #cond << "` failed. "

// TB_DECLINE unless cond: TB_CHECK_SUPPORTED(IsFloatingPoint(dt)) << op << ": dtype ...".
#define TB_CHECK_SUPPORTED(cond) \
  if (cond) {                    \
  } else                         \
    TB_DECLINE

// User-facing check: TB_CHECK(cond, ValueError) << "message".
#define TB_CHECK(cond, Kind) \
  if (cond) {                \
  } else                     \
    TB_THROW(Kind)
