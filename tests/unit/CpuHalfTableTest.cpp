//===- CpuHalfTableTest.cpp - gelu's tables of every half input vs cpu-ref -===//
//
// In bf16 and f16 the cpu backend looks gelu and its derivative up in
// tables of all 65536 inputs (kernels/cpu/LoopHalfTables.cpp). Every input
// pattern, in both of gelu's forms, must give the reference kernel's bits
// (a NaN may be another NaN: which operand's payload x86 keeps depends on
// the order the compiler gives a product's operands), with the AVX-512 and
// the baseline vector copies, on one thread and on several, and the tables'
// buffers keep their guard words.
//
//===----------------------------------------------------------------------===//
#include "CpuLoopTestUtil.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace ampc;
using namespace ampc::testing;

constexpr int64_t kPatterns = 65536;

/// Every bit pattern of a half type once, then `extra` more from the top,
/// so the element count is not a multiple of a vector or a block.
Operand everyPattern(DType t, int64_t extra) {
  TensorType type(t, {kPatterns + extra});
  Bytes bytes(type.sizeInBytes());
  for (int64_t i = 0; i < kPatterns + extra; ++i) {
    uint16_t bits = static_cast<uint16_t>((kPatterns - 1 - i) & 0xffff);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return {type, bytes};
}

bool isNaN(DType t, const unsigned char *element) {
  return std::isnan(kernels::loadAsDouble(t, element, 0));
}

/// The loop kernel's results against the reference's for `operands`.
void expectReferenceBits(const std::string &op, const std::vector<Operand> &operands,
                         const AttrMap &attrs) {
  SCOPED_TRACE(describe(op, operands) + " approximate=" + attrs.at("approximate").str());
  OneLoopNode one(op, operands, attrs);
  ASSERT_TRUE(one.node) << one.error;
  std::unique_ptr<kernels::NodeKernel> fast = loopKernelFor(*one.node);
  ASSERT_TRUE(fast);
  kernels::FunctionKernel ref(kernels::referenceKernel(one.node->kind()));
  LoopResults expected = runLoopKernel(ref, *one.node, operands, 0);
  const TensorType &type = one.node->result()->type();
  int threads = omp_get_max_threads();
  for (int t : {threads, 1, 3})
    for (bool wide : {true, false}) {
      SCOPED_TRACE(std::string(wide ? "wide" : "baseline") + " vectors, " + std::to_string(t) +
                   " threads");
      omp_set_num_threads(t);
      kernels::cpu::setLoopWideVectorsAllowed(wide);
      LoopResults got = runLoopKernel(*fast, *one.node, operands, 0);
      kernels::cpu::setLoopWideVectorsAllowed(true);
      omp_set_num_threads(threads);
      EXPECT_TRUE(got.guardsIntact) << "a kernel wrote outside its buffers";
      int reported = 0;
      for (int64_t i = 0; i < type.numElements() && reported < 8; ++i) {
        const unsigned char *g = got.outputs[0].data() + 2 * i;
        const unsigned char *e = expected.outputs[0].data() + 2 * i;
        if (std::memcmp(g, e, 2) == 0 || (isNaN(type.dtype(), g) && isNaN(type.dtype(), e)))
          continue;
        ++reported;
        ADD_FAILURE() << "element " << i << ": " << kernels::loadAsDouble(type.dtype(), g, 0)
                      << " vs reference " << kernels::loadAsDouble(type.dtype(), e, 0);
      }
      EXPECT_EQ(reported, 0);
    }
}

TEST(CpuHalfTableTest, GeluAndItsGradientKeepTheReferenceBitsForEveryInput) {
  for (DType t : {DType::BF16, DType::F16})
    for (const char *approximate : {"none", "tanh"}) {
      AttrMap attrs;
      attrs["approximate"] = Attribute(std::string(approximate));
      Operand x = everyPattern(t, 77);
      expectReferenceBits("gelu", {x}, attrs);
      // Incoming gradients of both signs, tiny to large, and a rounding
      // tie's worth of mantissa; x again every pattern.
      Operand dy = uniform(x.type, 5, -3, 3);
      expectReferenceBits("gelu_grad", {dy, x}, attrs);
      Operand dyWide = uniform(x.type, 6, -60000, 60000);
      expectReferenceBits("gelu_grad", {dyWide, x}, attrs);
    }
}

TEST(CpuHalfTableTest, ATableIsSharedBetweenNodesAndStaysRight) {
  // Two nodes of one form and dtype share a table; building the other form's
  // must not change the first form's results.
  AttrMap none, tanh;
  none["approximate"] = Attribute(std::string("none"));
  tanh["approximate"] = Attribute(std::string("tanh"));
  Operand x = uniform(TensorType(DType::BF16, {4, 1000}), 7, -6, 6);
  expectReferenceBits("gelu", {x}, none);
  expectReferenceBits("gelu", {x}, tanh);
  expectReferenceBits("gelu", {x}, none);
}

} // namespace
