//===- ampc/ModelExport.h - Taking a model's weights out of ampc -*- C++ -*-===//
//
// What `ampc export` does (docs/cli.md, "ampc export"): a compiled Program's
// weights as fp32 (weightsOf), and writers for a small table of formats
// (exportFormats, exportProgram): `npy`, one .npy file per parameter and
// buffer, named by it, and each batchnorm's num_batches_tracked
// (batchNormCounts), which PyTorch's load_state_dict takes; `onnx`, the
// rewritten inference graph as one ONNX model (docs/onnx.md, "Export").
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_MODELEXPORT_H
#define AMPC_PUBLIC_MODELEXPORT_H

#include "ampc/Export.h"
#include "ampc/Program.h"
#include "ampc/Status.h"
#include "ampc/Types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ampc::api {

/// One parameter or buffer, in fp32.
struct Weight {
  std::string name; ///< the parameter's own name ("fc1.weight"), never "<name>.master"
  StateKind kind = StateKind::Parameter; ///< Parameter or Buffer
  std::vector<int64_t> shape;
  std::vector<float> values; ///< C order
  /// The values are the fp32 master's (O2), not the parameter's half copy.
  bool fromMaster = false;
};

/// Every parameter and buffer of `program`, in declaration order, as fp32:
/// the values of its fp32 master where the program keeps one (the truth
/// the optimizer updates), else its own values widened (exact from f16 and
/// bf16). After loadCheckpoint, the checkpoint's weights.
AMPC_API Result<std::vector<Weight>> weightsOf(const Program &program);

/// A batchnorm's `num_batches_tracked`: a buffer PyTorch's state_dict has
/// (an int64 scalar) and ampc does not keep (its batchnorm has a fixed
/// momentum; PyTorch reads the count only when momentum is None).
struct BatchNormCount {
  std::string name;  ///< "<batchnorm>.num_batches_tracked"
  int64_t value = 0; ///< the training micro-batches the program has run
};

/// One per batchnorm of `program` whose running mean is a buffer named
/// `<batchnorm>.running_mean`, in graph order; none for a name that is a
/// weight of the program already. The value is what PyTorch would have
/// counted: the micro-batches trained (after loadCheckpoint, the
/// checkpoint's `micro_step`: steps x train.accumulate), 0 for initial
/// weights.
AMPC_API std::vector<BatchNormCount> batchNormCounts(const Program &program);

/// One format exportProgram knows.
struct ExportFormat {
  std::string name;        ///< "npy", "onnx"
  std::string description; ///< one line, for --help and errors
  /// The output is a directory (created if missing) rather than one file.
  bool writesDirectory = false;
  /// False for a format that is known but not written by this version.
  bool available = false;
};
/// Every known format, in the order `ampc export --help` lists them.
AMPC_API std::vector<ExportFormat> exportFormats();

struct ExportOptions {
  std::string format = "npy";
  /// The directory (npy) or file (onnx) to write.
  std::string output;
  /// Let the output files follow a symlink or go into a device or FIFO
  /// (refused by default; see writeFileAtomically).
  bool writeThrough = false;
};

struct ExportReport {
  /// The files written, in order.
  std::vector<std::string> files;
  /// One line: what was written where.
  std::string summary;
};

/// Checks, before any work, that `opts` names a known, available format
/// and an output that can be written: for npy, an existing directory or a
/// path whose nearest existing ancestor is a writable directory. An error
/// names the formats there are.
AMPC_API Status checkExport(const ExportOptions &opts);

/// Writes `program`'s model in `opts.format` to `opts.output`.
///
/// onnx: the program's model imported again at the program's policy, in
/// eval mode (batchnorm on its running statistics, dropout off), through
/// the forward pipeline, its loss replaced by the loss's prediction input;
/// written atomically as an ONNX model (opset 17) that passes ONNX's
/// checker, initializers taking the program's values (after loadCheckpoint,
/// the checkpoint's). The outputs keep the names they have in the model
/// (the prediction's, at every level). The batch is symbolic: the model is
/// imported once more at twice its batch to find the dims that follow it
/// (docs/onnx.md, "Export"); where that cannot tell, the file keeps the
/// program's batch and the result carries a warning saying why.
///
/// npy: every parameter and buffer (weightsOf) as `<output>/<name>.npy`,
/// fp32, C order, and each batchnorm's count (batchNormCounts) as an int64
/// scalar `<batchnorm>.num_batches_tracked.npy`: what PyTorch's
/// load_state_dict(strict=True) needs, and nothing else; the directory is
/// created if missing;
/// each file is written atomically, replacing an existing regular file of
/// that name, and every path is checked (no symlink, device or directory
/// in the way) before the first is written. Other files in the directory
/// are left alone.
AMPC_API Result<ExportReport> exportProgram(const Program &program, const ExportOptions &opts);

} // namespace ampc::api

#endif
