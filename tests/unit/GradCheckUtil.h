//===- GradCheckUtil.h - Finite-difference checks of gradient rules -------===//
//
// For one op: its floating operands become trainable f64 parameters, the loss
// is sum(op(...) * R) for a fixed random R (so every output element matters,
// each with its own weight), autodiff builds the backward pass, and the
// reference backend computes the gradients. Each is compared with a central
// finite difference of the same loss, in f64.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TESTS_UNIT_GRADCHECKUTIL_H
#define AMPC_TESTS_UNIT_GRADCHECKUTIL_H

#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "kernels/common/Random.h"
#include "kernels/common/Storage.h"
#include "passes/Autodiff.h"
#include "runtime/Program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace ampc::testing {

struct GradCheckOperand {
  TensorType type;
  /// Values for integer operands (labels, indices); floating operands are
  /// random unless given here too.
  std::vector<double> values;
  /// Floating operands are differentiated unless this is false.
  bool differentiate = true;
};

struct GradCheckOptions {
  double step = 1e-6;
  double tolerance = 1e-6; ///< relative to max(1, |finite difference|)
  uint64_t seed = 1;
  /// Which result feeds the loss (multi-result ops).
  unsigned result = 0;
  double lo = -1, hi = 1; ///< range of random operand values
};

inline ::testing::AssertionResult checkGradients(const std::string &opName,
                                                 const std::vector<GradCheckOperand> &operands,
                                                 AttrMap attrs = {},
                                                 GradCheckOptions opts = {}) {
  const OpInfo *op = OpRegistry::builtin().lookup(opName);
  if (!op)
    return ::testing::AssertionFailure() << "unknown op " << opName;
  Graph g("gradcheck");
  DiagnosticEngine diag;
  auto firstError = [&] {
    return diag.diagnostics().empty() ? std::string("?") : diag.diagnostics()[0].str();
  };
  std::vector<Value *> values, params;
  for (size_t i = 0; i < operands.size(); ++i) {
    const GradCheckOperand &o = operands[i];
    std::string name = "p" + std::to_string(i);
    if (isFloating(o.type.dtype()) && o.differentiate) {
      values.push_back(g.addState(name, o.type, StateKind::Parameter));
      params.push_back(values.back());
    } else {
      values.push_back(g.addInput(name, o.type));
    }
  }
  Node *n = buildNode(g, *op, values, std::move(attrs), Location(), diag);
  if (!n)
    return ::testing::AssertionFailure() << firstError();
  Value *y = n->result(opts.result);
  Value *r = g.addInput("r", y->type());
  Node *prod = buildNode(g, OpRegistry::builtin().get(OpKind::Mul), {y, r}, {}, Location(), diag);
  Node *loss = prod ? buildNode(g, OpRegistry::builtin().get(OpKind::ReduceSum),
                                {prod->result()}, {}, Location(), diag, {"loss"})
                    : nullptr;
  if (!loss)
    return ::testing::AssertionFailure() << firstError();
  loss->setRole(NodeRole::Loss);
  g.addOutput(loss->result());

  PassContext ctx{diag};
  AutodiffPass autodiff;
  if (autodiff.run(g, ctx) == PassResult::Failed)
    return ::testing::AssertionFailure() << "autodiff failed: " << firstError();
  if (!verifyGraph(g, diag))
    return ::testing::AssertionFailure() << "invalid after autodiff: " << firstError();

  auto backend = createCpuRefBackend();
  auto program = Program::compile(g, *backend, diag);
  if (!program)
    return ::testing::AssertionFailure() << "compile failed: " << firstError();

  // Fill operands and R.
  for (size_t i = 0; i < operands.size(); ++i) {
    const GradCheckOperand &o = operands[i];
    void *dst = program->data(values[i]);
    for (int64_t e = 0; e < o.type.numElements(); ++e) {
      double v = e < (int64_t)o.values.size()
                     ? o.values[e]
                     : opts.lo + (opts.hi - opts.lo) *
                                     kernels::uniform01Double(opts.seed, 100 + i, e);
      kernels::storeFromDouble(o.type.dtype(), dst, e, v);
    }
  }
  for (int64_t e = 0; e < y->type().numElements(); ++e)
    kernels::storeFromDouble(r->dtype(), program->data(r), e,
                             -1 + 2 * kernels::uniform01Double(opts.seed, 99, e));

  auto lossValue = [&] {
    program->run(0);
    return kernels::loadAsDouble(loss->result()->dtype(), program->data(loss->result()), 0);
  };
  lossValue();
  // Copy the analytic gradients before perturbing.
  std::vector<std::vector<double>> analytic;
  for (Value *p : params) {
    Value *grad = g.lookup(gradientName(p->name()));
    if (!grad)
      return ::testing::AssertionFailure() << "no gradient for operand " << p->name().str();
    std::vector<double> gv(p->type().numElements());
    for (size_t e = 0; e < gv.size(); ++e)
      gv[e] = kernels::loadAsDouble(grad->dtype(), program->data(grad), e);
    analytic.push_back(std::move(gv));
  }
  for (size_t k = 0; k < params.size(); ++k) {
    Value *p = params[k];
    void *data = program->data(p);
    for (int64_t e = 0; e < p->type().numElements(); ++e) {
      double x = kernels::loadAsDouble(p->dtype(), data, e);
      kernels::storeFromDouble(p->dtype(), data, e, x + opts.step);
      double up = lossValue();
      kernels::storeFromDouble(p->dtype(), data, e, x - opts.step);
      double down = lossValue();
      kernels::storeFromDouble(p->dtype(), data, e, x);
      double fd = (up - down) / (2 * opts.step);
      double err = std::abs(fd - analytic[k][e]);
      if (!(err <= opts.tolerance * std::max(1.0, std::abs(fd))))
        return ::testing::AssertionFailure()
               << opName << ": d loss / d " << p->name().str() << "[" << e
               << "]: analytic " << analytic[k][e] << ", finite difference " << fd;
    }
  }
  return ::testing::AssertionSuccess();
}

} // namespace ampc::testing

#endif
