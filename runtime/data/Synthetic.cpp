//===- Synthetic.cpp - Seeded data with a learnable relationship -------------===//
//
// Every value is a pure function of (seed, input, sample, element) through
// the counter-based generator of kernels/common/Random.h, so a sample is the
// same whatever order or thread asks for it.
//
// Floating inputs are N(0, 1), drawn by kernels::fastStandardNormal (a
// vectorised Box-Muller in float: data generation must cost little next to
// a training step). Loss targets come from a fixed random linear
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
// The bulk loops have an AVX-512 copy chosen at run time; this file is
// built with -ffp-contract=off, so both copies give the same bits.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataInternal.h"

#include "kernels/common/CpuFeatures.h"
#include "kernels/common/Random.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace ampc::data {
namespace {

using kernels::randomBits;
using kernels::standardNormal;
using kernels::streamKey;

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

#if defined(__GNUC__) && defined(__x86_64__)
#define AMPC_SYNTHETIC_WIDE 1
#define AMPC_SYNTHETIC_WIDE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#else
#define AMPC_SYNTHETIC_WIDE 0
#endif

bool useWideLoops() { return AMPC_SYNTHETIC_WIDE && kernels::cpuHasAvx512(); }

/// out[i] = fastStandardNormal(key, first + i): 64-bit multiplies, which
/// only AVX-512DQ vectorises, hence the two copies.
inline __attribute__((always_inline)) void normalsLoop(float *out, int64_t n, uint64_t key,
                                                       uint64_t first) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = kernels::fastStandardNormal(key, first + static_cast<uint64_t>(i));
}
void normalsBase(float *out, int64_t n, uint64_t key, uint64_t first) {
  normalsLoop(out, n, key, first);
}
#if AMPC_SYNTHETIC_WIDE
AMPC_SYNTHETIC_WIDE_TARGET void normalsWide(float *out, int64_t n, uint64_t key, uint64_t first) {
  normalsLoop(out, n, key, first);
}
#endif

/// t[o] = sum over k of w[k][o] z[k], each output summed in k order.
inline __attribute__((always_inline)) void teacherLoop(float *t, const float *wByK, const float *z,
                                                       int64_t outputs, int64_t dims) {
  for (int64_t o = 0; o < outputs; ++o)
    t[o] = 0.0f;
  for (int64_t k = 0; k < dims; ++k) {
    const float *row = wByK + k * outputs;
    float zk = z[k];
#pragma omp simd
    for (int64_t o = 0; o < outputs; ++o)
      t[o] += row[o] * zk;
  }
}
void teacherBase(float *t, const float *w, const float *z, int64_t outputs, int64_t dims) {
  teacherLoop(t, w, z, outputs, dims);
}
#if AMPC_SYNTHETIC_WIDE
AMPC_SYNTHETIC_WIDE_TARGET void teacherWide(float *t, const float *w, const float *z,
                                            int64_t outputs, int64_t dims) {
  teacherLoop(t, w, z, outputs, dims);
}
#endif

} // namespace

void fillStandardNormals(float *out, int64_t n, uint64_t key, uint64_t firstIndex, bool allowWide) {
#if AMPC_SYNTHETIC_WIDE
  if (allowWide && useWideLoops())
    return normalsWide(out, n, key, firstIndex);
#endif
  (void)allowWide;
  normalsBase(out, n, key, firstIndex);
}

namespace {

void teacherOutputsOf(float *t, const float *w, const float *z, int64_t outputs, int64_t dims) {
#if AMPC_SYNTHETIC_WIDE
  if (useWideLoops())
    return teacherWide(t, w, z, outputs, dims);
#endif
  teacherBase(t, w, z, outputs, dims);
}

/// Writes `values` into row `row` of `out`, converted to its dtype.
void storeRow(const float *values, int64_t n, HostTensor &out, int64_t row) {
  assert(out.rowElements() == n && "batch tensor does not fit");
  if (out.dtype() == DType::F32) {
    std::memcpy(out.rowData(row), values, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  int64_t base = row * n;
  for (int64_t j = 0; j < n; ++j)
    out.setFromDouble(base + j, values[j]);
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
    weightsByK_.resize(inputs_.size());
    for (const InputInfo &in : inputs_) {
      int64_t outputs = teacherOutputs(in);
      // W [outputs, K] row-major draws element o * K + k; stored transposed.
      std::vector<float> &w = weightsByK_[in.index];
      w.resize(outputs * sketchDims_);
      for (int64_t o = 0; o < outputs; ++o)
        for (int64_t k = 0; k < sketchDims_; ++k)
          w[k * outputs + o] = static_cast<float>(
              standardNormal(seed_, kWeightStreamBase + in.index, o * sketchDims_ + k));
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
    // The teacher's source row is drawn once and serves both the sketch and
    // its own batch row.
    std::vector<float> source = teacherSourceRow(index);
    std::vector<float> sketch = teacherSketch(source);
    for (const InputInfo &in : inputs_)
      if (static_cast<int>(in.index) == teacherSource_ && in.role == InputRole::Feature &&
          in.isFloating())
        storeRow(source.data(), in.sampleElements, batch[in.index], row);
      else
        fillInput(in, index, sketch, batch[in.index], row);
    return true;
  }

  /// Every source may be read from several threads at once: a sample is a
  /// pure function of (seed, index).
  bool concurrentLoads() const override { return true; }

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

  /// The N(0, 1) values of one sample of a floating input.
  std::vector<float> normalRow(const InputInfo &in, int64_t sample) const {
    std::vector<float> x(in.sampleElements);
    fillStandardNormals(x.data(), in.sampleElements, streamKey(seed_, kInputStreamBase + in.index),
                        static_cast<uint64_t>(sample * in.sampleElements));
    return x;
  }

  /// Value of a non-target integer input.
  int64_t integerValue(const InputInfo &in, int64_t sample, int64_t element) const {
    int64_t range = in.role == InputRole::EmbeddingIndex ? in.numEmbeddings : 2;
    return uniformBelow(bits(in, sample, element), range);
  }

  /// The teacher source's values for `sample` (as the model sees them,
  /// before any rounding to the input's dtype); empty without a teacher.
  std::vector<float> teacherSourceRow(int64_t sample) const {
    if (teacherSource_ < 0)
      return {};
    const InputInfo &src = inputs_[teacherSource_];
    if (src.isFloating())
      return normalRow(src, sample);
    std::vector<float> x(src.sampleElements);
    for (int64_t j = 0; j < src.sampleElements; ++j)
      x[j] = static_cast<float>(
          standardNormal(seed_, kTokenStream, static_cast<uint64_t>(integerValue(src, sample, j))));
    return x;
  }

  /// z = S x / sqrt(F / K) for the teacher source's row x; empty without a
  /// teacher.
  std::vector<float> teacherSketch(llvm::ArrayRef<float> x) const {
    if (teacherSource_ < 0)
      return {};
    std::vector<double> z(sketchDims_, 0.0);
    const int64_t *bucket = bucket_.data();
    const double *sign = sign_.data();
    for (size_t j = 0; j < x.size(); ++j)
      z[bucket[j]] += sign[j] * x[j];
    std::vector<float> out(sketchDims_);
    for (int64_t k = 0; k < sketchDims_; ++k)
      out[k] = static_cast<float>(z[k] * sketchScale_);
    return out;
  }

  /// All teacher outputs W z for a target input. Accumulated over k in the
  /// outer loop so the inner loop runs across outputs and vectorises, while
  /// each output still sums its K products in order (the same value as a
  /// dot product per output).
  std::vector<float> teacher(const InputInfo &in, llvm::ArrayRef<float> z) const {
    int64_t outputs = teacherOutputs(in);
    std::vector<float> t(outputs);
    teacherOutputsOf(t.data(), weightsByK_[in.index].data(), z.data(), outputs, sketchDims_);
    return t;
  }

  void fillInput(const InputInfo &in, int64_t sample, llvm::ArrayRef<float> z, HostTensor &out,
                 int64_t row) const {
    assert(out.rowElements() == in.sampleElements && "batch tensor does not fit the input");
    int64_t base = row * in.sampleElements;
    bool hasTeacher = !z.empty();
    switch (in.role) {
    case InputRole::Feature: {
      std::vector<float> x = normalRow(in, sample);
      storeRow(x.data(), in.sampleElements, out, row);
      return;
    }
    case InputRole::EmbeddingIndex:
    case InputRole::OtherInteger:
      for (int64_t j = 0; j < in.sampleElements; ++j)
        out.setFromDouble(base + j, static_cast<double>(integerValue(in, sample, j)));
      return;
    case InputRole::ClassTarget: {
      // cross_entropy's target is [B]: one label per sample.
      int64_t label = 0;
      if (hasTeacher) {
        std::vector<float> t = teacher(in, z);
        float best = t[0];
        for (int64_t c = 1; c < in.classes; ++c)
          if (t[c] > best) {
            best = t[c];
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
      std::vector<float> t = hasTeacher ? teacher(in, z) : normalRow(in, sample);
      if (hasTeacher) {
        float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sketchDims_)));
        for (float &v : t)
          v *= scale;
      }
      storeRow(t.data(), in.sampleElements, out, row);
      return;
    }
    case InputRole::BinaryTarget:
      std::vector<float> t = hasTeacher ? teacher(in, z) : std::vector<float>();
      for (int64_t j = 0; j < in.sampleElements; ++j) {
        bool positive = hasTeacher ? t[j] > 0 : (bits(in, sample, j) & 1);
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
  /// Teacher weights W [outputs, K] per target input, stored transposed as
  /// [K, outputs] (empty for other inputs).
  std::vector<std::vector<float>> weightsByK_;
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
