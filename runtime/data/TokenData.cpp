//===- TokenData.cpp - A language model's token stream -------------------------===//
//
// train.data: {tokens: {path: train.bin, dtype: uint16, context: 256}} reads
// one flat file of token ids (nanoGPT's train.bin: little-endian, no header)
// and serves windows of context + 1 tokens: x = tokens [o, o + context) feeds
// the embedding's index input, y = tokens [o + 1, o + context + 1) the
// cross-entropy target. A model that takes positions as an input (a GPT
// written with a position embedding over an input) names it, `positions:
// pos`, and gets 0, 1, ..., context - 1 there.
//
// An epoch is floor((L - 1) / context) samples, as many windows as fit side
// by side, so one epoch reads about every token once. A training draw of
// sample i in epoch e starts at a uniform random offset made from (seed, e, i)
// alone (nanoGPT draws its offsets the same way, uniformly over the stream);
// an evaluation draw is the fixed window o = i x context, the same every
// time. The file is mapped, not read: a stream of gigabytes costs no memory
// up front, and every load only reads it, so rows load on any thread.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataInternal.h"

#include "ir/Graph.h"
#include "kernels/common/Random.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>

namespace ampc::data {
namespace {

constexpr uint64_t kWindowStreamBase = 0x746f6b656e000000ull; // + epoch

/// A token file's element type.
struct TokenType {
  llvm::StringRef name;
  unsigned size;
  bool isSigned;
};

constexpr TokenType kTokenTypes[] = {
    {"uint16", 2, false}, {"uint32", 4, false}, {"int32", 4, true}, {"int64", 8, true}};

const TokenType *findTokenType(llvm::StringRef name) {
  for (const TokenType &t : kTokenTypes)
    if (t.name == name)
      return &t;
  return nullptr;
}

class TokenSource final : public DataSource {
public:
  TokenSource(std::unique_ptr<llvm::MemoryBuffer> file, TokenType type, int64_t length,
              int64_t context, uint64_t seed, const InputInfo *x, const InputInfo *y,
              const InputInfo *positions)
      : file_(std::move(file)), type_(type), length_(length), context_(context), seed_(seed),
        x_(x ? int(x->index) : -1), y_(y ? int(y->index) : -1),
        positions_(positions ? int(positions->index) : -1) {}

  llvm::StringRef kind() const override { return "tokens"; }
  int64_t numSamples() const override { return (length_ - 1) / context_; }
  bool concurrentLoads() const override { return true; }

  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    return loadDrawnSample(index, kEvaluationDraw, batch, row, err);
  }

  bool loadDrawnSample(int64_t index, int64_t epoch, llvm::MutableArrayRef<HostTensor> batch,
                       int64_t row, std::string &err) override {
    if (!checkSampleIndex(index, numSamples(), err))
      return false;
    int64_t offset = windowStart(index, epoch);
    if (x_ >= 0)
      copyTokens(offset, batch[x_], row);
    if (y_ >= 0)
      copyTokens(offset + 1, batch[y_], row);
    if (positions_ >= 0)
      writePositions(batch[positions_], row);
    return true;
  }

  /// Where the window of sample `index` starts in draw `epoch`.
  int64_t windowStart(int64_t index, int64_t epoch) const {
    if (epoch == kEvaluationDraw)
      return index * context_;
    // Offsets [0, L - context - 1]: the target's last token is the file's last.
    auto choices = static_cast<uint64_t>(length_ - context_);
    uint64_t bits = kernels::randomBits(seed_, kWindowStreamBase + static_cast<uint64_t>(epoch),
                                        static_cast<uint64_t>(index));
    return static_cast<int64_t>((static_cast<unsigned __int128>(bits) * choices) >> 64);
  }

  /// Token `i` of the stream.
  int64_t tokenAt(int64_t i) const {
    const char *p = file_->getBufferStart() + i * type_.size;
    switch (type_.size) {
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4:
      if (type_.isSigned) {
        int32_t v;
        std::memcpy(&v, p, 4);
        return v;
      } else {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    }
  }

private:
  void copyTokens(int64_t first, HostTensor &out, int64_t row) const {
    if (out.dtype() == DType::I64) {
      int64_t *dst = out.values<int64_t>().data() + row * context_;
      for (int64_t j = 0; j < context_; ++j)
        dst[j] = tokenAt(first + j);
    } else {
      int32_t *dst = out.values<int32_t>().data() + row * context_;
      for (int64_t j = 0; j < context_; ++j)
        dst[j] = static_cast<int32_t>(tokenAt(first + j));
    }
  }

  void writePositions(HostTensor &out, int64_t row) const {
    for (int64_t j = 0; j < context_; ++j)
      if (out.dtype() == DType::I64)
        out.values<int64_t>()[row * context_ + j] = j;
      else
        out.values<int32_t>()[row * context_ + j] = static_cast<int32_t>(j);
  }

  std::unique_ptr<llvm::MemoryBuffer> file_;
  TokenType type_;
  int64_t length_, context_;
  uint64_t seed_;
  int x_, y_, positions_; // graph input indices; -1: none
};

/// The inputs a token stream feeds: the embedding's indices (x; else the
/// first other integer input) and the cross-entropy's class target (y).
/// Any other input is an error.
bool findTokenInputs(llvm::ArrayRef<InputInfo> inputs, llvm::StringRef positionsName,
                     const InputInfo *&x, const InputInfo *&y, const InputInfo *&positions,
                     std::string &err) {
  x = y = positions = nullptr;
  for (const InputInfo &in : inputs) {
    if (!positionsName.empty() && in.name() == positionsName) {
      positions = &in;
      continue;
    }
    bool target = in.role == InputRole::ClassTarget;
    bool ids = in.role == InputRole::EmbeddingIndex || in.role == InputRole::OtherInteger;
    const InputInfo *&slot = target ? y : x;
    if ((!target && !ids) || slot) {
      err = "tokens data feeds a language model: token ids into an embedding and the next "
            "tokens into its cross_entropy target; " +
            in.describe() + " is " + (slot ? "a second such input" : "neither") +
            "; a positions input is named by 'positions: <input>'; use npy data for other "
            "models";
      return false;
    }
    slot = &in;
  }
  if (!x) {
    err = "tokens data found no integer input for the token ids";
    return false;
  }
  if (!positionsName.empty() && !positions) {
    err = "tokens data: 'positions' names '" + positionsName.str() + "', which is not an input";
    return false;
  }
  return true;
}

} // namespace

std::unique_ptr<DataSource> createTokenSource(const Graph &g, llvm::ArrayRef<InputInfo> inputs,
                                              llvm::StringRef modelDir, llvm::StringRef key,
                                              std::string &err) {
  std::string prefix = key.str() + ".";
  const InputInfo *x, *y, *positions;
  if (!findTokenInputs(inputs, metaString(g, prefix + "positions", ""), x, y, positions, err))
    return nullptr;
  for (const InputInfo *in : {x, y, positions})
    if (in && in->dtype() != DType::I64 && in->dtype() != DType::I32) {
      err = "tokens data needs i64 or i32 inputs; " + in->describe() + " is " +
            dtypeName(in->dtype()).str();
      return nullptr;
    }
  int64_t context = metaInt(g, prefix + "context", x->sampleElements);
  for (const InputInfo *in : {x, y, positions})
    if (in && in->sampleElements != context) {
      err = "tokens data has context " + std::to_string(context) + " but " + in->describe() +
            " takes " + std::to_string(in->sampleElements) + " tokens a sample";
      return nullptr;
    }
  std::string path = resolvePath(modelDir, metaString(g, prefix + "path", ""));
  std::string typeName = metaString(g, prefix + "dtype", "uint16");
  const TokenType *type = findTokenType(typeName);
  if (!type) {
    err = "tokens data: unknown dtype '" + typeName + "'; expected uint16, uint32, int32 or int64";
    return nullptr;
  }
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file) {
    err = fileError(path, "cannot read: " + file.getError().message());
    return nullptr;
  }
  auto bytes = static_cast<int64_t>((*file)->getBufferSize());
  if (bytes % type->size) {
    err = fileError(path, "holds " + llvm::Twine(bytes) + " bytes, not a whole number of " +
                              typeName + " tokens (" + llvm::Twine(type->size) + " bytes each)");
    return nullptr;
  }
  int64_t length = bytes / type->size;
  if (length < context + 1) {
    err = fileError(path, "holds " + llvm::Twine(length) + " tokens; a window of context " +
                              llvm::Twine(context) + " needs " + llvm::Twine(context + 1));
    return nullptr;
  }
  // Every id must index the embedding and the logits: one pass over the
  // stream now, rather than an out-of-range gather mid-training.
  int64_t limit = INT64_MAX;
  for (const InputInfo *in : {x, y})
    if (in && in->indexRange())
      limit = std::min(limit, in->indexRange()->second);
  uint64_t seed = static_cast<uint64_t>(metaInt(g, prefix + "seed", metaInt(g, "train.seed", 0)));
  auto source = std::make_unique<TokenSource>(std::move(*file), *type, length, context, seed, x, y,
                                              positions);
  int64_t bad = -1, badValue = 0;
  for (int64_t i = 0; i < length; ++i) {
    int64_t v = source->tokenAt(i);
    if (v < 0 || v >= limit) {
      bad = i;
      badValue = v;
      break;
    }
  }
  if (bad >= 0) {
    err = fileError(path, "token " + llvm::Twine(bad) + " is " + llvm::Twine(badValue) +
                              ", outside the vocabulary [0, " + llvm::Twine(limit) + ") of " +
                              (x ? x->describe() : y->describe()));
    return nullptr;
  }
  return source;
}

} // namespace ampc::data
