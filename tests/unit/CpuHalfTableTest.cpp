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

/// The loop kernel against the reference at every input, a NaN matching
/// any NaN.
void expectReferenceBits(const std::string &op, const std::vector<Operand> &operands,
                         const AttrMap &attrs) {
  expectBitIdentical(op, operands, attrs, /*step=*/0, /*runSeed=*/0, /*anyNaN=*/true);
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
