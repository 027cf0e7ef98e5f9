//===- Subset.cpp - Some of another source's samples ------------------------===//
#include "runtime/data/DataSource.h"

#include <cassert>
#include <numeric>

namespace ampc {

namespace {

/// The samples `indices_` of the base source, renumbered from 0.
class SubsetSource final : public DataSource {
public:
  SubsetSource(DataSource &base, std::vector<int64_t> indices)
      : base_(base), indices_(std::move(indices)) {}
  llvm::StringRef kind() const override { return base_.kind(); }
  int64_t numSamples() const override { return static_cast<int64_t>(indices_.size()); }
  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    return base_.loadSample(at(index), batch, row, err);
  }
  bool loadDrawnSample(int64_t index, int64_t epoch, llvm::MutableArrayRef<HostTensor> batch,
                       int64_t row, std::string &err) override {
    return base_.loadDrawnSample(at(index), epoch, batch, row, err);
  }
  std::string sampleName(int64_t index) const override { return base_.sampleName(at(index)); }
  bool concurrentLoads() const override { return base_.concurrentLoads(); }

private:
  int64_t at(int64_t index) const {
    assert(index >= 0 && index < numSamples() && "sample index out of the subset");
    return indices_[static_cast<size_t>(index)];
  }

  DataSource &base_;
  std::vector<int64_t> indices_;
};

} // namespace

std::unique_ptr<DataSource> makeSubset(DataSource &base, int64_t begin, int64_t count) {
  assert(begin >= 0 && count >= 0 && begin + count <= base.numSamples() && "bad subset");
  std::vector<int64_t> indices(static_cast<size_t>(count));
  std::iota(indices.begin(), indices.end(), begin);
  return makeSubset(base, std::move(indices));
}

std::unique_ptr<DataSource> makeSubset(DataSource &base, std::vector<int64_t> indices) {
  for ([[maybe_unused]] int64_t i : indices)
    assert(i >= 0 && i < base.numSamples() && "subset index out of the source");
  return std::make_unique<SubsetSource>(base, std::move(indices));
}

} // namespace ampc
