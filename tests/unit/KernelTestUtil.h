//===- KernelTestUtil.h - Run one op's kernel on guarded buffers ----------===//
//
// Builds a one-node graph for an op, fills its inputs from double values
// (converted to each input's dtype, rounding as storage would), runs a kernel,
// and returns the outputs as doubles. Every buffer is surrounded by guard
// bytes that must survive the kernel, to catch out-of-bounds writes.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TESTS_UNIT_KERNELTESTUTIL_H
#define AMPC_TESTS_UNIT_KERNELTESTUTIL_H

#include "ir/Builder.h"
#include "kernels/KernelArgs.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"
#include "kernels/reference/ReferenceKernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace ampc::testing {

/// A heap buffer with guard bytes on both sides.
class GuardedBuffer {
public:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kPattern = 0xa5;
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), storage_(bytes + 2 * kGuard, kPattern) {}
  void *data() { return storage_.data() + kGuard; }
  const void *data() const { return storage_.data() + kGuard; }
  /// True when no guard byte changed.
  bool guardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (storage_[i] != kPattern || storage_[kGuard + bytes_ + i] != kPattern)
        return false;
    return true;
  }

private:
  size_t bytes_;
  std::vector<unsigned char> storage_;
};

struct KernelRun {
  std::vector<TensorType> outputTypes;
  std::vector<std::vector<double>> outputs;
  bool ok = false; ///< the node built and every guard survived
  std::string error;
};

/// Runs `kernel` (the reference kernel of `opName` by default) on inputs of the
/// given types and values. Output buffers start filled with NaN-like garbage
/// so a kernel that forgets to write an element is caught by value checks.
inline KernelRun runKernel(const std::string &opName, const std::vector<TensorType> &inputTypes,
                           const std::vector<std::vector<double>> &inputValues, AttrMap attrs = {},
                           uint64_t step = 0, kernels::KernelFn kernel = nullptr) {
  KernelRun run;
  const OpInfo *op = OpRegistry::builtin().lookup(opName);
  if (!op) {
    run.error = "unknown op " + opName;
    return run;
  }
  Graph g("kernel_test");
  std::vector<Value *> operands;
  for (size_t i = 0; i < inputTypes.size(); ++i)
    operands.push_back(g.addInput("in" + std::to_string(i), inputTypes[i]));
  DiagnosticEngine diag;
  Node *node = buildNode(g, *op, operands, std::move(attrs), Location(), diag);
  if (!node) {
    run.error = diag.diagnostics().empty() ? "build failed" : diag.diagnostics()[0].str();
    return run;
  }
  std::vector<GuardedBuffer> buffers;
  buffers.reserve(inputTypes.size() + node->numResults());
  std::vector<kernels::TensorArg> ins, outs;
  for (size_t i = 0; i < inputTypes.size(); ++i) {
    const TensorType &t = operands[i]->type();
    buffers.emplace_back(t.sizeInBytes());
    EXPECT_EQ(inputValues[i].size(), static_cast<size_t>(t.numElements())) << "input " << i;
    for (int64_t e = 0; e < t.numElements() && e < (int64_t)inputValues[i].size(); ++e)
      kernels::storeFromDouble(t.dtype(), buffers.back().data(), e, inputValues[i][e]);
    ins.push_back({buffers.back().data(), &t});
  }
  for (unsigned r = 0; r < node->numResults(); ++r) {
    const TensorType &t = node->result(r)->type();
    buffers.emplace_back(t.sizeInBytes());
    std::memset(buffers.back().data(), 0x7f, t.sizeInBytes());
    outs.push_back({buffers.back().data(), &t});
    run.outputTypes.push_back(t);
  }
  kernels::KernelArgs args;
  args.node = node;
  args.inputs = ins;
  args.outputs = outs;
  args.step = step;
  (kernel ? kernel : kernels::referenceKernel(op->kind))(args);
  for (const GuardedBuffer &b : buffers)
    if (!b.guardsIntact()) {
      run.error = "a kernel wrote outside its buffers";
      return run;
    }
  for (size_t r = 0; r < outs.size(); ++r) {
    std::vector<double> v(outs[r].numElements());
    for (size_t e = 0; e < v.size(); ++e)
      v[e] = kernels::loadAsDouble(outs[r].dtype(), outs[r].data, e);
    run.outputs.push_back(std::move(v));
  }
  run.ok = true;
  return run;
}

/// n seeded uniform values in [lo, hi).
inline std::vector<double> randomValues(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = lo + (hi - lo) * kernels::uniform01Double(seed, 7, i);
  return v;
}

/// Values rounded as storing them in dtype t would (so an f64 reference sees
/// exactly the inputs a half kernel saw).
inline std::vector<double> roundedTo(DType t, const std::vector<double> &v) {
  std::vector<double> out(v.size());
  std::vector<char> tmp(dtypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    kernels::storeFromDouble(t, tmp.data(), 0, v[i]);
    out[i] = kernels::loadAsDouble(t, tmp.data(), 0);
  }
  return out;
}

/// Per-dtype tolerance for comparing a kernel's output with the f64 result of
/// the same (rounded) inputs: relative to max(1, |reference|).
inline double defaultTolerance(DType t) {
  switch (t) {
  case DType::F64:
    return 1e-12;
  case DType::F32:
    return 1e-5;
  case DType::F16:
    return 2e-3;
  case DType::BF16:
    return 1.6e-2;
  case DType::I64:
  case DType::I32:
  case DType::Bool:
    return 0;
  }
  return 0;
}

inline ::testing::AssertionResult allClose(const std::vector<double> &actual,
                                           const std::vector<double> &expected, double tol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  for (size_t i = 0; i < actual.size(); ++i) {
    double scale = std::max(1.0, std::abs(expected[i]));
    bool bothNaN = std::isnan(actual[i]) && std::isnan(expected[i]);
    if (!bothNaN && !(std::abs(actual[i] - expected[i]) <= tol * scale))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual[i] << " vs expected " << expected[i] << " (tol "
             << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

// --- Comparisons shared by the Ref*Test files -------------------------------

/// `types` with every floating dtype replaced by t; integer operands (labels,
/// indices) keep theirs.
inline std::vector<TensorType> withFloatDType(const std::vector<TensorType> &types, DType t) {
  std::vector<TensorType> out;
  for (const TensorType &type : types)
    out.push_back(isFloating(type.dtype()) ? type.withDType(t) : type);
  return out;
}

/// Every floating operand's values rounded to t.
inline std::vector<std::vector<double>>
roundedInputs(const std::vector<TensorType> &types, const std::vector<std::vector<double>> &values,
              DType t) {
  std::vector<std::vector<double>> out = values;
  for (size_t i = 0; i < types.size(); ++i)
    if (isFloating(types[i].dtype()))
      out[i] = roundedTo(t, values[i]);
  return out;
}

/// Runs the op at dtype t and at f64 on the same inputs (rounded to t) and
/// compares every output within tol (relative to max(1, |f64 result|)).
inline ::testing::AssertionResult matchesF64(const std::string &opName,
                                             const std::vector<TensorType> &types,
                                             const std::vector<std::vector<double>> &values,
                                             const AttrMap &attrs, DType t, double tol,
                                             uint64_t step = 0) {
  std::vector<std::vector<double>> inputs = roundedInputs(types, values, t);
  KernelRun run = runKernel(opName, withFloatDType(types, t), inputs, attrs, step);
  KernelRun exact = runKernel(opName, withFloatDType(types, DType::F64), inputs, attrs, step);
  if (!run.ok || !exact.ok)
    return ::testing::AssertionFailure() << "run failed: " << run.error << exact.error;
  for (size_t r = 0; r < run.outputs.size(); ++r)
    if (::testing::AssertionResult res = allClose(run.outputs[r], exact.outputs[r], tol); !res)
      return ::testing::AssertionFailure()
             << dtypeName(t).str() << " output " << r << ": " << res.message();
  return ::testing::AssertionSuccess();
}

/// f16/bf16 emulation is exact: the op at half dtype `half` equals, bit for
/// bit, the op at f32 on the same inputs with each output rounded to `half`
/// by floatToHalfBits / floatToBf16Bits.
inline ::testing::AssertionResult halfEmulationExact(const std::string &opName,
                                                     const std::vector<TensorType> &types,
                                                     const std::vector<std::vector<double>> &values,
                                                     const AttrMap &attrs, DType half,
                                                     uint64_t step = 0) {
  std::vector<std::vector<double>> inputs = roundedInputs(types, values, half);
  KernelRun run = runKernel(opName, withFloatDType(types, half), inputs, attrs, step);
  KernelRun f32 = runKernel(opName, withFloatDType(types, DType::F32), inputs, attrs, step);
  if (!run.ok || !f32.ok)
    return ::testing::AssertionFailure() << "run failed: " << run.error << f32.error;
  for (size_t r = 0; r < run.outputs.size(); ++r)
    for (size_t i = 0; i < run.outputs[r].size(); ++i) {
      float wide = static_cast<float>(f32.outputs[r][i]);
      uint16_t expected = half == DType::F16 ? floatToHalfBits(wide) : floatToBf16Bits(wide);
      float actualWide = static_cast<float>(run.outputs[r][i]);
      uint16_t actual =
          half == DType::F16 ? floatToHalfBits(actualWide) : floatToBf16Bits(actualWide);
      if (actual != expected)
        return ::testing::AssertionFailure()
               << dtypeName(half).str() << " output " << r << " element " << i << ": bits 0x"
               << std::hex << actual << " != 0x" << expected << std::dec << " (f32 result " << wide
               << ")";
    }
  return ::testing::AssertionSuccess();
}

} // namespace ampc::testing

#endif
