//===- Checkpoint.h - Saving and restoring a training run's state ---------===//
//
// One file holds everything a run needs to continue bit for bit: every state
// tensor of the training graph (parameters, buffers, optimizer state, and --
// as the mixed-precision passes add them -- master weights and loss-scaler
// state, each tagged with its StateKind) and the step counter. The format:
//
//   "AMPCCKPT"                       8-byte magic
//   u32 format version               (kCheckpointFormatVersion)
//   u64 header length, header text   "key: value" lines (model, model_hash,
//                                    step, micro_step, opt_level, tensors,
//                                    optimizer when the graph trains)
//   per tensor: name, state kind keyword ("param", "optstate", ...), dtype
//               name ("f32", ...) -- each a u32 length and the bytes --
//               u32 rank, i64 dims[rank], u64 byte count, raw bytes
//   (integers and tensor data little-endian, as on every host we build for)
//   u64 FNV-1a checksum of every byte before it
//
// Written atomically (temporary file, fsync, rename). Loading checks magic,
// version, checksum and that the file's parameters and buffers are the
// program's (names, kinds, shapes) before it touches the Program, so a
// truncated file or another model's checkpoint changes nothing. A checkpoint
// of another opt level loads too: the fp32 masters (or the parameters,
// widened) are the truth, half copies and masters are rebuilt from them,
// optimizer and scaler state carry over by name (docs/checkpoints.md).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_TRAIN_CHECKPOINT_H
#define AMPC_RUNTIME_TRAIN_CHECKPOINT_H

#include "ir/Graph.h"
#include "ir/support/AtomicFile.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace ampc {

class Program;

constexpr uint32_t kCheckpointFormatVersion = 1;

/// Identifies a model independently of how it is trained: its name and the
/// name, kind and shape of every parameter and buffer. Dtypes, optimizer
/// state, master weights and scaler state are excluded, so the same model
/// has the same hash under every optimizer and opt level. Informational:
/// loading compares the tensors themselves.
std::string modelHash(const Graph &g);

struct CheckpointInfo {
  std::string model;
  std::string modelHash;
  std::string optLevel;
  /// The optimizer the graph trains with ("" for a graph that does not
  /// train, and in checkpoints of older versions).
  std::string optimizer;
  uint64_t step = 0;      ///< optimizer steps completed
  uint64_t microStep = 0; ///< micro-batches completed (step * accumulate)
  /// What the run trained on (0 / "" in checkpoints of older versions, which
  /// load as before): the batch size, a description of the training data
  /// and of the learning-rate schedule. A resumed run checks them.
  uint64_t batchSize = 0;
  std::string data, lrSchedule;
  /// Filled by loadCheckpoint when the checkpoint did not load as stored
  /// (another opt level or dtypes): what was rebuilt, converted, carried
  /// over, dropped or left at its initial value, in one sentence. "" when
  /// every tensor was copied as stored.
  std::string conversionNote;
};

/// The optimizer `g` trains with (its `optimizer` meta), "" when `g` has no
/// optimizer nodes.
std::string optimizerOf(const Graph &g);

/// Writes every state tensor of `program` with `info`; false + `err` on an
/// I/O failure (the previous file, if any, is left as it was).
bool saveCheckpoint(llvm::StringRef path, const Program &program, const CheckpointInfo &info,
                    std::string &err, SpecialOutputs special = SpecialOutputs::Refuse);

/// Reads only the header (for messages and for `ampc` to report what it resumes).
bool readCheckpointInfo(llvm::StringRef path, CheckpointInfo &info, std::string &err);

/// Which weights a checkpoint's parameters load as.
enum class CheckpointWeights {
  Trained, ///< the parameters as trained (their fp32 masters where kept)
  /// The average train.ema kept (<param>.ema, passes/Ema.h) of every
  /// parameter that has one; the rest (buffers, frozen parameters) as
  /// trained. A checkpoint with no average is refused.
  Average,
};

/// Restores every state tensor of `program` from `path` and fills `info`.
/// Refuses (false + `err`, program untouched) a file that is not a
/// checkpoint, is truncated or corrupt, or was written for another model
/// (a parameter or buffer missing, extra or of another shape: the error
/// names it) or with another optimizer. Across opt levels, see above.
bool loadCheckpoint(llvm::StringRef path, Program &program, CheckpointInfo &info, std::string &err,
                    CheckpointWeights weights = CheckpointWeights::Trained);

/// readCheckpointInfo and loadCheckpoint for a file already in memory;
/// `name` stands for the path in messages. The fuzz targets read through
/// these, so that no input has to go through a file.
bool readCheckpointInfoFromBuffer(llvm::StringRef name, llvm::StringRef data, CheckpointInfo &info,
                                  std::string &err);
bool loadCheckpointFromBuffer(llvm::StringRef name, llvm::StringRef data, Program &program,
                              CheckpointInfo &info, std::string &err,
                              CheckpointWeights weights = CheckpointWeights::Trained);

/// The checksum a checkpoint ends with: FNV-1a of every byte before it.
uint64_t checkpointChecksum(llvm::StringRef body);

} // namespace ampc

#endif
