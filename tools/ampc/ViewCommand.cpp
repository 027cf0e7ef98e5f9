//===- ViewCommand.cpp - `ampc view`: the rewritten graph as a web page ---===//
//
// ampc view MODEL -o OUT.html [-O Ox] [--graph forward|train] [--device D]
//           [--detail auto|ops|blocks]
//
// Writes one self-contained HTML page (docs/inspect.md): the graph the opt
// level makes, laid out by Graphviz, with each node's precision rule, types,
// memory and source location, the cast summary and the memory plan. A thin
// client of api::graphPage; the plan is the compiled program's, as `ampc
// plan` prints it.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "CLI/CLI.hpp"

namespace ampc::cli {

int runView(int argc, char **argv) {
  Options opts;
  std::string halfType, diffLevel, detail = "auto";
  CLI::App app{"write the rewritten graph as one self-contained HTML page: nodes coloured by "
               "the dtype they compute in, casts counted, a click shows why a node got its "
               "precision"};
  app.name("ampc view");
  app.footer("\nOpen OUT.html in a browser; OUT.html#select=%25NAME opens with node %NAME's "
             "details.\nThe page and --emit dot: docs/inspect.md");
  app.add_option("model", opts.model, "model file (.yaml or .onnx)")->required();
  app.add_option("-o,--output", opts.output, "the page to write (atomically)")->required();
  app.add_option("-O,--opt-level", opts.optLevel,
                 "optimization level (default: the model file's, else O0)")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}));
  app.add_option("--diff", diffLevel,
                 "mark what changed from this level (ampc diff as a page): nodes in another "
                 "dtype, nodes that level lacks, and a panel of both levels' differences")
      ->check(CLI::IsMember({"O0", "O1", "O2", "O3"}));
  app.add_option("--graph", opts.graph,
                 "forward, or train (forward + backward + optimizer; the default when the "
                 "model has an optimizer)")
      ->check(CLI::IsMember({"forward", "train"}));
  app.add_option("--detail", detail,
                 "ops: every node; blocks: each block instance as one box; auto (default): "
                 "every node unless the layout would be slow, then blocks")
      ->check(CLI::IsMember({"auto", "ops", "blocks"}));
  app.add_option("--device", opts.device,
                 "the device whose memory plan is shown (and whose half type is the default): "
                 "auto, cpu, cpu-ref, cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cpu-ref", "cuda"}));
  app.add_option("--half-type", halfType, "the half type: bf16 (CPU default) or f16")
      ->check(CLI::IsMember({"f16", "bf16"}));
  app.add_option("--batch", opts.batch, "override the model's batch size")
      ->check(CLI::PositiveNumber);
  app.add_flag("--write-through", opts.writeThrough,
               "let -o follow a symlink to its target or write into a device or FIFO");
  auto *limits = "Limits (what a model file may ask for; docs/cli.md)";
  app.add_option("--max-elements", opts.maxElements, "largest element count of one tensor")
      ->check(CLI::PositiveNumber)
      ->group(limits);
  app.add_option("--max-nodes", opts.maxNodes, "most graph nodes the layers may lower to")
      ->check(CLI::PositiveNumber)
      ->group(limits);
  app.add_option("--max-memory", opts.maxMemory, "most bytes the memory plan may need")
      ->check(CLI::PositiveNumber)
      ->group(limits);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? kSuccess : kBadInput;
  }
  if (opts.output.empty()) {
    err() << "error: --output needs a file name, got an empty one\n";
    return kBadInput;
  }
  if (!halfType.empty())
    opts.ampOverrides.emplace_back("half_type", halfType);
  if (!api::canLayOutGraphs()) {
    printDiagnostics(api::layoutSvg("").status());
    return kRuntimeFailure;
  }
  // The page is written last; a path it cannot go to is found first.
  if (api::Status s = api::checkOutputPath(opts.output, opts.writeThrough); !s) {
    printDiagnostics(s);
    return kBadInput;
  }

  std::optional<api::Model> model = loadModel(opts);
  if (!model)
    return kBadInput;
  std::optional<api::DeviceChoice> device = selectDevice(opts);
  if (!device)
    return kRuntimeFailure;
  opts.device = device->name; // the precision passes ask it what runs in half
  bool trainable = model->trainable();
  if (opts.graph == "train" && !trainable) {
    err() << "error: --graph train needs a model with a loss and an 'optimizer' section\n";
    return kBadInput;
  }
  api::Stage stage =
      opts.graph == "forward" || !trainable ? api::Stage::Forward : api::Stage::Train;
  if (!runPipeline(*model, opts, stage))
    return kBadInput;
  api::GraphView g = model->graph();
  api::ViewOptions vopts;
  vopts.detail = detail == "ops"      ? api::ViewDetail::Ops
                 : detail == "blocks" ? api::ViewDetail::Blocks
                                      : api::ViewDetail::Auto;
  // Too big to lay out: a limit of the input, like --max-nodes.
  api::Result<api::ViewPlan> plan = api::planView(*model, vopts);
  if (!plan) {
    printDiagnostics(plan.status());
    return kBadInput;
  }
  if (plan->folded())
    err() << "warning: the page is folded: the graph has " << plan->nodes
          << " nodes, inputs and state tensors"
          << (detail == "blocks" ? "" : ", too many to lay out in reasonable time")
          << "; block instances nested " << plan->foldDepth << " deep (and shallower ones with "
          << "no blocks inside) are drawn as one box each: " << plan->boxes << " boxes, "
          << plan->drawn << " drawn. Every node: --detail ops (slow), --emit dot, or --graph "
          << "forward\n";
  else if (vopts.detail == api::ViewDetail::Blocks)
    err() << "note: the graph has no blocks to fold: every node is drawn\n";

  // The memory plan is the compiled program's. A model that cannot be
  // compiled here (too big for this machine, say) is still drawn.
  api::CompileOptions copts;
  copts.device = device->name;
  copts.maxMemoryBytes = static_cast<uint64_t>(opts.maxMemory);
  api::Result<api::Program> program = api::Program::compile(*model, copts);
  if (!program) {
    std::string why = program.status().diagnostics().empty()
                          ? std::string("it does not compile")
                          : program.status().diagnostics().front().message;
    vopts.memoryNote = "no memory plan: " + why;
    err() << "warning: the page shows no memory plan: " << why << "\n";
  }
  // --diff: the other level, rewritten for the same stage and compiled for
  // its plan's peak.
  std::optional<api::Model> against;
  std::optional<api::Program> againstProgram;
  if (!diffLevel.empty()) {
    Options other = opts;
    other.optLevel = diffLevel;
    against = loadModel(other);
    if (!against || !runPipeline(*against, other, stage))
      return kBadInput;
    vopts.against = &*against;
    if (api::Result<api::Program> p = api::Program::compile(*against, copts))
      againstProgram = std::move(*p);
    vopts.againstProgram = againstProgram ? &*againstProgram : nullptr;
  }
  api::Result<std::string> page = api::graphPage(*model, program ? &*program : nullptr, vopts);
  if (!page) {
    printDiagnostics(page.status());
    return kRuntimeFailure;
  }
  if (api::Status s = api::writeFileAtomically(opts.output, *page, opts.writeThrough); !s) {
    printDiagnostics(s);
    return kRuntimeFailure;
  }
  out() << "wrote " << opts.output << ": " << g.name() << " at " << optLevelOf(*model) << ", "
        << (stage == api::Stage::Train ? "training" : "forward") << " graph, " << g.numNodes()
        << " nodes, " << g.precisionStats().casts << " casts";
  if (against)
    out() << ", marked against " << diffLevel;
  if (plan->folded())
    out() << ", drawn folded into " << plan->boxes << " boxes";
  out() << "\n";
  return kSuccess;
}

} // namespace ampc::cli
