//===- OnnxImporter.h - ONNX models to a Graph ------------------*- C++ -*-===//
//
// The ONNX frontend (docs/onnx.md). An ONNX file is read with protobuf,
// checked by ONNX's checker and converted to a supported opset; each node
// lowers through one table (ONNX op type and opset
// to a builder) onto registry ops, after decomposed layernorm and erf-GELU
// subgraphs are recognised. Initializers become parameters named exactly as
// in the file (BatchNormalization statistics become buffers), initialised
// from the file itself: `init file("m.onnx", "conv1.weight")`.
//
// Errors name the node: "m.onnx: node '/conv1/Conv' (op Conv, opset 17):
// error: ...".
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_ONNX_ONNXIMPORTER_H
#define AMPC_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "frontends/yaml/ModelLoader.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace ampc {

struct OnnxImportSettings {
  /// The file to read.
  std::string path;
  /// How state initialisers name the file: relative to the folder the
  /// runtime resolves init files against (the model file's).
  std::string pathInInit;
  /// BatchNormalization and Dropout in training mode (a model file that
  /// trains the graph); otherwise inference semantics.
  bool training = false;
  /// Initializers that stay frozen (no gradient, no optimizer state).
  std::vector<std::string> frozen;
  LoadOptions load;
};

/// `ampc model.onnx`: an inference graph whose outputs are the ONNX graph's
/// outputs. A symbolic first dim of an input is the batch (the load
/// options' batch, else 1); any other symbolic dim is an error.
std::unique_ptr<Graph> loadOnnxModel(llvm::StringRef path, DiagnosticEngine &diag,
                                     const LoadOptions &opts = {});

/// A model file's `model: {onnx: FILE}`: lowers the ONNX graph into `g`,
/// binding each ONNX graph input to the value in `inputs` of the same name
/// (declared by the model file, with its batch bound). The ONNX outputs are
/// returned by name in `outputs`. `where` locates errors about the wrapping.
bool lowerOnnxInto(Graph &g, const OnnxImportSettings &settings,
                   const llvm::StringMap<Value *> &inputs, const Location &where,
                   DiagnosticEngine &diag, llvm::StringMap<Value *> &outputs);

/// Lets the runtime read `file("m.onnx", "name")` initialisers. Called by
/// the importer; a program that parses textual IR naming ONNX files calls it
/// itself (ampc does at start-up).
void registerOnnxTensorFiles();

/// The ONNX op types the importer maps, sorted.
std::vector<std::string> supportedOnnxOpTypes();

} // namespace ampc

#endif
