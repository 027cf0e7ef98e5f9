//===- ampc/Export.h - Symbol visibility of the public API -----*- C++ -*-===//
//
// libampc.so is built with hidden visibility: only what the public headers
// mark AMPC_API is exported, so the internals (and the LLVM, yaml-cpp and
// oneDNN code linked into it) never clash with a host program's own copies.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_EXPORT_H
#define AMPC_PUBLIC_EXPORT_H

#if defined(AMPC_STATIC_DEFINE)
#define AMPC_API
#else
#define AMPC_API __attribute__((visibility("default")))
#endif

#endif
