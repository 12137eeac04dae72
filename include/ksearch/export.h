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

#endif
