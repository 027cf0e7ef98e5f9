//===- CommunicatorSelfTest.cpp - The MPI communicator under mpirun --------===//
//
// Run by ctest as `mpirun -np N ampc-communicator-selftest` (N = 2 and 3:
// three ranks take the reduce-then-broadcast path for floats). Each rank
// contributes values that depend on its rank; every rank checks the
// all-reduced results (sum, mean, max; f32, f64, f16, bf16, i64; f16 and
// bf16 also on the 16-bit wire) against the exact answer and against rank
// 0's bits, then a broadcast. Prints one
// line per check that fails and exits 1; 0 when all pass on this rank.
//
//===----------------------------------------------------------------------===//
#include "ir/HalfConversion.h"
#include "runtime/dist/Communicator.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace ampc;
using namespace ampc::dist;

namespace {

int failures = 0;

void check(bool ok, const char *what, int rank) {
  if (!ok) {
    std::printf("rank %d: FAILED: %s\n", rank, what);
    ++failures;
  }
}

} // namespace

int main() {
  std::string err;
  std::unique_ptr<Communicator> c = createMpiCommunicator(err);
  if (!c) {
    std::printf("error: %s\n", err.c_str());
    return 1;
  }
  int rank = c->rank(), n = c->size();
  check(n >= 2, "more than one rank (run under mpirun -np 2)", rank);
  const int64_t count = 1000;
  // Sum of (r + 1) * (i + 1) over ranks r: (i + 1) * n (n + 1) / 2, exact in f32.
  double ranksSum = n * (n + 1) / 2.0;

  std::vector<float> f(count);
  for (int64_t i = 0; i < count; ++i)
    f[i] = float((rank + 1) * (i + 1));
  check(c->allReduce(f.data(), count, DType::F32, ReduceOp::Sum, err), err.c_str(), rank);
  bool exact = true;
  for (int64_t i = 0; i < count; ++i)
    exact &= f[i] == float((i + 1) * ranksSum);
  check(exact, "f32 sum", rank);

  std::vector<double> d(count);
  for (int64_t i = 0; i < count; ++i)
    d[i] = (rank + 1) * 0.1 * double(i + 1);
  check(c->allReduce(d.data(), count, DType::F64, ReduceOp::Mean, err), err.c_str(), rank);
  bool close = true;
  for (int64_t i = 0; i < count; ++i)
    close &= std::fabs(d[i] - 0.1 * double(i + 1) * ranksSum / n) <= 1e-12 * double(i + 1);
  check(close, "f64 mean", rank);
  // The same bits on every rank: rank 0's, broadcast, must equal ours.
  std::vector<double> rank0 = d;
  check(c->broadcast(rank0.data(), rank0.size() * sizeof(double), 0, err), err.c_str(), rank);
  check(std::memcmp(rank0.data(), d.data(), d.size() * sizeof(double)) == 0,
        "f64 mean: the same bits on every rank", rank);

  for (bool bf16 : {false, true}) {
    std::vector<uint16_t> h(count);
    for (int64_t i = 0; i < count; ++i) {
      float v = float(rank + 1) * float(i % 7);
      h[i] = bf16 ? floatToBf16Bits(v) : floatToHalfBits(v);
    }
    check(c->allReduce(h.data(), count, bf16 ? DType::BF16 : DType::F16, ReduceOp::Sum, err),
          err.c_str(), rank);
    bool ok = true;
    for (int64_t i = 0; i < count; ++i) {
      float got = bf16 ? bf16BitsToFloat(h[i]) : halfBitsToFloat(h[i]);
      ok &= got == float(i % 7) * float(ranksSum);
    }
    check(ok, bf16 ? "bf16 sum" : "f16 sum", rank);
  }

  // The half all-reduce: 16-bit values on the wire, each partial sum
  // rounded. Small integers stay exact; values that need more bits than
  // bf16 has round (1 + 2^-8 per rank: the sum rounds at every step), but
  // every rank must end with rank 0's bits. The mean divides in f32.
  for (bool bf16 : {false, true}) {
    DType t = bf16 ? DType::BF16 : DType::F16;
    auto bits = [&](float v) { return bf16 ? floatToBf16Bits(v) : floatToHalfBits(v); };
    auto value = [&](uint16_t b) { return bf16 ? bf16BitsToFloat(b) : halfBitsToFloat(b); };
    std::vector<uint16_t> h(count), fine(count);
    for (int64_t i = 0; i < count; ++i) {
      h[i] = bits(float(rank + 1) * float(i % 7));
      fine[i] = bits(1.0f + float(rank) / 256.0f + float(i % 3) / 64.0f);
    }
    check(c->allReduceHalfWire(h.data(), count, t, ReduceOp::Sum, err), err.c_str(), rank);
    bool ok = true;
    for (int64_t i = 0; i < count; ++i)
      ok &= value(h[i]) == float(i % 7) * float(ranksSum);
    check(ok, bf16 ? "bf16 half-wire sum" : "f16 half-wire sum", rank);
    check(c->allReduceHalfWire(fine.data(), count, t, ReduceOp::Mean, err), err.c_str(), rank);
    ok = true;
    for (int64_t i = 0; i < count; ++i)
      ok &= std::fabs(value(fine[i]) - (1.0f + float(i % 3) / 64.0f)) <= 0.02f;
    check(ok, bf16 ? "bf16 half-wire mean" : "f16 half-wire mean", rank);
    std::vector<uint16_t> zero = fine;
    check(c->broadcast(zero.data(), zero.size() * sizeof(uint16_t), 0, err), err.c_str(), rank);
    check(zero == fine, "half-wire mean: the same bits on every rank", rank);
    check(!c->allReduceHalfWire(h.data(), count, t, ReduceOp::Max, err), "half-wire max is refused",
          rank);
  }

  int64_t flag = rank == n - 1 ? 1 : 0; // one rank saw an overflow: all must agree
  check(c->allReduce(&flag, 1, DType::I64, ReduceOp::Max, err), err.c_str(), rank);
  check(flag == 1, "i64 max (the overflow flag)", rank);
  check(!c->allReduce(&flag, 1, DType::I64, ReduceOp::Mean, err), "i64 mean is refused", rank);

  char text[16] = {};
  if (rank == 0)
    std::strcpy(text, "from rank 0");
  check(c->broadcast(text, sizeof text, 0, err), err.c_str(), rank);
  check(std::strcmp(text, "from rank 0") == 0, "broadcast", rank);
  check(c->barrier(err), err.c_str(), rank);
  if (failures == 0)
    std::printf("rank %d of %d: all checks passed\n", rank, n);
  return failures == 0 ? 0 : 1;
}
