//===- Synthetic.cpp - Seeded data with a learnable relationship -------------===//
//
// Every value is a pure function of (seed, input, sample, element) through
// the counter-based generator of kernels/common/Random.h, so a sample is the
// same whatever order or thread asks for it.
//
// Floating inputs are N(0, 1). Loss targets come from a fixed random linear
// "teacher" applied to the teacher's source (the first floating non-target
// input), so training has something to learn:
//   z = S x / sqrt(F / K)   a count sketch of the flattened source x (F values)
//                           into K = min(F, 64) dims: each element adds to one
//                           bucket with a random sign. Linear, and it costs F
//                           operations rather than F times the outputs.
//   t = W z                 W [outputs, K] ~ N(0, 1), fixed by the seed.
// A cross_entropy target is argmax(t) over the C classes, an mse_loss target
// is t / sqrt(K) (about unit variance) reshaped to the target's sample shape,
// a binary_cross_entropy target is [t > 0]. Embedding indices are uniform in
// [0, num_embeddings); other integer inputs uniform in {0, 1}. Without a
// floating source, the first non-target integer input is the source, each
// id read through a fixed random scalar per id (what an embedding can learn).
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataInternal.h"

#include "kernels/common/Random.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>

namespace ampc::data {
namespace {

using kernels::randomBits;
using kernels::standardNormal;

// Random streams; distinct so no two uses share numbers.
constexpr uint64_t kInputStreamBase = uint64_t(1) << 32; // + input index
constexpr uint64_t kBucketStream = 0x7465616368000001ull;
constexpr uint64_t kSignStream = 0x7465616368000002ull;
constexpr uint64_t kTokenStream = 0x7465616368000003ull;
constexpr uint64_t kWeightStreamBase = 0x7765696768000000ull; // + target input index
constexpr int64_t kMaxSketchDims = 64;

/// Uniform integer in [0, n) from 64 random bits (multiply-shift: no modulo
/// bias worth the name for any n a model uses).
int64_t uniformBelow(uint64_t bits, int64_t n) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(bits) * uint64_t(n)) >> 64);
}

class SyntheticSource final : public DataSource {
public:
  SyntheticSource(llvm::ArrayRef<InputInfo> inputs, uint64_t seed, int64_t size)
      : inputs_(inputs.begin(), inputs.end()), seed_(seed), size_(size) {
    pickTeacherSource();
    if (teacherSource_ < 0)
      return;
    int64_t f = inputs_[teacherSource_].sampleElements;
    sketchDims_ = std::max<int64_t>(1, std::min(f, kMaxSketchDims));
    bucket_.resize(f);
    sign_.resize(f);
    for (int64_t j = 0; j < f; ++j) {
      // With few features each gets its own dim; hashing is for wide inputs.
      bucket_[j] =
          f <= kMaxSketchDims ? j : uniformBelow(randomBits(seed_, kBucketStream, j), sketchDims_);
      sign_[j] = (randomBits(seed_, kSignStream, j) & 1) ? 1.0 : -1.0;
    }
    sketchScale_ = 1.0 / std::sqrt(static_cast<double>(f) / static_cast<double>(sketchDims_));
    weights_.resize(inputs_.size());
    for (const InputInfo &in : inputs_) {
      int64_t outputs = teacherOutputs(in);
      std::vector<double> &w = weights_[in.index];
      w.resize(outputs * sketchDims_);
      for (int64_t k = 0; k < outputs * sketchDims_; ++k)
        w[k] = standardNormal(seed_, kWeightStreamBase + in.index, k);
    }
  }

  llvm::StringRef kind() const override { return "synthetic"; }
  int64_t numSamples() const override { return size_; }

  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    if (index < 0 || index >= size_) {
      err =
          "sample " + std::to_string(index) + " is out of range [0, " + std::to_string(size_) + ")";
      return false;
    }
    if (batch.size() != inputs_.size()) {
      err = "expected " + std::to_string(inputs_.size()) + " batch tensors, got " +
            std::to_string(batch.size());
      return false;
    }
    std::vector<double> sketch = teacherSketch(index);
    for (const InputInfo &in : inputs_)
      fillInput(in, index, sketch, batch[in.index], row);
    return true;
  }

private:
  static bool isTarget(const InputInfo &in) {
    return in.role == InputRole::ClassTarget || in.role == InputRole::RegressionTarget ||
           in.role == InputRole::BinaryTarget;
  }

  /// Outputs of the teacher's linear map for a target input; 0 otherwise.
  static int64_t teacherOutputs(const InputInfo &in) {
    if (in.role == InputRole::ClassTarget)
      return in.classes;
    if (in.role == InputRole::RegressionTarget || in.role == InputRole::BinaryTarget)
      return in.sampleElements;
    return 0;
  }

  void pickTeacherSource() {
    for (const InputInfo &in : inputs_)
      if (in.role == InputRole::Feature) {
        teacherSource_ = in.index;
        return;
      }
    for (const InputInfo &in : inputs_)
      if (!isTarget(in)) {
        teacherSource_ = in.index;
        return;
      }
  }

  uint64_t bits(const InputInfo &in, int64_t sample, int64_t element) const {
    return randomBits(seed_, kInputStreamBase + in.index, sample * in.sampleElements + element);
  }

  double normalValue(const InputInfo &in, int64_t sample, int64_t element) const {
    return standardNormal(seed_, kInputStreamBase + in.index, sample * in.sampleElements + element);
  }

  /// Value of a non-target integer input.
  int64_t integerValue(const InputInfo &in, int64_t sample, int64_t element) const {
    int64_t range = in.role == InputRole::EmbeddingIndex ? in.numEmbeddings : 2;
    return uniformBelow(bits(in, sample, element), range);
  }

  /// z = S x / sqrt(F / K) for the teacher source's sample; empty without a
  /// teacher.
  std::vector<double> teacherSketch(int64_t sample) const {
    if (teacherSource_ < 0)
      return {};
    const InputInfo &src = inputs_[teacherSource_];
    std::vector<double> z(sketchDims_, 0.0);
    for (int64_t j = 0; j < src.sampleElements; ++j) {
      double x = src.isFloating()
                     ? normalValue(src, sample, j)
                     : standardNormal(seed_, kTokenStream,
                                      static_cast<uint64_t>(integerValue(src, sample, j)));
      z[bucket_[j]] += sign_[j] * x;
    }
    for (double &v : z)
      v *= sketchScale_;
    return z;
  }

  /// Teacher output o: row o of W times z.
  double teacher(const InputInfo &in, llvm::ArrayRef<double> z, int64_t o) const {
    const double *w = weights_[in.index].data() + o * sketchDims_;
    double t = 0;
    for (int64_t k = 0; k < sketchDims_; ++k)
      t += w[k] * z[k];
    return t;
  }

  void fillInput(const InputInfo &in, int64_t sample, llvm::ArrayRef<double> z, HostTensor &out,
                 int64_t row) const {
    assert(out.rowElements() == in.sampleElements && "batch tensor does not fit the input");
    int64_t base = row * in.sampleElements;
    bool hasTeacher = !z.empty();
    switch (in.role) {
    case InputRole::Feature:
      for (int64_t j = 0; j < in.sampleElements; ++j)
        out.setFromDouble(base + j, normalValue(in, sample, j));
      return;
    case InputRole::EmbeddingIndex:
    case InputRole::OtherInteger:
      for (int64_t j = 0; j < in.sampleElements; ++j)
        out.setFromDouble(base + j, static_cast<double>(integerValue(in, sample, j)));
      return;
    case InputRole::ClassTarget: {
      // cross_entropy's target is [B]: one label per sample.
      int64_t label = 0;
      if (hasTeacher) {
        double best = teacher(in, z, 0);
        for (int64_t c = 1; c < in.classes; ++c)
          if (double t = teacher(in, z, c); t > best) {
            best = t;
            label = c;
          }
      } else {
        label = uniformBelow(bits(in, sample, 0), in.classes);
      }
      for (int64_t j = 0; j < in.sampleElements; ++j)
        out.setFromDouble(base + j, static_cast<double>(label));
      return;
    }
    case InputRole::RegressionTarget: {
      double scale = 1.0 / std::sqrt(static_cast<double>(sketchDims_));
      for (int64_t j = 0; j < in.sampleElements; ++j)
        out.setFromDouble(base + j,
                          hasTeacher ? teacher(in, z, j) * scale : normalValue(in, sample, j));
      return;
    }
    case InputRole::BinaryTarget:
      for (int64_t j = 0; j < in.sampleElements; ++j) {
        bool positive = hasTeacher ? teacher(in, z, j) > 0 : (bits(in, sample, j) & 1);
        out.setFromDouble(base + j, positive ? 1.0 : 0.0);
      }
      return;
    }
  }

  std::vector<InputInfo> inputs_;
  uint64_t seed_;
  int64_t size_;
  int teacherSource_ = -1;
  int64_t sketchDims_ = 1;
  double sketchScale_ = 1.0;
  std::vector<int64_t> bucket_;
  std::vector<double> sign_;
  /// Teacher weights [outputs, K] per target input (empty for others).
  std::vector<std::vector<double>> weights_;
};

} // namespace

std::unique_ptr<DataSource> createSyntheticSource(llvm::ArrayRef<InputInfo> inputs, uint64_t seed,
                                                  int64_t size, std::string &err) {
  if (size <= 0) {
    err = "synthetic data size must be positive, got " + std::to_string(size);
    return nullptr;
  }
  return std::make_unique<SyntheticSource>(inputs, seed, size);
}

} // namespace ampc::data
