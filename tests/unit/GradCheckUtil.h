//===- GradCheckUtil.h - Finite-difference checks of gradient rules -------===//
//
// checkGradients, for one op: its floating operands become trainable f64
// parameters, the loss is sum(op(...) * R) for a fixed random R (so every
// output element matters, each with its own weight), autodiff builds the
// backward pass, and the reference backend computes the gradients. Each is
// compared with a central finite difference of the same loss, in f64.
//
// checkGraphGradients does the same for a whole graph with a loss node (a
// model written in textual IR or built by hand): every element of every
// trainable parameter is perturbed.
//
// Both also check that autodiff left no dead backward node (one whose results
// nothing reads): gradients nobody needs must not be computed.
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

#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace ampc::testing {

struct GradCheckOperand {
  GradCheckOperand(TensorType type, std::vector<double> values = {}, bool differentiate = true)
      : type(std::move(type)), values(std::move(values)), differentiate(differentiate) {}

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
  /// A parameter whose gradient is exactly zero everywhere makes the
  /// comparison vacuous (every input on the flat side of a relu, say), so it
  /// fails the check unless the test expects it.
  bool allowZeroGradient = false;
};

/// Values by the name of a graph input or state tensor.
using NamedValues = std::map<std::string, std::vector<double>>;

namespace detail {

inline std::string firstError(const DiagnosticEngine &diag) {
  for (const Diagnostic &d : diag.diagnostics())
    if (d.severity == Severity::Error)
      return d.str();
  return diag.diagnostics().empty() ? std::string("?") : diag.diagnostics()[0].str();
}

/// A backward node none of whose results is read or output computes a
/// gradient nobody needs.
inline const Node *findDeadBackwardNode(const Graph &g) {
  for (const Node &n : g.nodes()) {
    if (n.role() != NodeRole::Backward)
      continue;
    bool live = false;
    for (unsigned r = 0; r < n.numResults() && !live; ++r)
      live = n.result(r)->hasUses() ||
             llvm::is_contained(g.outputs(), static_cast<const Value *>(n.result(r)));
    if (!live)
      return &n;
  }
  return nullptr;
}

} // namespace detail

/// Differentiates `g` (a forward graph with a loss node; `what` names it in
/// messages) and compares the gradient of every trainable parameter, element
/// by element, with central finite differences of the loss. Graph inputs and
/// state tensors named in `values` get those values; other floating inputs
/// get seeded uniform values in [lo, hi) (input i draws from stream 100 + i),
/// other state tensors keep their InitSpec values. Integer inputs must be
/// given. Every trainable parameter must get a gradient.
inline ::testing::AssertionResult checkGraphGradients(Graph &g, const NamedValues &values = {},
                                                      GradCheckOptions opts = {},
                                                      const std::string &what = "graph") {
  DiagnosticEngine diag;
  Value *loss = findLoss(g);
  if (!loss)
    return ::testing::AssertionFailure() << what << ": no node with role loss";
  if (!llvm::is_contained(g.outputs(), loss))
    g.addOutput(loss);

  PassContext ctx{diag};
  AutodiffPass autodiff;
  if (autodiff.run(g, ctx) == PassResult::Failed)
    return ::testing::AssertionFailure()
           << what << ": autodiff failed: " << detail::firstError(diag);
  if (!verifyGraph(g, diag))
    return ::testing::AssertionFailure()
           << what << ": invalid after autodiff: " << detail::firstError(diag);
  if (const Node *dead = detail::findDeadBackwardNode(g))
    return ::testing::AssertionFailure()
           << what << ": backward node " << dead->opName().str() << " computing %"
           << dead->result()->name().str() << " is never used";

  auto backend = createCpuRefBackend();
  auto program = Program::compile(g, *backend, diag);
  if (!program)
    return ::testing::AssertionFailure()
           << what << ": compile failed: " << detail::firstError(diag);

  auto fill = [&](Value *v, const std::vector<double> &given) {
    for (int64_t e = 0; e < v->type().numElements(); ++e)
      kernels::storeFromDouble(v->dtype(), program->data(v), e, given[e]);
  };
  for (auto &[name, given] : values) {
    Value *v = g.lookup(name);
    if (!v || !(v->isInput() || v->isState()))
      return ::testing::AssertionFailure()
             << what << ": values given for %" << name << ", which is no input or state";
    if ((int64_t)given.size() != v->type().numElements())
      return ::testing::AssertionFailure() << what << ": " << given.size() << " values given for %"
                                           << name << " : " << v->type().str();
    fill(v, given);
  }
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    Value *in = g.inputs()[i];
    if (values.count(in->name().str()))
      continue;
    if (!isFloating(in->dtype()))
      return ::testing::AssertionFailure()
             << what << ": integer input %" << in->name().str() << " needs values";
    std::vector<double> random(in->type().numElements());
    for (size_t e = 0; e < random.size(); ++e)
      random[e] = opts.lo + (opts.hi - opts.lo) * kernels::uniform01Double(opts.seed, 100 + i, e);
    fill(in, random);
  }

  // State updates (batchnorm's running statistics) overwrite state after
  // every run: non-parameter state is restored before each run so that all
  // runs see the same values.
  std::vector<std::vector<double>> initialState;
  for (Value *s : g.state()) {
    std::vector<double> v(s->type().numElements());
    for (size_t e = 0; e < v.size(); ++e)
      v[e] = kernels::loadAsDouble(s->dtype(), program->data(s), e);
    initialState.push_back(std::move(v));
  }
  auto restoreNonParameters = [&] {
    for (size_t k = 0; k < g.state().size(); ++k)
      if (g.state()[k]->stateKind() != StateKind::Parameter)
        fill(g.state()[k], initialState[k]);
  };
  auto lossValue = [&] {
    restoreNonParameters();
    program->run(0);
    return kernels::loadAsDouble(loss->dtype(), program->data(loss), 0);
  };
  lossValue();

  std::vector<Value *> params;
  std::vector<std::vector<double>> analytic;
  for (Value *p : g.state(StateKind::Parameter)) {
    if (!p->trainable())
      continue;
    Value *grad = g.lookup(gradientName(p->name()));
    if (!grad)
      return ::testing::AssertionFailure()
             << what << ": no gradient for parameter %" << p->name().str();
    if (grad->type() != p->type())
      return ::testing::AssertionFailure()
             << what << ": gradient of %" << p->name().str() << " is " << grad->type().str();
    if (!llvm::is_contained(g.outputs(), grad))
      return ::testing::AssertionFailure()
             << what << ": gradient of %" << p->name().str() << " is not a graph output";
    // Copy the analytic gradients before perturbing.
    std::vector<double> gv(p->type().numElements());
    for (size_t e = 0; e < gv.size(); ++e)
      gv[e] = kernels::loadAsDouble(grad->dtype(), program->data(grad), e);
    params.push_back(p);
    analytic.push_back(std::move(gv));
  }
  for (size_t k = 0; k < params.size(); ++k) {
    bool allZero =
        std::all_of(analytic[k].begin(), analytic[k].end(), [](double v) { return v == 0; });
    if (allZero && !opts.allowZeroGradient)
      return ::testing::AssertionFailure()
             << what << ": the gradient of %" << params[k]->name().str() << " is zero everywhere";
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
               << what << ": d loss / d " << p->name().str() << "[" << e << "]: analytic "
               << analytic[k][e] << ", finite difference " << fd;
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult checkGradients(const std::string &opName,
                                                 const std::vector<GradCheckOperand> &operands,
                                                 AttrMap attrs = {}, GradCheckOptions opts = {}) {
  const OpInfo *op = OpRegistry::builtin().lookup(opName);
  if (!op)
    return ::testing::AssertionFailure() << "unknown op " << opName;
  Graph g("gradcheck");
  DiagnosticEngine diag;
  std::vector<Value *> values;
  NamedValues given;
  for (size_t i = 0; i < operands.size(); ++i) {
    const GradCheckOperand &o = operands[i];
    std::string name = "p" + std::to_string(i);
    if (isFloating(o.type.dtype()) && o.differentiate)
      values.push_back(g.addState(name, o.type, StateKind::Parameter));
    else
      values.push_back(g.addInput(name, o.type));
    std::vector<double> v(o.type.numElements());
    for (size_t e = 0; e < v.size(); ++e)
      v[e] = e < o.values.size()
                 ? o.values[e]
                 : opts.lo + (opts.hi - opts.lo) * kernels::uniform01Double(opts.seed, 100 + i, e);
    given[name] = std::move(v);
  }
  Node *n = buildNode(g, *op, values, std::move(attrs), Location(), diag);
  if (!n)
    return ::testing::AssertionFailure() << detail::firstError(diag);
  if (opts.result >= n->numResults())
    return ::testing::AssertionFailure() << opName << " has no result " << opts.result;
  Value *y = n->result(opts.result);
  Value *r = g.addInput("r", y->type());
  std::vector<double> weights(y->type().numElements());
  for (size_t e = 0; e < weights.size(); ++e)
    weights[e] = -1 + 2 * kernels::uniform01Double(opts.seed, 99, e);
  given["r"] = std::move(weights);
  Node *prod = buildNode(g, OpRegistry::builtin().get(OpKind::Mul), {y, r}, {}, Location(), diag);
  Node *loss = prod ? buildNode(g, OpRegistry::builtin().get(OpKind::ReduceSum), {prod->result()},
                                {}, Location(), diag, {"loss"})
                    : nullptr;
  if (!loss)
    return ::testing::AssertionFailure() << detail::firstError(diag);
  loss->setRole(NodeRole::Loss);
  g.addOutput(loss->result());
  return checkGraphGradients(g, given, opts, opName);
}

} // namespace ampc::testing

#endif
