// embed: a host program using the installed ampc library (docs/library.md).
//
//   embed MODEL.yaml [STEPS]
//
// Registers a custom op (swish, x * sigmoid(beta x), with its gradient), adds
// a custom pass that replaces every relu of the model by swish, rewrites the
// model at O2, prints which nodes became half and why, and trains a few steps
// on the CPU.
#include "ampc/ampc.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace ampc::api;

namespace {

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

/// swish and its backward, swish_grad(x, dy) = dy * (s + beta x s (1 - s)).
Status registerSwish() {
  CustomOpSpec grad;
  grad.name = "embed.swish_grad";
  grad.inputs = {{"input"}, {"grad"}};
  grad.attrs = {{"beta", AttrKind::Float, 1.0}};
  grad.category = Category::Follow;
  grad.shape = [](const ShapeContext &ctx, std::vector<TensorInfo> &out) {
    out.push_back(ctx.input(0));
    return Status();
  };
  grad.cpuKernel = [](const KernelContext &k) {
    double beta = k.floatAttr("beta");
    for (int64_t i = 0; i < k.output().numElements(); ++i) {
      double x = k.input(0).get(i), s = sigmoid(beta * x);
      k.output().set(i, k.input(1).get(i) * (s + beta * x * s * (1 - s)));
    }
  };
  if (Status s = registerCustomOp(grad); !s)
    return s;

  CustomOpSpec op;
  op.name = "embed.swish";
  op.inputs = {{"input"}};
  op.attrs = {{"beta", AttrKind::Float, 1.0}};
  // Elementwise: it runs in whatever precision its neighbours run in.
  op.category = Category::Follow;
  op.shape = [](const ShapeContext &ctx, std::vector<TensorInfo> &out) {
    out.push_back(ctx.input(0));
    return Status();
  };
  op.gradient = [](GradientContext &g) {
    ValueView dx = g.build1("embed.swish_grad", {g.input(0), g.outputGrad(0)},
                            {{"beta", *g.forward().attr("beta")}});
    if (!dx)
      return Status::error("cannot build swish_grad");
    g.setInputGrad(0, dx);
    return Status();
  };
  op.cpuKernel = [](const KernelContext &k) {
    double beta = k.floatAttr("beta");
    for (int64_t i = 0; i < k.output().numElements(); ++i) {
      double x = k.input(0).get(i);
      k.output().set(i, x * sigmoid(beta * x));
    }
  };
  return registerCustomOp(op);
}

/// The custom pass: every relu becomes a swish.
Status reluToSwish(GraphEditor &g) {
  for (NodeView n : g.nodes()) {
    if (n.op() != "relu")
      continue;
    Result<std::vector<ValueView>> swish = g.insertNode("embed.swish", n.inputs(), {}, n);
    if (!swish)
      return swish.status();
    if (Status s = g.replaceAllUses(n.output(), swish->front()); !s)
      return s;
    if (Status s = g.eraseNode(n); !s)
      return s;
  }
  return Status();
}

int fail(const Status &s) {
  std::fprintf(stderr, "%s", s.message().c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: embed MODEL.yaml [STEPS]\n");
    return 2;
  }
  int64_t steps = argc > 2 ? std::atoll(argv[2]) : 3;
  std::printf("ampc %s (built against %s)\n", version(), AMPC_VERSION_STRING);

  if (Status s = registerSwish(); !s)
    return fail(s);

  // A smaller batch than the file's keeps the example quick on a CPU.
  LoadOptions load;
  load.batch = 32;
  Result<Model> model = Model::loadFile(argv[1], load);
  if (!model)
    return fail(model.status());

  Result<Policy> policy = Policy::fromLevel("O2", {{"half_type", "bf16"}});
  if (!policy)
    return fail(policy.status());
  std::printf("precision policy:\n%s", policy->str().c_str());
  if (Status s = model->setPolicy(*policy); !s)
    return fail(s);
  TrainSettings settings;
  settings.steps = steps;
  if (Status s = model->setTrainSettings(settings); !s)
    return fail(s);

  PipelineOptions pipeline;
  pipeline.stage = Stage::Train;
  pipeline.insertBefore("assign-precision", {"relu-to-swish", reluToSwish});
  pipeline.afterPass = [](std::string_view pass, const GraphView &g) {
    std::printf("after %-20.*s %zu nodes\n", int(pass.size()), pass.data(), g.numNodes());
  };
  if (Status s = model->rewrite(pipeline); !s)
    return fail(s);

  GraphView g = model->graph();
  std::printf("forward nodes in half:\n");
  for (NodeView n : g.nodes()) {
    std::optional<DType> p = n.precision();
    if (p && isHalf(*p))
      std::printf("  %%%s = %s  (%s)\n", n.output().name().c_str(), n.op().c_str(),
                  n.reason().c_str());
  }
  std::printf("%zu casts; %s\n", g.casts().size(), g.precisionStats().str.c_str());

  CompileOptions compile;
  compile.device = "cpu";
  Result<Program> program = Program::compile(*model, compile);
  if (!program)
    return fail(program.status());
  TrainOptions train;
  train.logEvery = 1;
  train.log = [](std::string_view line) { std::printf("  %.*s\n", int(line.size()), line.data()); };
  Result<TrainReport> report = program->train(train);
  if (!report)
    return fail(report.status());
  std::printf("trained %lld steps: loss %.6f -> %.6f\n", (long long)report->steps,
              report->firstLoss, report->finalLoss);
  return std::isfinite(report->finalLoss) ? 0 : 1;
}
