//===- ampc/Compare.h - Two levels' numbers, node by node -------*- C++ -*-===//
//
// `ampc compare MODEL --levels O0,O2`: the same weights and batch run one
// training step at both levels (Program::recordStep keeps the reference
// level's every node's results, Program::compareStep measures the other
// level's against them as they are made), and the nodes that compute the
// same quantity (GraphView::structuralKeys) are compared: the relative
// error of each, forward and gradients, the first node past a tolerance
// and the worst ones. With an f64 reference (Model::widenToF64 on
// `cpu-ref`) both levels are also measured against f64. docs/inspect.md.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_PUBLIC_COMPARE_H
#define AMPC_PUBLIC_COMPARE_H

#include "ampc/Export.h"
#include "ampc/Types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampc::api {

/// One floating result of one node of a recorded step.
struct RecordedValue {
  std::string name; ///< the value's name, without '%'
  std::string op;   ///< the op of the node that made it
  NodeRole role = NodeRole::Forward;
  DType dtype = DType::F32; ///< as this level computed it
  std::vector<int64_t> shape;
  uint64_t key = 0; ///< GraphView::structuralKeys()
  /// The keys of the node's operands (casts looked through), to show where
  /// an error came from.
  std::vector<uint64_t> operandKeys;
  /// The values, gradients divided by the step's loss scale: as floats
  /// (exact for f32 and the half types), or for an f64 step as doubles.
  std::vector<float> values;
  std::vector<double> values64;

  size_t size() const { return values64.empty() ? values.size() : values64.size(); }
  double at(size_t i) const { return values64.empty() ? values[i] : values64[i]; }
};

/// Every forward, loss and backward node's results of one training step.
struct StepRecord {
  std::string level;                 ///< "O0".."O3", or "f64"
  std::string device;                ///< where it ran
  double lossScale = 1;              ///< the scale the gradients were divided by
  std::vector<RecordedValue> values; ///< schedule order
};

struct CompareOptions {
  /// A value diverges when its relative error (the L2 norm of the
  /// difference over the reference's) exceeds this. A bf16 step's
  /// gradients are typically a few percent off fp32's (bf16 keeps 8 bits).
  double tolerance = 0.1;
  /// Gradients with an RMS below this fraction of the largest gradient's
  /// are ValueComparison::negligible.
  double negligible = 1e-4;
};

/// One value of the candidate level against its counterpart.
struct ValueComparison {
  std::string name, referenceName, op;
  NodeRole role = NodeRole::Forward;
  DType dtype = DType::F32, referenceDType = DType::F32;
  double relativeError = 0; ///< against the reference level; inf when not finite
  double maxAbsError = 0;
  double referenceMaxAbs = 0;
  double referenceRms = 0; ///< the reference's root mean square
  uint64_t nonFinite = 0;  ///< values non-finite at either level, but for one infinity at both
  /// A gradient that is ~0 at the reference (its RMS below
  /// CompareOptions::negligible of the largest gradient's): its relative
  /// error measures rounding noise (a bias before batchnorm, a key's bias
  /// under softmax: mathematically zero). Not counted as diverging.
  bool negligible = false;
  /// With an f64 record: the candidate's and the reference level's errors
  /// against f64.
  std::optional<double> relativeErrorF64, referenceRelativeErrorF64;
  std::vector<size_t> operands; ///< indices of compared operand values
};

struct ComparisonReport {
  std::string level, referenceLevel;
  bool withF64 = false;
  double tolerance = 0;
  double lossScale = 1;
  std::vector<ValueComparison> values; ///< the candidate's schedule order
  /// The candidate's values without a counterpart (none for levels of one
  /// model, but for what only one level computes).
  size_t unmatched = 0;
  /// The first value (in schedule order: forward, then gradients) past
  /// the tolerance, as an index into `values`; and the first gradient.
  std::optional<size_t> firstDivergent, firstDivergentGradient;
  /// The summary `ampc compare` prints: the first divergent value with its
  /// operands' errors, and the `worst` largest errors.
  AMPC_API std::string str(size_t worst = 10) const;
};

/// Compares `candidate` with `reference` (and both with `f64` when given),
/// matching values by structural key. Program::compareStep does the same
/// without keeping the candidate's values.
AMPC_API ComparisonReport compareSteps(const StepRecord &reference, const StepRecord &candidate,
                                       const StepRecord *f64 = nullptr,
                                       const CompareOptions &opts = {});

} // namespace ampc::api

#endif
