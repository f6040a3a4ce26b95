// Export macro for the tensorbridge shared library. The library is built with hidden
// visibility, so only what is marked TB_API is part of its ABI.
#pragma once

#if defined(_WIN32)
#if defined(TB_BUILDING_LIBRARY)
#define TB_API __declspec(dllexport)
#else
#define TB_API __declspec(dllimport)
#endif
#else
#define TB_API __attribute__((visibility("default")))
#endif
