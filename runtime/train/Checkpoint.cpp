//===- Checkpoint.cpp -------------------------------------------------------===//
#include "runtime/train/Checkpoint.h"

#include "ir/support/Hash.h"

#include "ir/MetaReader.h"
#include "ir/support/AtomicFile.h"
#include "kernels/common/Storage.h"
#include "runtime/Program.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <vector>

namespace ampc {

namespace {

constexpr char kMagic[8] = {'A', 'M', 'P', 'C', 'C', 'K', 'P', 'T'};

std::string dimsText(llvm::ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
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
  if (!info.optimizer.empty())
    h += "optimizer: " + info.optimizer + "\n";
  h += "step: " + std::to_string(info.step) + "\n";
  h += "micro_step: " + std::to_string(info.microStep) + "\n";
  // What the run trained on (absent in older checkpoints): checked on resume.
  auto oneLine = [](std::string s) {
    for (char &c : s)
      if (c == '\n' || c == '\r')
        c = ' ';
    return s;
  };
  if (info.batchSize)
    h += "batch: " + std::to_string(info.batchSize) + "\n";
  if (!info.data.empty())
    h += "data: " + oneLine(info.data) + "\n";
  if (!info.lrSchedule.empty())
    h += "lr_schedule: " + oneLine(info.lrSchedule) + "\n";
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
  info.optimizer = kv["optimizer"];
  info.data = kv["data"];
  info.lrSchedule = kv["lr_schedule"];
  info.batchSize = 0;
  if (kv.count("batch") && llvm::StringRef(kv["batch"]).getAsInteger(10, info.batchSize))
    return false;
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
    // The bytes must be what the dtype and the dims say: a tensor may be
    // converted element by element on loading.
    std::optional<DType> dt = parseDType(t.dtype);
    uint64_t elements = 1;
    bool consistent = dt.has_value();
    for (int64_t d : t.dims)
      consistent =
          consistent && d >= 0 && !__builtin_mul_overflow(elements, uint64_t(d), &elements);
    uint64_t expected = 0;
    if (!consistent || __builtin_mul_overflow(elements, uint64_t(dtypeSize(*dt)), &expected) ||
        expected != nbytes)
      return fail("checkpoint tensor '" + name + "' is malformed (its dtype and shape do not " +
                  "match its " + std::to_string(nbytes) + " bytes)");
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
    // The shape, not the dtype: that follows the opt level.
    std::string sig = v->name().str() + ":" + stateKindKeyword(v->stateKind()).str() + ":" +
                      dimsText(v->type().dims()) + ";";
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

bool loadCheckpoint(llvm::StringRef path, Program &program, CheckpointInfo &info, std::string &err,
                    CheckpointWeights weights) {
  auto buf = readWhole(path, err);
  return buf && loadCheckpointFromBuffer(path, buf->getBuffer(), program, info, err, weights);
}

uint64_t checkpointChecksum(llvm::StringRef body) { return fnv1a(body.data(), body.size()); }

bool readCheckpointInfoFromBuffer(llvm::StringRef name, llvm::StringRef data, CheckpointInfo &info,
                                  std::string &err) {
  return parseCheckpoint(name, data, info, nullptr, err);
}

namespace {

/// "parameter" for the keyword "param"; the other keywords are words.
std::string kindWord(llvm::StringRef keyword) {
  return keyword == "param" ? "parameter" : keyword.str();
}

std::string plural(size_t n, llvm::StringRef one, llvm::StringRef many) {
  return std::to_string(n) + " " + (n == 1 ? one : many).str();
}

/// How one state tensor of the program gets its value from the checkpoint.
struct Restore {
  Value *v = nullptr;
  const StoredTensor *from = nullptr; ///< null: keep the program's initial value
  DType fromType = DType::F32;
};

/// The parameter an optimizer-state tensor `<param>.<slot>` belongs to: the
/// longest parameter name it starts with, followed by a dot ("" for shared
/// state such as optimizer.step).
std::string ownerOf(llvm::StringRef name, const llvm::StringMap<const Value *> &params) {
  for (size_t dot = name.rfind('.'); dot != llvm::StringRef::npos && dot > 0;
       dot = name.rfind('.', dot - 1)) {
    if (params.count(name.take_front(dot)))
      return name.take_front(dot).str();
    if (dot == 0)
      break;
  }
  return "";
}

} // namespace

std::string optimizerOf(const Graph &g) {
  bool lowered =
      llvm::any_of(g.nodes(), [](const Node &n) { return n.role() == NodeRole::Optimizer; });
  if (!lowered)
    return "";
  return metaString(g, "optimizer", "");
}

bool loadCheckpointFromBuffer(llvm::StringRef path, llvm::StringRef data, Program &program,
                              CheckpointInfo &info, std::string &err, CheckpointWeights weights) {
  llvm::StringMap<StoredTensor> tensors;
  if (!parseCheckpoint(path, data, info, &tensors, err))
    return false;
  const bool averaged = weights == CheckpointWeights::Average;
  if (averaged && !llvm::any_of(tensors, [](const auto &e) {
        return e.second.kind == "optstate" && llvm::StringRef(e.first()).endswith(".ema");
      })) {
    err = path.str() + ": checkpoint has no averaged weights (it was trained without " +
          "'train: {ema: {decay: ...}}')";
    return false;
  }
  const Graph &g = program.graph();
  const std::string level = metaString(g, "amp.opt_level", "O0");
  const std::string fromLevel = info.optLevel.empty() ? "unknown-level" : info.optLevel;
  const std::string optimizer = optimizerOf(g);

  // Is the file a checkpoint of this model? Its parameters and buffers
  // must be this model's: the same names, kinds and shapes (their dtypes
  // follow the opt level and are converted). Every difference is named.
  std::vector<std::string> differences;
  llvm::StringMap<const Value *> params; // parameters and buffers, by name
  for (const Value *v : g.state()) {
    if (v->stateKind() != StateKind::Parameter && v->stateKind() != StateKind::Buffer)
      continue;
    params[v->name()] = v;
    llvm::StringRef keyword = stateKindKeyword(v->stateKind());
    std::string kind = kindWord(keyword);
    auto it = tensors.find(v->name());
    if (it == tensors.end()) {
      differences.push_back("it has no " + kind + " '" + v->name().str() + "' (" + v->type().str() +
                            " here)");
      continue;
    }
    const StoredTensor &t = it->second;
    if (t.kind != keyword)
      differences.push_back("'" + v->name().str() + "' is a " + kindWord(t.kind) + " there, a " +
                            kind + " here");
    else if (llvm::ArrayRef<int64_t>(t.dims) != v->type().dims())
      differences.push_back(kind + " '" + v->name().str() + "' has shape " + dimsText(t.dims) +
                            " there, " + dimsText(v->type().dims()) + " here");
    else if (!parseDType(t.dtype) || !isFloating(*parseDType(t.dtype)) != !isFloating(v->dtype()))
      differences.push_back(kind + " '" + v->name().str() + "' is " + t.dtype + " there, " +
                            dtypeName(v->dtype()).str() + " here");
  }
  std::vector<std::string> extra;
  for (const auto &entry : tensors) {
    const StoredTensor &t = entry.second;
    if ((t.kind == "param" || t.kind == "buffer") && !params.count(entry.first()))
      extra.push_back("it has " + kindWord(t.kind) + " '" + entry.first().str() + "' (" + t.dtype +
                      dimsText(t.dims) + "), which this model lacks");
  }
  std::sort(extra.begin(), extra.end()); // the file's order is lost in the map
  differences.insert(differences.end(), extra.begin(), extra.end());
  if (!differences.empty()) {
    std::string list;
    const size_t shown = std::min<size_t>(differences.size(), 3);
    for (size_t i = 0; i < shown; ++i)
      list += (i ? "; " : "") + differences[i];
    if (differences.size() > shown)
      list += "; and " + plural(differences.size() - shown, "more difference", "more differences");
    err = path.str() + ": checkpoint was written for model '" + info.model + "', which does not " +
          "fit this model '" + g.name() + "': " + list;
    return false;
  }
  if (!info.optimizer.empty() && !optimizer.empty() && info.optimizer != optimizer) {
    err = path.str() + ": checkpoint was written training with optimizer '" + info.optimizer +
          "', this model trains with '" + optimizer +
          "'; optimizer state does not carry over from one optimizer to another";
    return false;
  }

  // Where each state tensor of the program comes from. A tensor stored with
  // the program's own dtype and shape is copied as it is (so a checkpoint of
  // the same level resumes bit for bit); otherwise:
  //  - a parameter or buffer comes from its fp32 master where the checkpoint
  //    has one, else from the stored value, converted to this dtype;
  //  - a master weight comes from the checkpoint's parameter, widened;
  //  - optimizer state and loss-scaler state carry over by name (optimizer
  //    state is named after its parameter), converted; what the checkpoint
  //    lacks keeps its initial value.
  std::vector<Restore> plan;
  size_t fromAverages = 0, fromMasters = 0, halfAsStored = 0, converted = 0, convertedBuffers = 0,
         mastersBuilt = 0, optCarried = 0, optDefaulted = 0, scalerCarried = 0, scalerDefaulted = 0;
  std::set<std::string> rebuiltDTypes, storedDTypes;
  auto stored = [&](llvm::StringRef name, llvm::StringRef kind) -> const StoredTensor * {
    auto it = tensors.find(name);
    return it != tensors.end() && it->second.kind == kind ? &it->second : nullptr;
  };
  auto exact = [](const StoredTensor *t, const Value *v) {
    return t && t->dtype == dtypeName(v->dtype()) &&
           llvm::ArrayRef<int64_t>(t->dims) == v->type().dims();
  };
  auto fits = [&](const StoredTensor *t, const Value *v, std::string &why) {
    std::optional<DType> dt = parseDType(t->dtype);
    if (llvm::ArrayRef<int64_t>(t->dims) != v->type().dims()) {
      why = "has shape " + dimsText(t->dims) + " there, " + dimsText(v->type().dims()) + " here";
      return false;
    }
    if (!dt || isFloating(*dt) != isFloating(v->dtype())) {
      why = "is " + t->dtype + " there, " + dtypeName(v->dtype()).str() + " here";
      return false;
    }
    return true;
  };
  for (Value *v : g.state()) {
    Restore r;
    r.v = v;
    const std::string name = v->name().str();
    std::string why;
    switch (v->stateKind()) {
    case StateKind::Parameter:
    case StateKind::Buffer: {
      const StoredTensor *t = stored(name, stateKindKeyword(v->stateKind()));
      const StoredTensor *master = stored(name + ".master", "master");
      const StoredTensor *average = averaged && v->stateKind() == StateKind::Parameter
                                        ? stored(name + ".ema", "optstate")
                                        : nullptr;
      if (average && !fits(average, v, why)) {
        err = path.str() + ": checkpoint's average '" + name + ".ema' " + why;
        return false;
      }
      if (average) {
        r.from = average;
        ++fromAverages;
      } else if (exact(t, v)) {
        r.from = t; // the same dtype: as stored (a half copy is its master rounded)
        if (master && isHalfType(v->dtype()))
          ++halfAsStored;
      } else if (master && llvm::ArrayRef<int64_t>(master->dims) == v->type().dims()) {
        r.from = master;
        ++fromMasters;
        rebuiltDTypes.insert(dtypeName(v->dtype()).str());
      } else {
        r.from = t;
        ++(v->stateKind() == StateKind::Parameter ? converted : convertedBuffers);
        storedDTypes.insert(t->dtype);
        rebuiltDTypes.insert(dtypeName(v->dtype()).str());
      }
      break;
    }
    case StateKind::MasterWeight: {
      const StoredTensor *t = stored(name, "master");
      llvm::StringRef param = v->name();
      bool owned = param.consume_back(".master") && params.count(param);
      // The average stands for the parameter's fp32 truth, which the master
      // is.
      if (averaged && owned && (r.from = stored((param + ".ema").str(), "optstate")))
        break;
      if (exact(t, v)) {
        r.from = t;
        break;
      }
      if (owned) {
        r.from = stored(param, "param");
        if (!r.from)
          r.from = stored(param, "buffer");
        ++mastersBuilt;
      }
      if (!r.from) {
        err = path.str() + ": cannot build the master weight '" + name +
              "': the checkpoint has no parameter it belongs to";
        return false;
      }
      break;
    }
    case StateKind::OptimizerState:
    case StateKind::ScalerState: {
      bool isOpt = v->stateKind() == StateKind::OptimizerState;
      const StoredTensor *t = stored(name, stateKindKeyword(v->stateKind()));
      if (t && !fits(t, v, why)) {
        std::string owner = isOpt ? ownerOf(name, params) : "";
        err = path.str() + ": checkpoint's " + stateKindKeyword(v->stateKind()).str() +
              " tensor '" + name + "'" + (owner.empty() ? "" : " (of parameter '" + owner + "')") +
              " " + why;
        return false;
      }
      if (!t && isOpt && info.optimizer.empty() &&
          llvm::any_of(tensors, [](const auto &e) { return e.second.kind == "optstate"; })) {
        // A checkpoint that does not say its optimizer (written by an older
        // ampc) with optimizer state, but not this tensor: most likely
        // another optimizer.
        err = path.str() + ": checkpoint has no optstate tensor '" + name +
              "' (was it written with another optimizer?)";
        return false;
      }
      r.from = t;
      if (isOpt)
        ++(t ? optCarried : optDefaulted);
      else
        ++(t ? scalerCarried : scalerDefaulted);
      break;
    }
    }
    if (r.from)
      r.fromType = *parseDType(r.from->dtype);
    plan.push_back(r);
  }
  // What the checkpoint has that this program does not keep.
  size_t mastersDropped = 0, optDropped = 0, scalerDropped = 0;
  std::optional<double> storedScale;
  for (const auto &entry : tensors) {
    const StoredTensor &t = entry.second;
    const Value *here = g.lookup(entry.first());
    bool kept = here && here->isState() && stateKindKeyword(here->stateKind()) == t.kind;
    if (t.kind == "scaler" && entry.first().endswith(".scale") && t.dtype == "f32" &&
        t.bytes.size() == sizeof(float)) {
      float f;
      std::memcpy(&f, t.bytes.data(), sizeof f);
      storedScale = f;
    }
    if (kept)
      continue;
    if (t.kind == "master")
      ++mastersDropped;
    else if (t.kind == "optstate")
      ++optDropped;
    else if (t.kind == "scaler")
      ++scalerDropped;
  }

  // Nothing is written before everything has been checked.
  for (const Restore &r : plan) {
    if (!r.from)
      continue;
    void *dst = program.dataToOverwrite(r.v);
    if (r.fromType == r.v->dtype()) {
      std::memcpy(dst, r.from->bytes.data(), r.from->bytes.size());
      continue;
    }
    // The record's bytes sit in the file's buffer at any offset: converted
    // from an aligned copy (a typed load from them would be misaligned).
    std::vector<uint64_t> aligned((r.from->bytes.size() + 7) / 8);
    std::memcpy(aligned.data(), r.from->bytes.data(), r.from->bytes.size());
    int64_t n = r.v->type().numElements();
    for (int64_t i = 0; i < n; ++i)
      kernels::storeFromDouble(r.v->dtype(), dst, i,
                               kernels::loadAsDouble(r.fromType, aligned.data(), i));
  }

  // What was rebuilt, carried over, dropped or defaulted, said once.
  std::vector<std::string> parts;
  auto join = [](const std::set<std::string> &s) {
    std::string out;
    for (const std::string &x : s)
      out += (out.empty() ? "" : "/") + x;
    return out;
  };
  if (fromAverages)
    parts.push_back(plural(fromAverages, "parameter", "parameters") +
                    " taken from their averages (train.ema)");
  if (fromMasters)
    parts.push_back(plural(fromMasters, "parameter", "parameters") +
                    " taken from their fp32 masters (stored as " + join(rebuiltDTypes) + " here)");
  if (converted || convertedBuffers)
    parts.push_back(
        (converted ? plural(converted, "parameter", "parameters") : std::string()) +
        (converted && convertedBuffers ? " and " : "") +
        (convertedBuffers ? plural(convertedBuffers, "buffer", "buffers") : std::string()) +
        " converted from " + join(storedDTypes) + " to " + join(rebuiltDTypes));
  if (mastersBuilt)
    parts.push_back(plural(mastersBuilt, "fp32 master weight", "fp32 master weights") +
                    " built from the checkpoint's parameters");
  if (mastersDropped && halfAsStored)
    parts.push_back(plural(halfAsStored, "parameter", "parameters") +
                    " kept in half as stored (their masters rounded)");
  if (mastersDropped) {
    bool allF32 =
        llvm::all_of(params, [](const auto &e) { return e.second->dtype() == DType::F32; });
    parts.push_back("the checkpoint's " +
                    plural(mastersDropped, "master weight is", "master weights are") +
                    " dropped (" +
                    (allF32 ? "the parameters are fp32 at " + level
                            : level + " here trains without master weights") +
                    ")");
  }
  // A program that only runs forward keeps no training state: that it
  // leaves the checkpoint's behind is no news.
  const bool trains =
      llvm::any_of(g.nodes(), [](const Node &n) { return n.role() == NodeRole::Optimizer; });
  if (!trains)
    mastersDropped = optDropped = scalerDropped = 0;
  bool changed = fromAverages || fromMasters || converted || convertedBuffers || mastersBuilt ||
                 mastersDropped || optDefaulted || optDropped || scalerDefaulted || scalerDropped ||
                 (trains && info.optLevel != level);
  if (changed && optCarried)
    parts.push_back("optimizer state carried over (" + plural(optCarried, "tensor", "tensors") +
                    ")");
  if (optDefaulted)
    parts.push_back(plural(optDefaulted, "optimizer state tensor", "optimizer state tensors") +
                    " not in the checkpoint start from their initial values");
  if (optDropped)
    parts.push_back(plural(optDropped, "optimizer state tensor", "optimizer state tensors") +
                    " of the checkpoint not used here");
  auto scaleText = [&] {
    if (!storedScale)
      return std::string();
    char buf[64];
    std::snprintf(buf, sizeof buf, " (scale %g)", *storedScale);
    return std::string(buf);
  };
  if (changed && scalerCarried)
    parts.push_back("loss scaler carried over" + scaleText());
  if (scalerDefaulted)
    parts.push_back("the loss scaler starts afresh (the " + fromLevel +
                    " checkpoint has no dynamic loss scaler)");
  if (scalerDropped)
    parts.push_back("the checkpoint's loss scaler state" + scaleText() + " is dropped (" + level +
                    " here uses a static loss scale)");
  info.conversionNote.clear();
  if (changed) {
    info.conversionNote = "a checkpoint written at " + fromLevel + ", loaded at " + level;
    if (!parts.empty()) {
      info.conversionNote += ": ";
      for (size_t i = 0; i < parts.size(); ++i)
        info.conversionNote += (i ? "; " : "") + parts[i];
    }
  }
  return true;
}

} // namespace ampc
