//===- Calibrate.cpp - Value ranges against a half type (ampc calibrate) ---===//
//
// Runs in f32 and asks of every node's results what the half type would
// make of them: values past its largest finite overflow to inf (a NaN loss
// and skipped steps under loss scaling), nonzero values below half its
// smallest subnormal flush to zero, those below its smallest normal keep
// fewer bits. Forward nodes that overflow are the ones to keep in fp32;
// gradients that flush are what loss scaling is for. Nodes that run in
// fp32 at every level are left out.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"

#include "ir/DType.h"
#include "ir/OpRegistry.h"
#include "kernels/common/Storage.h"
#include "runtime/Program.h"

#include <cmath>
#include <cstdio>

namespace ampc::api {

Calibrator::Calibrator(const ampc::Program &program, DType halfType)
    : program_(program), halfType_(halfType), stats_(program.schedule().size()) {
  if (halfType == DType::F16) {
    maxFinite_ = 65504.0;
    minNormal_ = std::ldexp(1.0, -14);
    flushBelow_ = std::ldexp(1.0, -25); // half the smallest subnormal, 2^-24
  } else {
    maxFinite_ = 3.3895313892515355e38;
    minNormal_ = std::ldexp(1.0, -126);
    flushBelow_ = std::ldexp(1.0, -134); // half the smallest subnormal, 2^-133
  }
}

void Calibrator::observe(unsigned position) {
  const ampc::Node &n = *program_.schedule()[position];
  // What never runs in half at any level: the optimizer's and the loss
  // scaler's arithmetic (fp32 state, masters), and the ops of the fp32
  // category (losses, softmax, normalisation: the policy keeps them fp32).
  if (n.role() == ampc::NodeRole::Optimizer || n.role() == ampc::NodeRole::LossScale ||
      n.op().category == ampc::PrecisionCategory::Fp32)
    return;
  Stats &s = stats_[position];
  for (unsigned r = 0; r < n.numResults(); ++r) {
    const ampc::Value *v = n.result(r);
    if (!isFloating(v->dtype()))
      continue;
    s.seen = true;
    const void *data = program_.data(v);
    int64_t count = v->type().numElements();
    for (int64_t i = 0; i < count; ++i) {
      double x = std::fabs(kernels::loadAsDouble(v->dtype(), data, i));
      if (!(x > 0)) // zero, or NaN (a run that diverges says so itself)
        continue;
      s.maxAbs = std::max(s.maxAbs, x);
      ++s.nonzero;
      s.subnormal += x < minNormal_;
      s.flushed += x < flushBelow_;
    }
  }
}

CalibrationReport Calibrator::report() const {
  CalibrationReport out;
  out.halfType = halfType_;
  llvm::ArrayRef<const ampc::Node *> schedule = program_.schedule();
  for (unsigned i = 0; i < schedule.size(); ++i) {
    const Stats &s = stats_[i];
    if (!s.seen)
      continue;
    const ampc::Node &n = *schedule[i];
    CalibrationRow row;
    row.node = "%" + n.result()->name().str();
    row.op = n.opName().str();
    row.role = static_cast<NodeRole>(n.role());
    row.maxAbs = s.maxAbs;
    if (s.nonzero) {
      row.subnormalFraction = double(s.subnormal) / double(s.nonzero);
      row.flushFraction = double(s.flushed) / double(s.nonzero);
    }
    row.overflows = s.maxAbs > maxFinite_;
    out.rows.push_back(std::move(row));
  }
  return out;
}

std::string CalibrationReport::str() const {
  std::string half(dtypeName(halfType));
  double maxFinite = halfType == DType::F16 ? 65504.0 : 3.3895313892515355e38;
  std::string s = format("calibration: %lld training steps in f32, every node's results against "
                         "%s (largest finite %.6g)\n",
                         static_cast<long long>(batches), half.c_str(), maxFinite);
  std::vector<const CalibrationRow *> over, flush;
  const CalibrationRow *largest = nullptr;
  for (const CalibrationRow &r : rows) {
    if (r.overflows)
      over.push_back(&r);
    else if (r.flushFraction > 0.01)
      flush.push_back(&r);
    // The optimizer's counters and moments are not activations or gradients.
    if ((r.role == NodeRole::Forward || r.role == NodeRole::Loss || r.role == NodeRole::Backward) &&
        (!largest || r.maxAbs > largest->maxAbs))
      largest = &r;
  }
  s += format("overflow in %s: %zu %s\n", half.c_str(), over.size(),
              over.size() == 1 ? "node" : "nodes");
  for (const CalibrationRow *r : over) {
    s += format("  %-24s %-14s %-10s max |x| %.3g", r->node.c_str(), r->op.c_str(),
                std::string(roleName(r->role)).c_str(), r->maxAbs);
    // A forward op can be kept in fp32 by kind; a gradient overflowing is
    // what the dynamic loss scaler backs off from (or its scale is static).
    if (r->role == NodeRole::Forward || r->role == NodeRole::Loss)
      s += "  -> keep it in fp32: --fp32-ops " + r->op;
    else
      s += "  -> a dynamic loss scale backs off from it; a static one must be below " +
           format("%.3g", maxFinite / r->maxAbs);
    s += "\n";
  }
  s += format("more than 1%% of nonzero values flushed to zero in %s: %zu %s\n", half.c_str(),
              flush.size(), flush.size() == 1 ? "node" : "nodes");
  constexpr size_t kShown = 12;
  for (size_t i = 0; i < flush.size() && i < kShown; ++i) {
    const CalibrationRow *r = flush[i];
    s += format("  %-24s %-14s %-10s %.1f%% flushed, %.1f%% subnormal", r->node.c_str(),
                r->op.c_str(), std::string(roleName(r->role)).c_str(), 100 * r->flushFraction,
                100 * r->subnormalFraction);
    if (r->role == NodeRole::Backward)
      s += "  -> loss scaling shifts gradients up (dynamic, from 65536 at O1-O3)";
    else
      s += "  -> keep it in fp32: --fp32-ops " + r->op;
    s += "\n";
  }
  if (flush.size() > kShown)
    s += format("  ... and %zu more\n", flush.size() - kShown);
  if (largest)
    s += format("largest |x|: %.4g at %s (%s)\n", largest->maxAbs, largest->node.c_str(),
                largest->op.c_str());
  return s;
}

} // namespace ampc::api
