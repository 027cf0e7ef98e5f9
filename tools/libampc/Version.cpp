//===- Version.cpp - The library's version at run time ---------------------===//
#include "ampc/Version.h"

namespace ampc::api {

const char *version() { return AMPC_VERSION_STRING; }

} // namespace ampc::api
