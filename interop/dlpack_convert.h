// Conversion between tb::Tensor and DLPack managed tensors, both directions, no copies.
//
// Import validates once, here, so kernels never see a malformed tensor. On any refusal the
// producer's deleter has already been called (ownership was handed to us), and a
// BufferError says what was wrong.
#pragma once

#include "bridge/tensor.h"
#include "interop/dlpack.h"

namespace tb {

// DLPack dtype <-> DType. Returns false for codes/bits/lanes with no DType.
TB_API bool DTypeFromDLPack(DLDataType dl, DType* out);
TB_API DLDataType DTypeToDLPack(DType dtype);
TB_API DLDevice DeviceToDLPack(Device device);

// Takes ownership of `managed` (its deleter runs exactly once, when the last view of the
// returned tensor dies, or before this throws).
TB_API Tensor ImportDLPack(DLManagedTensorVersioned* managed);
TB_API Tensor ImportDLPack(DLManagedTensor* managed);

// Borrows a DLTensor whose memory `owner` keeps alive (the exchange API's non-owning path).
TB_API Tensor ImportDLTensor(const DLTensor& tensor, std::shared_ptr<Storage> owner,
                             bool read_only);

// Hands `tensor` out as a managed tensor that holds a reference to its storage. With
// `copy`, the data is copied first and IS_COPIED is set. Read-only tensors carry READ_ONLY.
TB_API DLManagedTensorVersioned* ExportDLPackVersioned(const Tensor& tensor, bool copy = false);
// Legacy export has no flags, so it cannot say "read-only": BufferError for such tensors,
// unless `immutable_consumer` says the consumer never writes what it imports (JAX, whose
// arrays are immutable and whose importer takes only legacy capsules).
TB_API DLManagedTensor* ExportDLPackLegacy(const Tensor& tensor, bool immutable_consumer = false);

}  // namespace tb
