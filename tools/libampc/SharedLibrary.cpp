//===- SharedLibrary.cpp - libampc.so's own translation unit ---------------===//
//
// The API's code lives in the static ampc_api (which the unit tests link, so
// that they share one op registry with it); libampc.so is ampc_api linked
// whole. CMake wants at least one source of the shared library's own: this.
//
//===----------------------------------------------------------------------===//
#include "ampc/Version.h"
