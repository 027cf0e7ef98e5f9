//===- WorldInternal.h - What a World holds --------------------------------===//
#ifndef AMPC_TOOLS_LIBAMPC_WORLDINTERNAL_H
#define AMPC_TOOLS_LIBAMPC_WORLDINTERNAL_H

#include "ampc/World.h"

#include "runtime/dist/Communicator.h"

#include <memory>

namespace ampc::api {

struct World::Impl {
  std::unique_ptr<dist::Communicator> comm;
};

} // namespace ampc::api

#endif
