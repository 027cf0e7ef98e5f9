//===- DataSource.cpp - The factory and what the sources share --------------===//
#include "runtime/data/DataInternal.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Path.h"

#include <new>

namespace ampc {

DataSource::~DataSource() = default;

namespace data {

llvm::StringRef InputInfo::name() const { return value->name(); }
DType InputInfo::dtype() const { return value->dtype(); }
bool InputInfo::isFloating() const { return ampc::isFloating(value->dtype()); }

std::string InputInfo::describe() const {
  std::string s = "input '" + name().str() + "' [B";
  for (int64_t d : value->type().dims().drop_front())
    s += "," + std::to_string(d);
  return s + "]";
}

std::optional<std::pair<int64_t, int64_t>> InputInfo::indexRange() const {
  if (role == InputRole::ClassTarget)
    return std::make_pair(int64_t(0), classes);
  if (role == InputRole::EmbeddingIndex)
    return std::make_pair(int64_t(0), numEmbeddings);
  return std::nullopt;
}

// Finds what `v`'s values end up as, following reshape and flatten (which
// keep the values) to the loss or embedding that consumes them.
static void classifyUses(const Value *v, InputInfo &info) {
  for (const Use &use : v->uses()) {
    const Node *n = use.user;
    OpKind k = n->kind();
    if (k == OpKind::Reshape || k == OpKind::Flatten) {
      classifyUses(n->result(0), info);
    } else if (k == OpKind::CrossEntropy && use.operandIndex == 1) {
      info.role = InputRole::ClassTarget;
      info.classes = n->operand(0)->type().dims().back();
      if (const Attribute *a = n->findAttr("ignore_index"))
        info.ignoreIndex = a->getInt();
    } else if (k == OpKind::MseLoss && use.operandIndex == 1) {
      info.role = InputRole::RegressionTarget;
    } else if (k == OpKind::BinaryCrossEntropy && use.operandIndex == 1) {
      info.role = InputRole::BinaryTarget;
    } else if (k == OpKind::Embedding && use.operandIndex == 0) {
      info.role = InputRole::EmbeddingIndex;
      info.numEmbeddings = n->operand(1)->type().dim(0);
    }
    if (info.role != InputRole::Feature && info.role != InputRole::OtherInteger)
      return;
  }
}

bool analyzeInputs(const Graph &g, llvm::SmallVectorImpl<InputInfo> &out, std::string &err,
                   llvm::ArrayRef<std::string> optional) {
  out.clear();
  for (unsigned i = 0; i < g.inputs().size(); ++i) {
    const Value *v = g.inputs()[i];
    if (v->type().rank() == 0) {
      err = "input '" + v->name().str() + "' is a scalar; a data source needs a batch dimension";
      return false;
    }
    InputInfo info;
    info.value = v;
    info.index = i;
    info.role = isFloating(v->dtype()) ? InputRole::Feature : InputRole::OtherInteger;
    classifyUses(v, info);
    info.optional = llvm::is_contained(optional, v->name());
    info.sampleElements = 1;
    for (int64_t d : v->type().dims().drop_front())
      info.sampleElements *= d;
    out.push_back(info);
  }
  return true;
}

llvm::StringRef SampleArray::dtypeName() const {
  return isUint8 ? llvm::StringRef("u8") : ampc::dtypeName(dtype);
}

std::string SampleArray::where(int64_t sample) const {
  if (sample >= 0 && sample < static_cast<int64_t>(lines.size()))
    return "line " + std::to_string(lines[sample]);
  return "sample " + std::to_string(sample);
}

NonFiniteData nonFiniteDataPolicy(const Graph &g) {
  return metaString(g, "train.non_finite_data", "error") == "skip" ? NonFiniteData::Skip
                                                                   : NonFiniteData::Error;
}

std::string fileError(llvm::StringRef path, const llvm::Twine &msg) {
  return ("data file '" + path + "': " + msg).str();
}

std::string resolvePath(llvm::StringRef modelDir, llvm::StringRef path) {
  if (modelDir.empty() || llvm::sys::path::is_absolute(path))
    return path.str();
  llvm::SmallString<256> full(modelDir);
  llvm::sys::path::append(full, path);
  return std::string(full);
}

} // namespace data

using namespace data;

std::unique_ptr<DataSource> createDataSource(const Graph &g, llvm::StringRef modelDir,
                                             DiagnosticEngine &diag, llvm::StringRef key,
                                             llvm::ArrayRef<std::string> optional) {
  std::string err;
  llvm::SmallVector<InputInfo, 4> inputs;
  std::unique_ptr<DataSource> source;
  if (g.inputs().empty()) {
    err = "the graph has no inputs to feed";
  } else if (analyzeInputs(g, inputs, err, optional)) {
    std::string kind = metaString(g, key, "synthetic");
    // The sources hold their files (and the synthetic teacher its tables)
    // in memory; a sample too large for the machine is an error, not an
    // abort.
    try {
      if (kind == "synthetic")
        source = createSyntheticSource(inputs,
                                       static_cast<uint64_t>(metaInt(g, (key + ".seed").str(), 0)),
                                       metaInt(g, (key + ".size").str(), 1024), err);
      else if (kind == "npy")
        source = createNpySource(g, inputs, modelDir, key, err);
      else if (kind == "csv")
        source = createCsvSource(g, inputs, modelDir, key, err);
      else if (kind == "idx")
        source = createIdxSource(g, inputs, modelDir, key, err);
      else if (kind == "tokens")
        source = createTokenSource(g, inputs, modelDir, key, err);
      else if (kind == "image_folder")
        source = createImageFolderSource(g, inputs, modelDir, key, err);
      else
        err = "unknown data source '" + kind +
              "'; expected synthetic, idx, npy, csv, tokens or image_folder";
    } catch (const std::bad_alloc &) {
      source.reset();
      err = "out of memory while setting up the " + kind + " data";
    }
  }
  if (!source) {
    diag.error(Location(), err);
    return source;
  }
  if (int64_t skipped = source->skippedSamples(); skipped && source->kind() == "image_folder")
    diag.warning(Location(), "left out " + llvm::Twine(skipped) + " of " +
                                 llvm::Twine(skipped + source->numSamples()) +
                                 " image files that are not JPEG or PNG images (bad_files: skip; "
                                 "the first: " +
                                 source->firstSkipped() + ")");
  else if (skipped)
    diag.warning(Location(), "skipped " + llvm::Twine(skipped) + " of " +
                                 llvm::Twine(skipped + source->numSamples()) +
                                 " samples holding NaN or inf (train.non_finite_data: skip; the "
                                 "first: " +
                                 source->firstSkipped() + ")");
  return source;
}

llvm::SmallVector<HostTensor, 4> makeBatchTensors(const Graph &g) {
  llvm::SmallVector<HostTensor, 4> batch;
  for (const Value *v : g.inputs())
    batch.emplace_back(v->type());
  return batch;
}

BatchOptions batchOptionsFromMeta(const Graph &g) {
  BatchOptions o;
  int64_t firstDim =
      g.inputs().empty() || g.inputs()[0]->type().rank() == 0 ? 1 : g.inputs()[0]->type().dim(0);
  o.batchSize = metaInt(g, "batch", firstDim);
  o.shuffle = metaBool(g, "train.shuffle", true);
  o.seed = static_cast<uint64_t>(metaInt(g, "train.seed", 0));
  o.dropLast = metaBool(g, "train.drop_last", true);
  return o;
}

} // namespace ampc
