//===- RefCaseUtil.h - Shared checks of the reference-kernel tests -*- C++ -*-===//
//
// What RefLinearAlgebraTest, RefNormalizationTest and RefPoolingTest have in
// common: hand-computed results, agreement with f64 at each dtype's
// tolerance, and bit-exact f16/bf16 emulation. Header-only, included once
// per test file inside its anonymous namespace.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TESTS_UNIT_REFCASEUTIL_H
#define AMPC_TESTS_UNIT_REFCASEUTIL_H

#include "KernelTestUtil.h"

#include <functional>
#include <string>
#include <vector>

namespace ampc::testing::refcases {

using ampc::testing::allClose;
using ampc::testing::defaultTolerance;
using ampc::testing::KernelRun;
using ampc::testing::randomValues;
using ampc::testing::roundedTo;
using ampc::testing::runKernel;

using Values = std::vector<std::vector<double>>;
/// The operand types of one case when it computes in a given dtype.
using TypesAt = std::function<std::vector<TensorType>(DType)>;

constexpr DType kFloatDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16};
constexpr DType kHalfDTypes[] = {DType::F16, DType::BF16};

/// `values` as operands of `types` hold them after storage rounding.
inline Values roundedInputs(const std::vector<TensorType> &types, const Values &values) {
  Values out;
  for (size_t i = 0; i < values.size(); ++i)
    out.push_back(roundedTo(types[i].dtype(), values[i]));
  return out;
}

/// Runs `op` with hand-written inputs and checks every result exactly (or
/// within `tol`) against the hand-computed `expected`.
inline void expectResults(const std::string &op, const std::vector<TensorType> &types,
                          const Values &values, const AttrMap &attrs, const Values &expected,
                          double tol = 0) {
  KernelRun run = runKernel(op, types, values, attrs);
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_EQ(run.outputs.size(), expected.size());
  for (size_t r = 0; r < expected.size(); ++r)
    EXPECT_TRUE(allClose(run.outputs[r], expected[r], tol)) << op << " result " << r;
}

/// Runs `op` computing in `dtype` and in f64 on exactly the values the
/// `dtype` run sees; every result must agree within `tol` (relative to
/// max(1, |f64 result|)).
inline void expectMatchesF64(const std::string &op, const TypesAt &typesAt, const Values &values,
                             const AttrMap &attrs, DType dtype, double tol) {
  SCOPED_TRACE(op + " in " + dtypeName(dtype).str() + " vs f64");
  std::vector<TensorType> types = typesAt(dtype);
  KernelRun run = runKernel(op, types, values, attrs);
  KernelRun reference = runKernel(op, typesAt(DType::F64), roundedInputs(types, values), attrs);
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_TRUE(reference.ok) << reference.error;
  ASSERT_EQ(run.outputs.size(), reference.outputs.size());
  for (size_t r = 0; r < run.outputs.size(); ++r)
    EXPECT_TRUE(allClose(run.outputs[r], reference.outputs[r], tol)) << "result " << r;
}

/// The f16/bf16 emulation is exact: every half result is, bit for bit, the f32
/// run's result on the same inputs rounded once to nearest even with the IR's
/// conversion functions; f32 results (batchnorm's statistics) are identical.
inline void expectExactHalfEmulation(const std::string &op, const TypesAt &typesAt,
                                     const Values &values, const AttrMap &attrs, DType half) {
  SCOPED_TRACE(op + " in " + dtypeName(half).str() + " vs f32 rounded");
  std::vector<TensorType> halfTypes = typesAt(half);
  Values inputs = roundedInputs(halfTypes, values);
  KernelRun run = runKernel(op, halfTypes, inputs, attrs);
  KernelRun wide = runKernel(op, typesAt(DType::F32), inputs, attrs);
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_TRUE(wide.ok) << wide.error;
  ASSERT_EQ(run.outputs.size(), wide.outputs.size());
  for (size_t r = 0; r < run.outputs.size(); ++r) {
    DType resultType = run.outputTypes[r].dtype();
    for (size_t e = 0; e < run.outputs[r].size(); ++e) {
      float expected = static_cast<float>(wide.outputs[r][e]);
      float actual = static_cast<float>(run.outputs[r][e]);
      if (resultType == DType::F16)
        ASSERT_EQ(floatToHalfBits(actual), floatToHalfBits(expected))
            << "result " << r << " element " << e;
      else if (resultType == DType::BF16)
        ASSERT_EQ(floatToBf16Bits(actual), floatToBf16Bits(expected))
            << "result " << r << " element " << e;
      else
        ASSERT_EQ(floatBits(actual), floatBits(expected)) << "result " << r << " element " << e;
    }
  }
}

/// The random-input checks every op gets: f32, f16 and bf16 against f64 with
/// the per-dtype tolerance (scaled by `tolFactor` where an op says why), and
/// exact half emulation.
inline void expectAllPrecisions(const std::string &op, const TypesAt &typesAt, const Values &values,
                                const AttrMap &attrs = {}, double tolFactor = 1) {
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    expectMatchesF64(op, typesAt, values, attrs, t, tolFactor * defaultTolerance(t));
  for (DType t : kHalfDTypes)
    expectExactHalfEmulation(op, typesAt, values, attrs, t);
}

} // namespace ampc::testing::refcases

#endif
