// The DLPack ABI, version 1.3: the structs and codes a producer and a consumer share.
//
// Declared here once, in the layout the DLPack specification fixes, with static checks of
// that layout below. (Debian's libdlpack-dev is 0.6, which predates the versioned struct.)
// Note the different field order of the two managed structs: the legacy DLManagedTensor
// starts with the DLTensor; DLManagedTensorVersioned starts with the version, and its
// DLTensor comes last so that later versions can grow it without moving the deleter.
#pragma once

#include <cstddef>
#include <cstdint>

#define TB_DLPACK_MAJOR_VERSION 1
#define TB_DLPACK_MINOR_VERSION 3

extern "C" {

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef enum : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means C-contiguous
  uint64_t byte_offset;
} DLTensor;

// Legacy (DLPack < 0.8) managed tensor: DLTensor first.
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

// Versioned managed tensor: version, context, deleter and flags first, DLTensor last.
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

// ---- The C exchange API (DLPack 1.3): `type(x).__dlpack_c_exchange_api__` is a PyCapsule
// named "dlpack_exchange_api" holding a pointer to a static DLPackExchangeAPI. ----
typedef int (*DLPackManagedTensorAllocator)(DLTensor* prototype, DLManagedTensorVersioned** out,
                                            void* error_ctx,
                                            void (*SetError)(void* error_ctx, const char* kind,
                                                             const char* message));
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void* py_object,
                                                     DLManagedTensorVersioned** out);
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void* py_object, DLTensor* out);
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void** out_current_stream);
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned* tensor,
                                                   void** out_py_object);

typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader* prev_api;
} DLPackExchangeAPIHeader;

typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

}  // extern "C"

// ---- Layout checks: the ABI is fixed by the specification (LP64). ----
static_assert(sizeof(DLPackVersion) == 8, "DLPackVersion layout");
static_assert(sizeof(DLDevice) == 8, "DLDevice layout");
static_assert(sizeof(DLDataType) == 4, "DLDataType layout");
static_assert(offsetof(DLDataType, bits) == 1 && offsetof(DLDataType, lanes) == 2,
              "DLDataType layout");
static_assert(offsetof(DLTensor, data) == 0, "DLTensor layout");
static_assert(offsetof(DLTensor, device) == 8, "DLTensor layout");
static_assert(offsetof(DLTensor, ndim) == 16, "DLTensor layout");
static_assert(offsetof(DLTensor, dtype) == 20, "DLTensor layout");
static_assert(offsetof(DLTensor, shape) == 24, "DLTensor layout");
static_assert(offsetof(DLTensor, strides) == 32, "DLTensor layout");
static_assert(offsetof(DLTensor, byte_offset) == 40, "DLTensor layout");
static_assert(sizeof(DLTensor) == 48, "DLTensor layout");
static_assert(offsetof(DLManagedTensor, dl_tensor) == 0, "DLManagedTensor layout");
static_assert(offsetof(DLManagedTensor, manager_ctx) == 48, "DLManagedTensor layout");
static_assert(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor layout");
static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor layout");
static_assert(offsetof(DLManagedTensorVersioned, version) == 0, "versioned layout");
static_assert(offsetof(DLManagedTensorVersioned, manager_ctx) == 8, "versioned layout");
static_assert(offsetof(DLManagedTensorVersioned, deleter) == 16, "versioned layout");
static_assert(offsetof(DLManagedTensorVersioned, flags) == 24, "versioned layout");
static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "versioned layout");
static_assert(sizeof(DLManagedTensorVersioned) == 80, "versioned layout");
static_assert(sizeof(DLPackExchangeAPIHeader) == 16, "exchange API header layout");
static_assert(offsetof(DLPackExchangeAPI, managed_tensor_allocator) == 16, "exchange API layout");
static_assert(offsetof(DLPackExchangeAPI, current_work_stream) == 48, "exchange API layout");
