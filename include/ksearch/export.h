/* Symbol visibility for libksearch's public C and C++ declarations. */
#ifndef KSEARCH_EXPORT_H
#define KSEARCH_EXPORT_H

#if defined(_WIN32)
#  if defined(KS_BUILDING_LIBRARY)
#    define KS_API __declspec(dllexport)
#  else
#    define KS_API __declspec(dllimport)
#  endif
#else
#  define KS_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
/* The C++ API lives in an inline namespace named after its ABI version:
 * code says ks::Solution, the linker sees ks::v1::Solution, so a program
 * built against another C++ ABI of libksearch fails to link instead of
 * misbehaving. (The C ABI has no such need: its structs carry versions.) */
#define KS_NAMESPACE_BEGIN \
  namespace ks {           \
  inline namespace v1 {
#define KS_NAMESPACE_END \
  }                      \
  }
#endif

#endif
