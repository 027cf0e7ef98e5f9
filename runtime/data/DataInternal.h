//===- DataInternal.h - Shared pieces of the data sources -------------------===//
//
// Not a public header: what the source files under runtime/data share. The
// file formats only differ in how they read bytes; once read, every file
// source is a set of in-memory arrays (SampleArray), one per graph input,
// served by one ArraySource that converts each sample into the input's dtype.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_RUNTIME_DATA_DATAINTERNAL_H
#define AMPC_RUNTIME_DATA_DATAINTERNAL_H

#include "runtime/data/DataSource.h"

#include "ir/DType.h"
#include "ir/MetaReader.h"

#include <optional>

namespace ampc {

class Value;

namespace data {

/// What the graph does with an input, found by walking its uses (through
/// reshape and flatten). It decides what synthetic data puts there, which
/// file data an input gets, and the range integer data must lie in.
enum class InputRole {
  Feature,          // a floating input the model computes from
  ClassTarget,      // the class-index target of cross_entropy
  RegressionTarget, // the target of mse_loss
  BinaryTarget,     // the target of binary_cross_entropy (values in [0, 1])
  EmbeddingIndex,   // the indices of an embedding
  OtherInteger,     // an integer input with none of the uses above
};

struct InputInfo {
  const Value *value = nullptr;
  unsigned index = 0; // position in Graph::inputs()
  InputRole role = InputRole::Feature;
  /// ClassTarget: number of classes (the logits' last dim) and ignore_index.
  int64_t classes = 0;
  int64_t ignoreIndex = -100;
  /// EmbeddingIndex: rows of the embedding table.
  int64_t numEmbeddings = 0;
  /// Elements of one sample (product of dims after the batch dim).
  int64_t sampleElements = 0;
  /// The data may lack this input (createDataSource's `optional`).
  bool optional = false;

  llvm::StringRef name() const;
  DType dtype() const;
  bool isFloating() const;
  /// "input 'image' [B,1,28,28]" for messages.
  std::string describe() const;
  /// Valid integer values for this input: [lo, hi) plus ignoreIndex for
  /// class targets. nullopt when any value goes.
  std::optional<std::pair<int64_t, int64_t>> indexRange() const;
};

/// One InputInfo per graph input, in Graph::inputs() order, those named in
/// `optional` marked so. Fails (err) for an input with rank 0, which has no
/// batch dimension.
bool analyzeInputs(const Graph &g, llvm::SmallVectorImpl<InputInfo> &out, std::string &err,
                   llvm::ArrayRef<std::string> optional = {});

/// out[i] = kernels::fastStandardNormal(key, firstIndex + i) for i < n, by
/// the AVX-512 copy of the loop where the CPU has it and `allowWide` (tests
/// compare the two: they give the same bits).
void fillStandardNormals(float *out, int64_t n, uint64_t key, uint64_t firstIndex,
                         bool allowWide = true);

/// Whether `index` lies in [0, n); else false with err saying so.
inline bool checkSampleIndex(int64_t index, int64_t n, std::string &err) {
  if (index >= 0 && index < n)
    return true;
  err = "sample " + std::to_string(index) + " is out of range [0, " + std::to_string(n) + ")";
  return false;
}

/// "data file 'path': msg" -- the form every file error takes.
std::string fileError(llvm::StringRef path, const llvm::Twine &msg);
/// `path` as written when absolute or when modelDir is empty, else
/// modelDir/path.
std::string resolvePath(llvm::StringRef modelDir, llvm::StringRef path);

/// N samples of one input read from a file: raw elements in a file dtype.
struct SampleArray {
  std::string path; // named in errors
  /// Element type of `bytes`: a DType, or unsigned bytes when isUint8.
  DType dtype = DType::F32;
  bool isUint8 = false;
  /// Multiplies values stored into a floating input (1/255 for IDX images).
  double scale = 1.0;
  int64_t numSamples = 0;
  int64_t sampleElements = 0;
  std::vector<char> bytes;
  /// The file line each sample came from (CSV), for messages; empty when
  /// samples are simply numbered.
  std::vector<int64_t> lines;
  /// An optional input the data does not have: no bytes, its rows stay zero.
  bool absent = false;

  bool isIntegral() const {
    return isUint8 || dtype == DType::I64 || dtype == DType::I32 || dtype == DType::Bool;
  }
  unsigned elementSize() const { return isUint8 ? 1 : dtypeSize(dtype); }
  /// "f32", "u8", ... for messages.
  llvm::StringRef dtypeName() const;
  /// "line 18" or "sample 17", for messages.
  std::string where(int64_t sample) const;
};

/// What a file source does with a sample holding NaN or +-inf in a
/// floating input (train.non_finite_data).
enum class NonFiniteData {
  Error, ///< refuse the file, naming the first such sample
  Skip,  ///< leave such samples out, and say how many (DataSource::skippedSamples)
};

/// A source over in-memory arrays, one per graph input (arrays[i] feeds
/// inputs[i]; an absent one, of an optional input, leaves its rows zero).
/// Checks that the arrays agree on N, fit the inputs' sample sizes and
/// dtypes, and that integer data lies in each input's range.
std::unique_ptr<DataSource> createArraySource(llvm::StringRef kind,
                                              llvm::ArrayRef<InputInfo> inputs,
                                              std::vector<SampleArray> arrays, std::string &err,
                                              NonFiniteData nonFinite = NonFiniteData::Error);

/// train.non_finite_data of the graph's meta (error when absent).
NonFiniteData nonFiniteDataPolicy(const Graph &g);

// The readers. Each returns nullptr with err naming the file on failure.
std::unique_ptr<DataSource> createSyntheticSource(llvm::ArrayRef<InputInfo> inputs, uint64_t seed,
                                                  int64_t size, std::string &err);
std::unique_ptr<DataSource> createNpySource(const Graph &g, llvm::ArrayRef<InputInfo> inputs,
                                            llvm::StringRef modelDir, llvm::StringRef key,
                                            std::string &err);
std::unique_ptr<DataSource> createCsvSource(const Graph &g, llvm::ArrayRef<InputInfo> inputs,
                                            llvm::StringRef modelDir, llvm::StringRef key,
                                            std::string &err);
std::unique_ptr<DataSource> createTokenSource(const Graph &g, llvm::ArrayRef<InputInfo> inputs,
                                              llvm::StringRef modelDir, llvm::StringRef key,
                                              std::string &err);
std::unique_ptr<DataSource> createImageFolderSource(const Graph &g,
                                                    llvm::ArrayRef<InputInfo> inputs,
                                                    llvm::StringRef modelDir, llvm::StringRef key,
                                                    std::string &err);
std::unique_ptr<DataSource> createIdxSource(const Graph &g, llvm::ArrayRef<InputInfo> inputs,
                                            llvm::StringRef modelDir, llvm::StringRef key,
                                            std::string &err);

} // namespace data
} // namespace ampc

#endif
