//===- OnnxExporter.h - A Graph out as an ONNX model ------------*- C++ -*-===//
//
// Writes an inference graph (the forward graph after the precision passes:
// casts as Cast nodes, half parameters as FLOAT16 initializers, batchnorm in
// eval mode with its running statistics) as an ONNX model (opset 17) that
// passes ONNX's checker and that the importer (OnnxImporter.h) reads back to
// the same outputs. Reads only the IR: state values come from the caller.
// Given the graph's shapes at a second batch (BatchShapes.h), the batch
// stays symbolic: the dims that follow it are named ("batch") on the inputs
// and outputs, and reshapes copy or infer them, so the model runs at any
// batch.
// Each registry op maps to ONNX through one table (OnnxExporter.cpp); an op
// without an ONNX form is an error naming it.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_ONNX_ONNXEXPORTER_H
#define AMPC_FRONTENDS_ONNX_ONNXEXPORTER_H

#include "frontends/onnx/BatchShapes.h"
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
/// inference op with an ONNX form; the graph's outputs become the model's,
/// under their names. With `batch` (g's shapes at another batch) the batch
/// is symbolic; where a reshape cannot be written for any batch (two of its
/// result dims follow the batch but not its input's), the whole model keeps
/// g's batch and a warning says why. `batchKept` (if given) says whether
/// the written model's batch is symbolic.
bool exportOnnxModel(const Graph &g, StateBytesFn stateBytes, std::string &out,
                     DiagnosticEngine &diag, const BatchShapes *batch = nullptr,
                     bool *batchKept = nullptr);

/// The registry ops the exporter maps (docs/onnx.md).
std::vector<std::string> exportableOps();

} // namespace ampc

#endif
