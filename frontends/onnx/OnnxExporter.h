//===- OnnxExporter.h - A Graph out as an ONNX model ------------*- C++ -*-===//
//
// Writes an inference graph (the forward graph after the precision passes:
// casts as Cast nodes, half parameters as FLOAT16 initializers, batchnorm in
// eval mode with its running statistics) as an ONNX model (opset 17) that
// passes ONNX's checker and that the importer (OnnxImporter.h) reads back to
// the same outputs. Reads only the IR: state values come from the caller.
// Each registry op maps to ONNX through one table (OnnxExporter.cpp); an op
// without an ONNX form is an error naming it.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_ONNX_ONNXEXPORTER_H
#define AMPC_FRONTENDS_ONNX_ONNXEXPORTER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace ampc {

/// The raw little-endian bytes of a state tensor in its own dtype; false
/// (after reporting) when they cannot be had.
using StateBytesFn = llvm::function_ref<bool(const Value *state, std::vector<char> &bytes)>;

/// Serialises `g` as an ONNX model into `out`. Every node must be an
/// inference op with an ONNX form; the graph's outputs become the model's.
bool exportOnnxModel(const Graph &g, StateBytesFn stateBytes, std::string &out,
                     DiagnosticEngine &diag);

/// The registry ops the exporter maps (docs/onnx.md).
std::vector<std::string> exportableOps();

} // namespace ampc

#endif
