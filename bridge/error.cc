#include "bridge/error.h"

namespace tb {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kValueError: return "ValueError";
    case ErrorKind::kTypeError: return "TypeError";
    case ErrorKind::kBufferError: return "BufferError";
    case ErrorKind::kIndexError: return "IndexError";
    case ErrorKind::kNotImplementedError: return "NotImplementedError";
    case ErrorKind::kRuntimeError: return "RuntimeError";
    case ErrorKind::kInternalError: return "InternalError";
  }
  return "Error";
}

}  // namespace tb
