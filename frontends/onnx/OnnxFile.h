//===- OnnxFile.h - Reading and checking ONNX model files -------*- C++ -*-===//
//
// Internal to the ONNX frontend: the protobuf file read with a size limit,
// checked by ONNX's checker, its opset brought into the supported range by
// ONNX's version converter; and tensors (initializers,
// Constant values, external data) turned into raw arrays.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_ONNX_ONNXFILE_H
#define AMPC_FRONTENDS_ONNX_ONNXFILE_H

#include "ir/DType.h"
#include "ir/Diagnostics.h"
#include "ir/support/NpyFile.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace ampc::onnxfe {

/// The default-domain opsets the importer maps; older files are converted up
/// to kMinOpset by ONNX's version converter, newer ones are refused.
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 17;
/// The oldest opset the version converter is asked to lift.
constexpr int64_t kOldestConvertibleOpset = 7;

/// Reads `path` into `model`: parse, structure, checker, opset range
/// (converting older files). Reports "file: error: ..." and returns false.
bool readOnnxModel(llvm::StringRef path, onnx::ModelProto &model, DiagnosticEngine &diag);

/// The default domain's opset of a model.
int64_t defaultOpset(const onnx::ModelProto &model);

/// The DType of an ONNX TensorProto data type; nullopt for ones ampc has not.
std::optional<DType> dtypeOfOnnx(int32_t onnxType);
/// "FLOAT", "INT64", ... for messages.
std::string onnxTypeName(int32_t onnxType);

/// A tensor's data as raw little-endian elements of its DType (raw_data,
/// the typed repeated fields, or external data relative to `baseDir`).
bool tensorToArray(const onnx::TensorProto &t, llvm::StringRef baseDir, NpyArray &out,
                   std::string &err);

/// Element i of an array as a double (every dtype, halves included).
double arrayElement(const NpyArray &a, int64_t i);

/// Registers the reader behind `file("m.onnx", "name")` initialisers
/// (ir/support/TensorFile.h): an initializer or a Constant node's value.
void registerOnnxTensorReader();

} // namespace ampc::onnxfe

#endif
