//===- Checkpoint.cpp -------------------------------------------------------===//
#include "runtime/train/Checkpoint.h"

#include "ir/support/AtomicFile.h"
#include "runtime/Program.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>
#include <limits>
#include <map>

namespace ampc {

namespace {

constexpr char kMagic[8] = {'A', 'M', 'P', 'C', 'C', 'K', 'P', 'T'};

uint64_t fnv1a(const char *data, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

class Writer {
public:
  template <class T> void pod(T v) { out.append(reinterpret_cast<const char *>(&v), sizeof v); }
  void str(llvm::StringRef s) {
    pod<uint32_t>(s.size());
    out.append(s.data(), s.size());
  }
  std::string out;
};

/// Bounds-checked reads: a truncated file fails instead of reading past the end.
class Reader {
public:
  explicit Reader(llvm::StringRef data) : data_(data) {}
  template <class T> bool pod(T &v) {
    if (data_.size() - pos_ < sizeof v)
      return false;
    std::memcpy(&v, data_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool bytes(size_t n, llvm::StringRef &s) {
    if (data_.size() - pos_ < n)
      return false;
    s = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool str(std::string &s) {
    uint32_t n = 0;
    llvm::StringRef r;
    if (!pod(n) || !bytes(n, r))
      return false;
    s = r.str();
    return true;
  }
  size_t pos() const { return pos_; }

private:
  llvm::StringRef data_;
  size_t pos_ = 0;
};

std::string headerText(const CheckpointInfo &info, size_t numTensors) {
  std::string h;
  h += "model: " + info.model + "\n";
  h += "model_hash: " + info.modelHash + "\n";
  h += "opt_level: " + info.optLevel + "\n";
  h += "step: " + std::to_string(info.step) + "\n";
  h += "micro_step: " + std::to_string(info.microStep) + "\n";
  h += "tensors: " + std::to_string(numTensors) + "\n";
  return h;
}

bool parseHeader(llvm::StringRef text, CheckpointInfo &info) {
  std::map<std::string, std::string> kv;
  llvm::SmallVector<llvm::StringRef, 8> lines;
  text.split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    auto [k, v] = line.split(": ");
    kv[k.str()] = v.str();
  }
  for (const char *required : {"model", "model_hash", "step", "micro_step"})
    if (!kv.count(required))
      return false;
  info.model = kv["model"];
  info.modelHash = kv["model_hash"];
  info.optLevel = kv["opt_level"];
  if (llvm::StringRef(kv["step"]).getAsInteger(10, info.step) ||
      llvm::StringRef(kv["micro_step"]).getAsInteger(10, info.microStep))
    return false;
  // Steps are counted in int64 everywhere else; a forged header with a
  // valid checksum must not turn into a negative step. A micro-step count
  // is a whole number of steps (step * accumulate).
  constexpr uint64_t kMaxStep = uint64_t(std::numeric_limits<int64_t>::max());
  return info.step <= kMaxStep && info.microStep <= kMaxStep && info.microStep >= info.step &&
         (info.step == 0 ? info.microStep == 0 : info.microStep % info.step == 0);
}

struct StoredTensor {
  std::string kind, dtype;
  std::vector<int64_t> dims;
  llvm::StringRef bytes;
};

/// Parses a whole checkpoint file held in `data` (which must outlive `tensors`).
bool parseCheckpoint(llvm::StringRef path, llvm::StringRef data, CheckpointInfo &info,
                     llvm::StringMap<StoredTensor> *tensors, std::string &err) {
  auto fail = [&](const std::string &why) {
    err = path.str() + ": " + why;
    return false;
  };
  if (data.size() < sizeof kMagic || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    return fail("not an ampc checkpoint (bad magic)");
  Reader r(data);
  llvm::StringRef skip;
  uint32_t version = 0;
  uint64_t headerLen = 0;
  llvm::StringRef header;
  r.bytes(sizeof kMagic, skip);
  if (!r.pod(version))
    return fail("truncated checkpoint");
  if (version != kCheckpointFormatVersion)
    return fail("checkpoint format version " + std::to_string(version) +
                " is not supported (this ampc reads version " +
                std::to_string(kCheckpointFormatVersion) + ")");
  if (data.size() < sizeof(uint64_t) + sizeof kMagic + sizeof version)
    return fail("truncated checkpoint");
  // The checksum covers everything before it; check it before trusting any length.
  uint64_t stored = 0;
  std::memcpy(&stored, data.data() + data.size() - sizeof stored, sizeof stored);
  llvm::StringRef body = data.drop_back(sizeof stored);
  if (fnv1a(body.data(), body.size()) != stored)
    return fail("checkpoint is truncated or corrupt (checksum mismatch)");
  Reader br(body);
  br.bytes(sizeof kMagic + sizeof version, skip);
  if (!br.pod(headerLen) || !br.bytes(headerLen, header) || !parseHeader(header, info))
    return fail("checkpoint header is malformed");
  if (!tensors)
    return true;
  while (br.pos() < body.size()) {
    std::string name;
    StoredTensor t;
    uint32_t rank = 0;
    uint64_t nbytes = 0;
    if (!br.str(name) || !br.str(t.kind) || !br.str(t.dtype) || !br.pod(rank) || rank > 64)
      return fail("checkpoint tensor record is malformed");
    t.dims.resize(rank);
    for (int64_t &d : t.dims)
      if (!br.pod(d))
        return fail("checkpoint tensor record is malformed");
    if (!br.pod(nbytes) || !br.bytes(nbytes, t.bytes))
      return fail("checkpoint tensor record is malformed");
    (*tensors)[name] = std::move(t);
  }
  return true;
}

std::unique_ptr<llvm::MemoryBuffer> readWhole(llvm::StringRef path, std::string &err) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf) {
    err = "cannot read checkpoint '" + path.str() + "': " + buf.getError().message();
    return nullptr;
  }
  return std::move(*buf);
}

} // namespace

std::string modelHash(const Graph &g) {
  uint64_t h = fnv1a(g.name().data(), g.name().size());
  for (const Value *v : g.state()) {
    if (v->stateKind() != StateKind::Parameter && v->stateKind() != StateKind::Buffer)
      continue;
    std::string sig = v->name().str() + ":" + stateKindKeyword(v->stateKind()).str() + ":" +
                      v->type().str() + ";";
    h = fnv1a(sig.data(), sig.size(), h);
  }
  return hex64(h);
}

bool saveCheckpoint(llvm::StringRef path, const Program &program, const CheckpointInfo &info,
                    std::string &err, SpecialOutputs special) {
  const Graph &g = program.graph();
  Writer w;
  w.out.append(kMagic, sizeof kMagic);
  w.pod<uint32_t>(kCheckpointFormatVersion);
  std::string header = headerText(info, g.state().size());
  w.pod<uint64_t>(header.size());
  w.out += header;
  for (const Value *v : g.state()) {
    w.str(v->name());
    w.str(stateKindKeyword(v->stateKind()));
    w.str(dtypeName(v->dtype()));
    w.pod<uint32_t>(v->type().rank());
    for (int64_t d : v->type().dims())
      w.pod<int64_t>(d);
    uint64_t n = v->type().sizeInBytes();
    w.pod<uint64_t>(n);
    w.out.append(static_cast<const char *>(program.data(v)), n);
  }
  w.pod<uint64_t>(fnv1a(w.out.data(), w.out.size()));
  return writeFileAtomically(path, w.out, err, special);
}

bool readCheckpointInfo(llvm::StringRef path, CheckpointInfo &info, std::string &err) {
  auto buf = readWhole(path, err);
  return buf && readCheckpointInfoFromBuffer(path, buf->getBuffer(), info, err);
}

bool loadCheckpoint(llvm::StringRef path, Program &program, CheckpointInfo &info,
                    std::string &err) {
  auto buf = readWhole(path, err);
  return buf && loadCheckpointFromBuffer(path, buf->getBuffer(), program, info, err);
}

uint64_t checkpointChecksum(llvm::StringRef body) { return fnv1a(body.data(), body.size()); }

bool readCheckpointInfoFromBuffer(llvm::StringRef name, llvm::StringRef data, CheckpointInfo &info,
                                  std::string &err) {
  return parseCheckpoint(name, data, info, nullptr, err);
}

bool loadCheckpointFromBuffer(llvm::StringRef path, llvm::StringRef data, Program &program,
                              CheckpointInfo &info, std::string &err) {
  llvm::StringMap<StoredTensor> tensors;
  if (!parseCheckpoint(path, data, info, &tensors, err))
    return false;
  const Graph &g = program.graph();
  std::string expected = modelHash(g);
  if (info.modelHash != expected) {
    err = path.str() + ": checkpoint was written for model '" + info.model + "' (hash " +
          info.modelHash + "), not for this model '" + g.name() + "' (hash " + expected +
          "); its parameters or buffers differ";
    return false;
  }
  // Check everything before copying anything, so a refusal leaves the program as it was.
  for (const Value *v : g.state()) {
    auto it = tensors.find(v->name());
    if (it == tensors.end()) {
      err = path.str() + ": checkpoint has no " + stateKindKeyword(v->stateKind()).str() +
            " tensor '" + v->name().str() +
            "' (was it written with another optimizer or opt level?)";
      return false;
    }
    const StoredTensor &t = it->second;
    std::optional<DType> dt = parseDType(t.dtype);
    if (!dt || t.dims != std::vector<int64_t>(v->type().dims().begin(), v->type().dims().end()) ||
        *dt != v->dtype() || static_cast<int64_t>(t.bytes.size()) != v->type().sizeInBytes()) {
      std::string dims;
      for (size_t i = 0; i < t.dims.size(); ++i)
        dims += (i ? "," : "") + std::to_string(t.dims[i]);
      err = path.str() + ": checkpoint stores '" + v->name().str() + "' as " + t.dtype + "[" +
            dims + "], the program has " + v->type().str();
      return false;
    }
  }
  for (const Value *v : g.state()) {
    const StoredTensor &t = tensors.find(v->name())->second;
    std::memcpy(program.data(v), t.bytes.data(), t.bytes.size());
  }
  return true;
}

} // namespace ampc
