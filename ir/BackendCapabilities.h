//===- BackendCapabilities.h - What a backend can run ----------------------===//
//
// The precision passes ask the target backend, rather than assume, which
// compute precisions it runs each op in. Backends (runtime/) implement this;
// passes see only this interface, so they stay independent of the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_IR_BACKENDCAPABILITIES_H
#define AMPC_IR_BACKENDCAPABILITIES_H

#include "ir/OpRegistry.h"

namespace ampc {

class BackendCapabilities {
public:
  virtual ~BackendCapabilities() = default;
  /// The backend's name as users spell it ("cpu-ref", "cpu", "cuda").
  virtual llvm::StringRef name() const = 0;
  /// Whether `op` runs with floating compute precision `dtype`.
  virtual bool supports(const OpInfo &op, DType dtype) const = 0;
};

} // namespace ampc

#endif
