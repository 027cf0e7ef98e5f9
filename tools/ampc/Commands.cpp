//===- Commands.cpp - ampc plan, --run forward, the summary ---------------===//
#include "Driver.h"

#include "ampc/Plan.h"

#include <cstdio>

namespace ampc::cli {

namespace {

std::string fixed6(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

/// Enough digits to read the value back exactly (9 for f32 and narrower,
/// 17 for f64): a loss of 1e-7 is not "0.000000", and two runs' values
/// compare bit for bit.
std::string roundTrip(double v, api::DType dtype) {
  char buf[64];
  std::snprintf(buf, sizeof buf, dtype == api::DType::F64 ? "%.17g" : "%.9g", v);
  return buf;
}

} // namespace

/// Picks the device; "auto" says which one it chose.
std::optional<api::DeviceChoice> selectDevice(const Options &opts) {
  api::Result<api::DeviceChoice> choice = api::selectDevice(opts.device);
  if (!choice) {
    printDiagnostics(choice.status());
    return std::nullopt;
  }
  if (!choice->note.empty())
    out() << choice->note << "\n";
  return *choice;
}

std::optional<api::Program> compileProgram(const api::Model &m, const std::string &device,
                                           const Options &opts, int &failureCode,
                                           std::shared_ptr<api::World> world) {
  api::CompileOptions copts;
  copts.device = device;
  copts.castCache = opts.castCache;
  copts.maxMemoryBytes = static_cast<uint64_t>(opts.maxMemory);
  copts.world = world ? world : jobWorld();
  // Data paths resolve against the model file's folder (the default).
  api::Result<api::Program> program = api::Program::compile(m, copts);
  if (!program) {
    failureCode = program.status().outOfMemory() ? kRuntimeFailure : kBadInput;
    printDiagnostics(program.status());
    return std::nullopt;
  }
  return std::move(*program);
}

std::string heldByKernelsRow(uint64_t held) {
  if (!held)
    return "";
  // Not in the arenas, but memory the run holds all the same.
  char row[128];
  std::snprintf(row, sizeof row, "  %-32s %14llu B  %10.2f MiB\n", "held by kernels (not planned)",
                static_cast<unsigned long long>(held), double(held) / 1048576.0);
  return row;
}

/// `ampc plan`: the memory plan's table, before anything runs.
int runPlan(const api::Model &m, const Options &opts) {
  std::optional<api::DeviceChoice> device = selectDevice(opts);
  if (!device)
    return kRuntimeFailure;
  showPolicy(m, device->name);
  int failureCode = kBadInput;
  // A job's program planned without its launcher (--data-parallel N).
  std::shared_ptr<api::World> planning;
  if (opts.dataParallel > 1 && (!jobWorld() || jobWorld()->size() == 1))
    planning = api::World::planning(static_cast<int>(opts.dataParallel));
  std::optional<api::Program> program =
      compileProgram(m, device->name, opts, failureCode, planning);
  if (!program)
    return failureCode;
  out() << "model " << m.name() << ", opt level " << optLevelOf(m) << ", "
        << program->numScheduledOps() << " scheduled ops on " << program->device() << "\n";
  out() << program->memoryPlan() << heldByKernelsRow(program->kernelHeldBytes());
  if (std::string c = program->collectives(); !c.empty())
    out() << c << " (the plan is each rank's)\n";
  // Recomputation changes the training step only (the forward graph has
  // no backward to recompute for).
  if (opts.recompute == "cheap" && m.rewrittenStage() == api::Stage::Train && !m.asWritten()) {
    // The same model without recomputation, for the difference it makes.
    Options without = opts;
    without.recompute = "none";
    api::Result<api::Model> kept = loadModelQuietly(without);
    api::Status rewritten =
        kept ? rewriteQuietly(*kept, without, api::Stage::Train) : api::Status(kept.status());
    api::CompileOptions copts;
    copts.device = device->name;
    copts.castCache = opts.castCache;
    copts.world = planning;
    api::Result<api::PlanReport> plan =
        rewritten ? api::planProgram(*kept, copts) : api::Result<api::PlanReport>(rewritten);
    if (!plan) {
      printDiagnostics(plan.status());
      return kBadInput;
    }
    uint64_t with = program->plannedBytes(), before = plan->summary.peakBytes;
    char line[200];
    std::snprintf(line, sizeof line,
                  "recompute cheap: peak %llu B (%.2f MiB), without it %llu B (%.2f MiB): "
                  "%.1f%% less\n",
                  static_cast<unsigned long long>(with), double(with) / 1048576.0,
                  static_cast<unsigned long long>(before), double(before) / 1048576.0,
                  before ? 100.0 * (double(before) - double(with)) / double(before) : 0.0);
    out() << line;
    if (std::string r = m.graph().recomputed(); !r.empty())
      out() << r << "\n";
  }
  return kSuccess;
}

/// `--run forward`: one batch through the forward pass and the loss.
int runForward(api::Model &m, const Options &opts) {
  std::optional<api::DeviceChoice> device = selectDevice(opts);
  if (!device)
    return kRuntimeFailure;
  showPolicy(m, device->name);
  int failureCode = kBadInput;
  std::optional<api::Program> program = compileProgram(m, device->name, opts, failureCode);
  if (!program)
    return failureCode;
  if (api::Result<api::DataInfo> data = m.openData(); !data) {
    printDiagnostics(data.status());
    return kBadInput;
  }
  // The trained weights, when asked for (they used to be ignored silently).
  if (!opts.resume.empty()) {
    api::Status s = program->loadCheckpoint(opts.resume);
    if (!s) {
      printDiagnostics(s);
      return kRuntimeFailure;
    }
    out() << "weights from " << opts.resume << "\n";
    // A checkpoint of another level: what was rebuilt for this one.
    for (const api::Diagnostic &d : s.diagnostics())
      out() << d.str() << "\n";
  }
  api::Result<api::ForwardReport> report = program->runForward();
  if (!report) {
    printDiagnostics(report.status());
    return kRuntimeFailure;
  }
  out() << "ran forward on one batch of " << report->samples << " samples from " << report->dataKind
        << " data\n";
  for (const api::ForwardReport::Output &o : report->outputs) {
    if (o.info.shape.empty())
      out() << o.name << " = " << roundTrip(o.value, o.info.dtype) << "\n";
    else
      out() << o.name << " : " << o.typeStr << ", mean " << fixed6(o.value) << "\n";
  }
  out() << "memory: planned " << report->plannedBytes << " B, allocated " << report->allocatedBytes
        << " B, step arena touched ";
  // The host reads the touched bytes off the arena's fill pattern; a
  // device arena is not scanned.
  if (program->device() == "cuda")
    out() << "(not measured on the device) of " << report->stepBytes << " B";
  else
    out() << report->touchedStepBytes << " of " << report->stepBytes << " B";
  if (report->kernelHeldBytes)
    out() << "; kernels keep " << report->kernelHeldBytes << " B of weights in oneDNN's layout";
  out() << "\n";
  printPrecisionFooter(m, &*program);
  if (!report->guardsIntact) {
    err() << "error: a kernel wrote past the end of an arena\n";
    return kRuntimeFailure;
  }
  return kSuccess;
}

void printSummary(const api::Model &m, const Options &) {
  int64_t paramCount = 0, paramBytes = 0, frozen = 0, buffers = 0;
  api::GraphView g = m.graph();
  for (const api::ValueView &v : g.state()) {
    api::TensorInfo info = v.info();
    if (v.stateKind() == api::StateKind::Parameter) {
      paramCount += info.numElements();
      paramBytes += info.sizeInBytes();
      if (!v.trainable())
        frozen += info.numElements();
    } else {
      buffers += info.numElements();
    }
  }
  out() << "model " << g.name() << ": " << g.inputs().size() << " inputs, " << g.numNodes()
        << " ops, " << paramCount << " parameters (" << paramBytes << " bytes";
  if (frozen)
    out() << ", " << frozen << " frozen";
  out() << "), " << buffers << " buffer elements\n";
  out() << "verified: ok\n";
  showPolicy(m);
  printPrecisionFooter(m, nullptr);
  if (m.asWritten())
    out() << "a forward graph, as written: nothing to train; --run forward runs one batch\n";
  else if (!g.meta("optimizer"))
    out() << "the model has no 'optimizer' section: nothing to train\n";
  out() << "use --emit ir or --emit yaml to print the graph, ampc plan for its memory\n";
}

} // namespace ampc::cli
