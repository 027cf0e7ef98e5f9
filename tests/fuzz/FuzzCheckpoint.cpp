//===- FuzzCheckpoint.cpp - The checkpoint reader on arbitrary bytes -------===//
//
// Each input is read twice: as it is, and with its last 8 bytes replaced by
// the checksum of the rest. Without the second reading almost every mutation
// would stop at the checksum, and the header and tensor records behind it
// would never be fuzzed. Both the header-only reader and a full load into a
// program of kCheckpointModel run.
//
//===----------------------------------------------------------------------===//
#include "FuzzModels.h"
#include "FuzzUtil.h"

#include "ir/Diagnostics.h"
#include "runtime/Backend.h"
#include "runtime/Program.h"
#include "runtime/train/Checkpoint.h"

#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Harness {
  std::unique_ptr<ampc::Graph> graph = ampc::fuzz::loadFixedModel(ampc::fuzz::kCheckpointModel);
  std::unique_ptr<ampc::Backend> backend = ampc::createCpuRefBackend();
  std::unique_ptr<ampc::Program> program;
  Harness() {
    ampc::DiagnosticEngine diag;
    program = ampc::Program::compile(*graph, *backend, diag);
    if (!program) {
      diag.print(llvm::errs());
      std::abort();
    }
  }
};

void readBoth(Harness &h, llvm::StringRef bytes) {
  ampc::CheckpointInfo info;
  std::string err;
  if (!ampc::readCheckpointInfoFromBuffer("fuzz.ckpt", bytes, info, err) ||
      !ampc::loadCheckpointFromBuffer("fuzz.ckpt", bytes, *h.program, info, err))
    return ampc::fuzz::verbose(err);
  ampc::fuzz::verbose("loaded step " + llvm::Twine(info.step));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Harness h;
  // Exactly the input's bytes (a heap copy of that size), so a read past the
  // end is an ASan report.
  std::string bytes(reinterpret_cast<const char *>(data), size);
  readBoth(h, bytes);
  if (size < sizeof(uint64_t))
    return 0;
  uint64_t sum = ampc::checkpointChecksum(llvm::StringRef(bytes).drop_back(sizeof sum));
  std::memcpy(bytes.data() + size - sizeof sum, &sum, sizeof sum);
  readBoth(h, bytes);
  return 0;
}
