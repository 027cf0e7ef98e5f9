//===- ArraySource.cpp - Serve samples from in-memory arrays -----------------===//
//
// What every file source becomes once read: one array per graph input.
// Conversion to the input's dtype happens per sample, so memory holds the
// file's bytes once (u8 MNIST images stay u8, not 4x as f32).
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataInternal.h"

#include "kernels/common/Storage.h"

#include "llvm/ADT/Twine.h"

#include <cmath>
#include <cstring>

namespace ampc::data {
namespace {

/// Element i of an integral array.
int64_t loadInteger(const SampleArray &a, int64_t i) {
  const char *p = a.bytes.data();
  if (a.isUint8)
    return static_cast<uint8_t>(p[i]);
  if (a.dtype == DType::I64) {
    int64_t v;
    std::memcpy(&v, p + i * 8, 8);
    return v;
  }
  if (a.dtype == DType::I32) {
    int32_t v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
  }
  return p[i] != 0; // Bool
}

/// Element i of any array as a double (before scaling).
double loadReal(const SampleArray &a, int64_t i) {
  if (a.isIntegral())
    return static_cast<double>(loadInteger(a, i));
  return kernels::loadAsDouble(a.dtype, a.bytes.data(), i);
}

class ArraySource final : public DataSource {
public:
  /// `kept`, when not empty, lists the samples served (the others held NaN
  /// or inf and are skipped); `firstSkipped` says where the first of those was.
  ArraySource(std::string kind, std::vector<SampleArray> arrays, std::vector<int64_t> kept,
              std::string firstSkipped)
      : kind_(std::move(kind)), arrays_(std::move(arrays)), kept_(std::move(kept)),
        firstSkipped_(std::move(firstSkipped)) {}

  llvm::StringRef kind() const override { return kind_; }
  int64_t numSamples() const override {
    return kept_.empty() ? stored() : static_cast<int64_t>(kept_.size());
  }
  int64_t skippedSamples() const override {
    return kept_.empty() ? 0 : stored() - static_cast<int64_t>(kept_.size());
  }
  std::string firstSkipped() const override { return firstSkipped_; }

  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    if (!checkSampleIndex(index, numSamples(), err))
      return false;
    if (batch.size() != arrays_.size()) {
      err = "expected " + std::to_string(arrays_.size()) + " batch tensors, got " +
            std::to_string(batch.size());
      return false;
    }
    int64_t stored = kept_.empty() ? index : kept_[index];
    for (size_t i = 0; i < arrays_.size(); ++i)
      copySample(arrays_[i], stored, batch[i], row);
    return true;
  }
  /// The arrays are read only once loaded.
  bool concurrentLoads() const override { return true; }

private:
  /// Samples in the files (the arrays present agree on it).
  int64_t stored() const {
    for (const SampleArray &a : arrays_)
      if (!a.absent)
        return a.numSamples;
    return 0;
  }

  static void copySample(const SampleArray &a, int64_t index, HostTensor &out, int64_t row) {
    assert(row >= 0 && row < out.dims()[0] && "row outside the batch");
    if (a.absent) {
      std::memset(out.rowData(row), 0,
                  static_cast<size_t>(out.rowElements()) * dtypeSize(out.dtype()));
      return;
    }
    assert(out.rowElements() == a.sampleElements && "array does not fit the input");
    int64_t n = a.sampleElements, src = index * n, dst = row * n;
    DType to = out.dtype();
    if (!a.isUint8 && a.dtype == to && a.scale == 1.0) {
      std::memcpy(out.rowData(row), a.bytes.data() + src * a.elementSize(),
                  static_cast<size_t>(n) * a.elementSize());
      return;
    }
    if (isFloating(to)) {
      for (int64_t j = 0; j < n; ++j)
        out.setFromDouble(dst + j, loadReal(a, src + j) * a.scale);
      return;
    }
    // Integer inputs come only from integral arrays (checked on creation),
    // converted without a detour through double.
    for (int64_t j = 0; j < n; ++j) {
      int64_t v = loadInteger(a, src + j);
      if (to == DType::I64)
        out.values<int64_t>()[dst + j] = v;
      else if (to == DType::I32)
        out.values<int32_t>()[dst + j] = static_cast<int32_t>(v);
      else
        out.values<uint8_t>()[dst + j] = v != 0;
    }
  }

  std::string kind_;
  std::vector<SampleArray> arrays_;
  std::vector<int64_t> kept_;
  std::string firstSkipped_;
};

/// The first non-finite value of sample `s` of a floating array, as its
/// position within the sample, or -1.
int64_t firstNonFinite(const SampleArray &a, int64_t s) {
  if (a.isIntegral())
    return -1;
  for (int64_t j = 0; j < a.sampleElements; ++j)
    if (!std::isfinite(loadReal(a, s * a.sampleElements + j)))
      return j;
  return -1;
}

/// Every integer value of `a` must lie in the input's range (a label of 10
/// with 10 classes would otherwise index past the logits).
bool checkIndexRange(const InputInfo &in, const SampleArray &a, std::string &err) {
  auto range = in.indexRange();
  if (!range)
    return true;
  int64_t total = a.numSamples * a.sampleElements;
  for (int64_t i = 0; i < total; ++i) {
    int64_t v = loadInteger(a, i);
    if ((v >= range->first && v < range->second) ||
        (in.role == InputRole::ClassTarget && v == in.ignoreIndex))
      continue;
    const char *what = in.role == InputRole::ClassTarget ? "class label" : "embedding index";
    err =
        fileError(a.path, "sample " + llvm::Twine(i / a.sampleElements) + ": " + what + " " +
                              llvm::Twine(v) + " for " + in.describe() + " is outside [" +
                              llvm::Twine(range->first) + ", " + llvm::Twine(range->second) + ")");
    return false;
  }
  return true;
}

} // namespace

std::unique_ptr<DataSource> createArraySource(llvm::StringRef kind,
                                              llvm::ArrayRef<InputInfo> inputs,
                                              std::vector<SampleArray> arrays, std::string &err,
                                              NonFiniteData nonFinite) {
  assert(arrays.size() == inputs.size() && !arrays.empty() && "one array per input");
  // The arrays present agree with the first of them; an absent one (an
  // optional input the data lacks) has nothing to check.
  size_t first = 0;
  while (first < arrays.size() && arrays[first].absent)
    ++first;
  if (first == arrays.size()) {
    err = "the " + kind.str() + " data has none of the inputs";
    return nullptr;
  }
  const SampleArray &reference = arrays[first];
  for (size_t i = 0; i < arrays.size(); ++i) {
    const SampleArray &a = arrays[i];
    const InputInfo &in = inputs[i];
    if (a.absent) {
      assert(in.optional && "only an optional input may be absent");
      continue;
    }
    if (a.sampleElements != in.sampleElements) {
      err = fileError(a.path, "expected " + llvm::Twine(in.sampleElements) +
                                  " values per sample for " + in.describe() + ", found " +
                                  llvm::Twine(a.sampleElements));
      return nullptr;
    }
    if (!in.isFloating() && !a.isIntegral()) {
      err = fileError(a.path, in.describe() + " is " + dtypeName(in.dtype()) +
                                  " but the file holds " + a.dtypeName() +
                                  " values; store integers (e.g. int64)");
      return nullptr;
    }
    if (a.numSamples != reference.numSamples) {
      err = fileError(a.path, "has " + llvm::Twine(a.numSamples) + " samples but '" +
                                  reference.path + "' has " + llvm::Twine(reference.numSamples));
      return nullptr;
    }
    if (!in.isFloating() && !checkIndexRange(in, a, err))
      return nullptr;
  }
  if (reference.numSamples == 0) {
    err = fileError(reference.path, "holds no samples");
    return nullptr;
  }
  // NaN or inf in the data would otherwise surface as a diverged loss
  // blamed on the learning rate (O0) or as every step skipped by the loss
  // scaler (O1-O3), far from its cause.
  std::vector<int64_t> kept;
  std::string firstSkipped;
  for (int64_t s = 0; s < reference.numSamples; ++s) {
    bool finite = true;
    for (size_t i = 0; i < arrays.size() && finite; ++i) {
      if (arrays[i].absent)
        continue;
      int64_t j = firstNonFinite(arrays[i], s);
      if (j < 0)
        continue;
      finite = false;
      double v = loadReal(arrays[i], s * arrays[i].sampleElements + j);
      std::string what = arrays[i].where(s) + ": value " + std::to_string(j) + " of " +
                         inputs[i].describe() + " is " +
                         (std::isnan(v) ? "nan"
                          : v > 0       ? "inf"
                                        : "-inf");
      if (nonFinite == NonFiniteData::Error) {
        err = fileError(arrays[i].path, what + "; fix the data, or set 'non_finite_data: skip' "
                                               "in 'train' to leave such samples out");
        return nullptr;
      }
      if (firstSkipped.empty())
        firstSkipped = "'" + arrays[i].path + "' " + what;
    }
    if (finite && nonFinite == NonFiniteData::Skip)
      kept.push_back(s);
  }
  if (!firstSkipped.empty() && kept.empty()) {
    err = fileError(reference.path,
                    "every sample holds NaN or inf (the first: " + firstSkipped + ")");
    return nullptr;
  }
  // No sample skipped: serve them all, without the index table.
  if (firstSkipped.empty())
    kept.clear();
  return std::make_unique<ArraySource>(kind.str(), std::move(arrays), std::move(kept),
                                       std::move(firstSkipped));
}

} // namespace ampc::data
