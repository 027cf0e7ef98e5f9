//===- Subset.cpp - A contiguous range of another source's samples --------===//
#include "runtime/data/DataSource.h"

#include <cassert>

namespace ampc {

namespace {

class SubsetSource final : public DataSource {
public:
  SubsetSource(DataSource &base, int64_t begin, int64_t count)
      : base_(base), begin_(begin), count_(count) {}
  llvm::StringRef kind() const override { return base_.kind(); }
  int64_t numSamples() const override { return count_; }
  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    assert(index >= 0 && index < count_ && "sample index out of the subset");
    return base_.loadSample(begin_ + index, batch, row, err);
  }
  bool concurrentLoads() const override { return base_.concurrentLoads(); }

private:
  DataSource &base_;
  int64_t begin_, count_;
};

} // namespace

std::unique_ptr<DataSource> makeSubset(DataSource &base, int64_t begin, int64_t count) {
  assert(begin >= 0 && count >= 0 && begin + count <= base.numSamples() && "bad subset");
  return std::make_unique<SubsetSource>(base, begin, count);
}

} // namespace ampc
