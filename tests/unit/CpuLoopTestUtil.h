//===- CpuLoopTestUtil.h - The harness of the cpu loop-kernel tests -------===//
//
// What CpuLoopsTest.cpp and CpuLoopsMoreOpsTest.cpp share: operands as
// storage bytes, a one-node graph, a kernel run on guarded buffers (with the
// step, the run seed and the stateUnchanged report), the check that the
// cpu backend gave a node a loop kernel, and expectBitIdentical: the loop
// kernel's results must be the reference kernel's bits, with the AVX-512
// and the baseline vector copies, on all, 1 and 3 threads.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TESTS_UNIT_CPULOOPTESTUTIL_H
#define AMPC_TESTS_UNIT_CPULOOPTESTUTIL_H

#include "KernelTestUtil.h"

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/LoopKernels.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace ampc::testing {

using Bytes = std::vector<unsigned char>;

/// One operand: its type and contents (as storage bytes).
struct Operand {
  TensorType type;
  Bytes bytes;
};

/// `values` stored (rounded) in t's dtype, repeated to fill t.
inline Bytes fromDoubles(const TensorType &t, const std::vector<double> &values) {
  Bytes b(t.sizeInBytes());
  for (int64_t i = 0; i < t.numElements(); ++i)
    kernels::storeFromDouble(t.dtype(), b.data(), i, values[i % values.size()]);
  return b;
}

/// Seeded values in [lo, hi), stored (rounded) in t's dtype.
inline Operand uniform(const TensorType &t, uint64_t seed, double lo = -2, double hi = 2) {
  return {t, fromDoubles(t, randomValues(t.numElements(), seed, lo, hi))};
}

/// A node of `op` over operands of the given types, in its own graph.
struct OneLoopNode {
  Graph graph{"loops_test"};
  Node *node = nullptr;
  std::string error;

  OneLoopNode(const std::string &opName, const std::vector<Operand> &operands, AttrMap attrs) {
    const OpInfo *op = OpRegistry::builtin().lookup(opName);
    if (!op) {
      error = "unknown op " + opName;
      return;
    }
    std::vector<Value *> values;
    for (size_t i = 0; i < operands.size(); ++i)
      values.push_back(graph.addInput("in" + std::to_string(i), operands[i].type));
    DiagnosticEngine diag;
    node = buildNode(graph, *op, values, std::move(attrs), Location(), diag);
    if (!node)
      error = diag.diagnostics().empty() ? "build failed" : diag.diagnostics()[0].str();
  }
};

/// What one kernel run produced.
struct LoopResults {
  std::vector<Bytes> outputs;
  bool stateUnchanged = false;
  bool guardsIntact = true;
};

/// Runs `kernel` on copies of `operands` in guarded buffers, its results
/// pre-filled with 0x7f bytes.
inline LoopResults runLoopKernel(kernels::NodeKernel &kernel, const Node &node,
                                 const std::vector<Operand> &operands, uint64_t step,
                                 uint64_t runSeed = 0) {
  std::vector<GuardedBuffer> buffers;
  buffers.reserve(operands.size() + node.numResults());
  std::vector<kernels::TensorArg> ins, outs;
  for (size_t i = 0; i < operands.size(); ++i) {
    buffers.emplace_back(operands[i].bytes.size());
    std::memcpy(buffers.back().data(), operands[i].bytes.data(), operands[i].bytes.size());
    ins.push_back({buffers.back().data(), &node.operand(i)->type()});
  }
  for (unsigned r = 0; r < node.numResults(); ++r) {
    const TensorType &t = node.result(r)->type();
    buffers.emplace_back(t.sizeInBytes());
    std::memset(buffers.back().data(), 0x7f, t.sizeInBytes());
    outs.push_back({buffers.back().data(), &t});
  }
  LoopResults results;
  kernels::KernelArgs args;
  args.node = &node;
  args.inputs = ins;
  args.outputs = outs;
  args.step = step;
  args.runSeed = runSeed;
  args.stateUnchanged = &results.stateUnchanged;
  kernel.run(args);
  for (const GuardedBuffer &b : buffers)
    results.guardsIntact &= b.guardsIntact();
  for (const kernels::TensorArg &out : outs) {
    const unsigned char *p = static_cast<const unsigned char *>(out.data);
    results.outputs.emplace_back(p, p + out.type->sizeInBytes());
  }
  return results;
}

/// The node's cpu-backend kernel, which must be a loop kernel (so a case
/// cannot pass by falling back to the reference).
inline std::unique_ptr<kernels::NodeKernel> loopKernelFor(const Node &node) {
  std::unique_ptr<kernels::NodeKernel> k = kernels::cpu::prepareCpuKernel(node);
  EXPECT_TRUE(k && kernels::cpu::isLoopKernel(*k))
      << node.opName().str() << " did not get a loop kernel";
  if (k && !kernels::cpu::isLoopKernel(*k))
    return nullptr;
  return k;
}

inline std::string describe(const std::string &op, const std::vector<Operand> &operands) {
  std::string s = op + "(";
  for (size_t i = 0; i < operands.size(); ++i)
    s += (i ? ", " : "") + operands[i].type.str();
  return s + ")";
}

/// Index of the first element whose bits differ between two outputs of
/// type t, or -1. With `anyNaN`, two NaNs match whatever their bits.
inline int64_t firstDifference(const TensorType &t, const Bytes &a, const Bytes &b,
                               bool anyNaN = false) {
  size_t size = dtypeSize(t.dtype());
  for (int64_t i = 0; i < t.numElements(); ++i)
    if (std::memcmp(a.data() + i * size, b.data() + i * size, size) != 0 &&
        !(anyNaN && std::isnan(kernels::loadAsDouble(t.dtype(), a.data(), i)) &&
          std::isnan(kernels::loadAsDouble(t.dtype(), b.data(), i))))
      return i;
  return -1;
}

/// The loop kernel's results and stateUnchanged report must be the
/// reference kernel's, bit for bit, with the wide and the baseline vector
/// copies and on all, 1 and 3 threads. `anyNaN`: a NaN may be another NaN
/// (which operand's NaN a product passes on is the compiler's choice).
inline void expectBitIdentical(const std::string &op, const std::vector<Operand> &operands,
                               AttrMap attrs = {}, uint64_t step = 0, uint64_t runSeed = 0,
                               bool anyNaN = false) {
  SCOPED_TRACE(describe(op, operands) + " at step " + std::to_string(step));
  OneLoopNode one(op, operands, std::move(attrs));
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast = loopKernelFor(*one.node);
  ASSERT_TRUE(fast);
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  LoopResults expected = runLoopKernel(ref, *one.node, operands, step, runSeed);
  int threads = omp_get_max_threads();
  for (int t : {threads, 1, 3})
    for (bool wide : {true, false}) {
      SCOPED_TRACE(std::string(wide ? "wide" : "baseline") + " vectors, " + std::to_string(t) +
                   " threads");
      omp_set_num_threads(t);
      kernels::cpu::setLoopWideVectorsAllowed(wide);
      LoopResults got = runLoopKernel(*fast, *one.node, operands, step, runSeed);
      kernels::cpu::setLoopWideVectorsAllowed(true);
      omp_set_num_threads(threads);
      EXPECT_TRUE(got.guardsIntact) << "a kernel wrote outside its buffers";
      EXPECT_EQ(got.stateUnchanged, expected.stateUnchanged);
      for (unsigned r = 0; r < one.node->numResults(); ++r) {
        const TensorType &type = one.node->result(r)->type();
        int64_t i = firstDifference(type, got.outputs[r], expected.outputs[r], anyNaN);
        ASSERT_EQ(i, -1) << "result " << r << " element " << i << ": "
                         << kernels::loadAsDouble(type.dtype(), got.outputs[r].data(), i) << " vs "
                         << kernels::loadAsDouble(type.dtype(), expected.outputs[r].data(), i);
      }
    }
}

} // namespace ampc::testing

#endif
