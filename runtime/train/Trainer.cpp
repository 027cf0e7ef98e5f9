//===- Trainer.cpp ----------------------------------------------------------===//
#include "runtime/train/Trainer.h"

#include "kernels/common/Storage.h"
#include "runtime/ThreadGovernor.h"
#include "runtime/Threads.h"
#include "runtime/data/Prefetch.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/TrainLog.h"

#include "ir/MetaReader.h"
#include "ir/Printer.h"
#include "ir/support/Hash.h"
#include "runtime/dist/Communicator.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

namespace ampc {

namespace {

double readScalar(const Program &p, const Value *v) {
  return kernels::loadAsDouble(v->dtype(), p.data(v), 0);
}

/// "input 'x'" when a floating batch tensor holds NaN or inf, else "".
std::string nonFiniteInput(const Graph &g, llvm::ArrayRef<HostTensor> batch) {
  for (size_t i = 0; i < batch.size() && i < g.inputs().size(); ++i) {
    if (!isFloating(batch[i].dtype()))
      continue;
    for (int64_t e = 0; e < batch[i].numElements(); ++e)
      if (!std::isfinite(batch[i].getAsDouble(e)))
        return ("input '" + g.inputs()[i]->name() + "'").str();
  }
  return "";
}

/// Copies one batch into the program's inputs (same order as the graph's).
void bindBatch(Program &p, llvm::ArrayRef<HostTensor> batch) {
  const Graph &g = p.graph();
  for (size_t i = 0; i < g.inputs().size(); ++i)
    std::memcpy(p.dataToOverwrite(g.inputs()[i]), batch[i].data(), batch[i].sizeInBytes());
}

const Node *lossNode(const Graph &g) {
  const Node *loss = nullptr;
  for (const Node &n : g.nodes())
    if (n.role() == NodeRole::Loss)
      loss = &n;
  return loss;
}

/// A loss whose target is integral (class indices) is a classification: its
/// first operand holds logits with the classes along the last dimension.
bool isClassification(const Node &loss) {
  return loss.numOperands() >= 2 && isIntegral(loss.operand(1)->dtype()) &&
         loss.operand(0)->type().rank() >= 1 && !combinesLosses(loss);
}

/// The loss whose predictions accuracy is counted on: the first
/// classification among the loss terms, or null.
const Node *classifierNode(const Graph &g) {
  for (const Node &n : g.nodes())
    if (n.role() == NodeRole::Loss && isClassification(n))
      return &n;
  return nullptr;
}

/// Correct predictions and counted targets of the first `samples` of the
/// program's `batch` samples (targets equal to the loss's ignore_index, if
/// it has one, are not counted).
void countCorrect(const Program &p, const Node &loss, int64_t samples, int64_t batch,
                  int64_t &correct, int64_t &counted, int64_t &correct5) {
  const Value *logits = loss.operand(0), *labels = loss.operand(1);
  int64_t classes = logits->type().dims().back();
  int64_t rows = logits->type().numElements() / classes / batch * samples;
  const Attribute *ignoreAttr = loss.findAttr("ignore_index");
  std::optional<int64_t> ignore;
  if (ignoreAttr && ignoreAttr->is(AttrType::Int))
    ignore = ignoreAttr->getInt();
  const void *x = p.data(logits), *y = p.data(labels);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = kernels::loadIndex(labels->dtype(), y, r);
    if (ignore && label == *ignore)
      continue;
    int64_t best = 0, above = 0;
    double bestValue = kernels::loadAsDouble(logits->dtype(), x, r * classes);
    double labelValue = label >= 0 && label < classes
                            ? kernels::loadAsDouble(logits->dtype(), x, r * classes + label)
                            : -INFINITY;
    for (int64_t c = 0; c < classes; ++c) {
      double v = kernels::loadAsDouble(logits->dtype(), x, r * classes + c);
      if (v > bestValue) {
        bestValue = v;
        best = c;
      }
      // Ties rank ahead of the label when they come first.
      above += v > labelValue || (v == labelValue && c < label);
    }
    ++counted;
    correct += best == label;
    correct5 += above < 5;
  }
}

/// Whether every rank holds the same `mine` as rank 0. False on every rank
/// when any differs, with `err` saying which and marking the communicator
/// as failed together (every rank stops; none needs to abort the job).
/// `what` names the value ("training graph").
bool agreeWithRankZero(dist::Communicator &comm, uint64_t mine, const std::string &what,
                       const std::string &advice, std::string &err) {
  uint64_t rankZero = mine;
  int64_t lastDiffering = 0; // 1 + the highest rank that differs; 0: none
  if (!comm.broadcast(&rankZero, sizeof rankZero, 0, err))
    return false;
  if (rankZero != mine)
    lastDiffering = comm.rank() + 1;
  if (!comm.allReduce(&lastDiffering, 1, DType::I64, dist::ReduceOp::Max, err))
    return false;
  if (lastDiffering == 0)
    return true;
  comm.setFailedTogether();
  if (rankZero != mine)
    err = "rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) + ": its " +
          what + " differs from rank 0's (hash " + hex64(mine) + " against " + hex64(rankZero) +
          "); " + advice;
  else
    err = "rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) + ": rank " +
          std::to_string(lastDiffering - 1) + "'s " + what + " differs from rank 0's; " + advice;
  return false;
}

/// Whether `state` is a gradient accumulator (accumulate_grad's `acc`): it
/// sums this rank's micro-batches, before the all-reduce.
bool isRankLocal(const Value *state) {
  for (const Use &u : state->uses())
    if (u.user->kind() == OpKind::AccumulateGrad && u.operandIndex == 0)
      return true;
  return false;
}

/// The bits of the state every replica must share: parameters, optimizer
/// and scaler state. Batchnorm's running statistics (buffers) and gradient
/// accumulators hold each rank's own.
uint64_t replicatedStateHash(const Program &p) {
  uint64_t h = fnv1a("state", 5);
  for (const Value *v : p.graph().state()) {
    if (v->stateKind() == StateKind::Buffer || isRankLocal(v))
      continue;
    h = fnv1a(v->name().data(), v->name().size(), h);
    h = fnv1a(p.data(v), v->type().sizeInBytes(), h);
  }
  return h;
}

} // namespace

/// Runs the first `rows` samples of `batch` through `full`, a program for
/// a larger batch, and adds their summed loss to `lossSum`. The rows past
/// them repeat sample 0, and a second run of sample 0 alone gives its loss
/// l0: the loss is a mean with the same weight for every sample, and in
/// inference no sample's value depends on another's, so the samples' sum
/// is B L - (B - rows) l0. `afterFirstRun` reads the first run's outputs
/// (the classifications) before the second overwrites them.
static void paddedBatchLoss(Program &full, const Node &loss,
                            llvm::MutableArrayRef<HostTensor> batch, int64_t rows, double &lossSum,
                            llvm::function_ref<void()> afterFirstRun) {
  const int64_t b = batch.empty() ? 1 : batch[0].dims()[0];
  auto fillFrom = [&](int64_t first) {
    for (HostTensor &t : batch) {
      size_t rowBytes = static_cast<size_t>(t.rowElements()) * dtypeSize(t.dtype());
      auto *data = static_cast<char *>(t.data());
      for (int64_t r = first; r < b; ++r)
        std::memcpy(data + r * rowBytes, data, rowBytes);
    }
  };
  fillFrom(rows);
  bindBatch(full, batch);
  full.run(0);
  double padded = readScalar(full, loss.result(0));
  afterFirstRun();
  fillFrom(1);
  bindBatch(full, batch);
  full.run(0);
  double first = readScalar(full, loss.result(0));
  lossSum += double(b) * padded - double(b - rows) * first;
}

bool Trainer::evaluate(EvalResult &result, std::string &err) {
  const Graph &tg = train_.graph();
  for (Program *ev : {eval_.program, eval_.tail}) {
    if (!ev)
      continue;
    for (const Value *v : ev->graph().state()) {
      const Value *src = tg.lookup(v->name());
      if (!src || src->type() != v->type()) {
        err = "evaluation graph state '" + v->name().str() + "' has no match in the training graph";
        return false;
      }
      std::memcpy(ev->dataToOverwrite(v), std::as_const(train_).data(src), v->type().sizeInBytes());
    }
  }
  Program &full = *eval_.program;
  const Graph &eg = full.graph();
  const Node *loss = lossNode(eg);
  if (!loss) {
    err = "the evaluation graph has no loss";
    return false;
  }
  BatchOptions opts;
  opts.batchSize = eg.inputs().empty() ? 1 : eg.inputs()[0]->type().dim(0);
  opts.shuffle = false;
  opts.dropLast = false;
  opts.evaluation = true;
  Batcher batcher(*eval_.data, opts);
  auto batch = makeBatchTensors(eg);
  int64_t batches = batcher.batchesPerEpoch();
  if (batches == 0) {
    err = "the evaluation data has no samples";
    return false;
  }
  double lossSum = 0;
  int64_t correct = 0, counted = 0, correct5 = 0, samples = 0;
  const Node *classifier = classifierNode(eg);
  bool classification = classifier != nullptr;
  // Inside training, the team the training governor left is the most this
  // one may use.
  ThreadGovernor governor(options_.adaptThreads ? kernelThreads() : 1);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t rows = 0;
    if (!batcher.next(batch, rows, err))
      return false;
    Program *ev = &full;
    if (rows < opts.batchSize && !eval_.tail) {
      // A model that cannot be built at another batch (an ONNX export with
      // the batch in its reshapes): the last samples run padded to a whole
      // batch.
      paddedBatchLoss(full, *loss, batch, rows, lossSum, [&] {
        if (classification)
          countCorrect(full, *classifier, rows, opts.batchSize, correct, counted, correct5);
      });
      samples += rows;
      continue;
    }
    if (rows < opts.batchSize) {
      // The last partial batch runs through the program compiled for it.
      ev = eval_.tail;
      if (ev->graph().inputs()[0]->type().dim(0) != rows) {
        err = "no evaluation program for the last " + std::to_string(rows) + " samples";
        return false;
      }
      const Graph &tailGraph = ev->graph();
      for (size_t i = 0; i < tailGraph.inputs().size(); ++i)
        std::memcpy(ev->data(tailGraph.inputs()[i]), batch[i].data(),
                    tailGraph.inputs()[i]->type().sizeInBytes());
    } else {
      bindBatch(full, batch);
    }
    ev->run(0);
    governor.afterStep();
    const Node *l = ev == &full ? loss : lossNode(ev->graph());
    lossSum += readScalar(*ev, l->result(0)) * double(rows);
    samples += rows;
    if (classification)
      countCorrect(*ev, ev == &full ? *classifier : *classifierNode(ev->graph()), rows, rows,
                   correct, counted, correct5);
  }
  result.loss = lossSum / double(samples);
  result.samples = samples;
  result.accuracy.reset();
  result.top5.reset();
  if (classification && counted > 0) {
    result.accuracy = double(correct) / counted;
    if (classifier->operand(0)->type().dims().back() >= 5)
      result.top5 = double(correct5) / counted;
  }
  return true;
}

bool Trainer::run(llvm::raw_ostream &out, TrainResult &result, std::string &err) {
  const Graph &g = train_.graph();
  const Value *lossValue = g.lookup("loss");
  if (!lossValue || lossValue->type().rank() != 0) {
    err = "the training graph has no scalar value named 'loss'";
    return false;
  }
  const Value *lrValue = g.lookup("lr");
  // Several optimizers: each one's %lr.<name> (passes/OptimizerSets.h);
  // the progress line shows the first one's.
  std::vector<const Value *> optimizerLrs;
  for (int64_t i = 0, n = metaInt(g, "optimizers", 0); i < n; ++i)
    if (const Value *v =
            g.lookup("lr." + metaString(g, "optimizers." + std::to_string(i) + ".name", "")))
      optimizerLrs.push_back(v);
  if (!lrValue && !optimizerLrs.empty())
    lrValue = optimizerLrs.front();
  // Outputs of the loss-scale pass (absent without loss scaling).
  const Value *scaleValue = g.lookup("loss_scale");
  const Value *skippedValue = g.lookup("skipped");
  const int64_t k = std::max<int64_t>(1, options_.accumulate);
  // A list of losses: its terms %loss.0, %loss.1, ... (graph outputs) and,
  // with a scaler per loss, %loss_scale, %loss_scale.1, ...
  std::vector<const Value *> termValues, termScales;
  for (size_t t = 0;; ++t) {
    const Value *term = g.lookup("loss." + std::to_string(t));
    if (!term || term->type().rank() != 0 || !llvm::is_contained(g.outputs(), term))
      break;
    termValues.push_back(term);
  }
  if (scaleValue && g.lookup("loss_scale.1")) {
    termScales.push_back(scaleValue);
    for (size_t t = 1; const Value *scale = g.lookup("loss_scale." + std::to_string(t)); ++t)
      termScales.push_back(scale);
  }

  // Micro-batches are counted in int64 (the batcher's position, the
  // dropout streams).
  int64_t microSteps = 0;
  if (llvm::MulOverflow(options_.steps, k, microSteps)) {
    err = std::to_string(options_.steps) + " steps of " + std::to_string(k) +
          " micro-batches are more than int64 counts";
    return false;
  }

  // A checkpoint that cannot be written is found now, not after the
  // training it was meant to keep.
  if (!options_.checkpointPath.empty() &&
      !checkOutputPath(options_.checkpointPath, err, options_.specialOutputs))
    return false;

  CheckpointInfo info;
  info.model = g.name();
  info.modelHash = modelHash(g);
  info.optLevel = options_.optLevel;
  info.optimizer = optimizerOf(g);
  info.batchSize = static_cast<uint64_t>(std::max<int64_t>(0, options_.batchSize));
  info.data = options_.dataDescription;
  info.lrSchedule = options_.scheduleDescription;
  if (!options_.resumePath.empty()) {
    // Only the step comes from the checkpoint's header: the checkpoints this
    // run writes describe this run (one of another level resumes here).
    CheckpointInfo loaded;
    if (!loadCheckpoint(options_.resumePath, train_, loaded, err))
      return false;
    info.step = loaded.step;
    info.microStep = loaded.microStep;
    info.conversionNote = loaded.conversionNote;
    if (info.microStep != info.step * uint64_t(k)) {
      err = options_.resumePath + ": checkpoint was written at micro-step " +
            std::to_string(info.microStep) + ", which is not step " + std::to_string(info.step) +
            " x accumulate " + std::to_string(k) + "; resume with the same accumulate";
      return false;
    }
    if (static_cast<int64_t>(info.step) >= options_.steps) {
      // Steps count from the start of the run, so this would train nothing.
      err = options_.resumePath + ": the checkpoint is at step " + std::to_string(info.step) +
            ", so a run of " + std::to_string(options_.steps) +
            " steps has nothing left to train; ask for more steps";
      return false;
    }
    // What the checkpoint's run trained on, against this run: a changed
    // batch would shift every later batch and the step count's meaning, so
    // it is refused; new data or a new schedule is the user's choice, said.
    if (loaded.batchSize && info.batchSize && loaded.batchSize != info.batchSize) {
      err = options_.resumePath + ": the checkpoint was trained at batch " +
            std::to_string(loaded.batchSize) + ", this run asks for batch " +
            std::to_string(info.batchSize) + "; resume with --batch " +
            std::to_string(loaded.batchSize) + " (or train afresh without --resume)";
      return false;
    }
    out << "resumed from " << options_.resumePath << " at step " << info.step << "\n";
    if (!loaded.data.empty() && !info.data.empty() && loaded.data != info.data)
      out << "note: the training data changed since the checkpoint (" << loaded.data << " -> "
          << info.data << "); continuing on the new data\n";
    if (!loaded.lrSchedule.empty() && !info.lrSchedule.empty() &&
        loaded.lrSchedule != info.lrSchedule)
      out << "note: the learning-rate schedule changed since the checkpoint (" << loaded.lrSchedule
          << " -> " << info.lrSchedule << "); applying the new one\n";
    if (!info.conversionNote.empty())
      out << "note: " << info.conversionNote << "\n";
  }
  result.firstStep = static_cast<int64_t>(info.step);
  result.steps = result.firstStep;

  Batcher batcher(data_, batching_);
  batcher.skipTo(result.firstStep * k);
  int dataWorkers = !options_.prefetch         ? 0
                    : options_.dataWorkers > 0 ? options_.dataWorkers
                                               : BatchPrefetcher::defaultWorkers(kernelThreads());
  BatchPrefetcher prefetcher(batcher, g, dataWorkers);
  ThreadGovernor governor(options_.adaptThreads ? kernelThreads() : 1);
  llvm::MutableArrayRef<HostTensor> batch;
  // A step's epoch is that of its last micro-batch.
  const int64_t batchesPerEpoch = batcher.batchesPerEpoch();
  auto epochOf = [&](int64_t step) {
    return batchesPerEpoch > 0 ? (step * k - 1) / batchesPerEpoch + 1 : 0;
  };
  TrainLog log(out, options_.progress, options_.logEvery, options_.steps, result.firstStep,
               epochOf(options_.steps));
  if (!log.openMetrics(options_.metricsPath, !options_.resumePath.empty(), err))
    return false;

  dist::Communicator *comm =
      options_.communicator && options_.communicator->size() > 1 ? options_.communicator : nullptr;
  if (comm) {
    // A rank with another model, opt level, step count or resume point
    // would wait in collectives the others never make. (Without source
    // locations: ranks may name the model file by different paths.)
    PrintOptions noLocations;
    noLocations.locations = false;
    std::string text = printGraphToString(g, noLocations) + "\nsteps " +
                       std::to_string(options_.steps) + " accumulate " + std::to_string(k) +
                       " from step " + std::to_string(info.step) + "\n";
    if (!agreeWithRankZero(*comm, fnv1a(text.data(), text.size()), "training graph or run",
                           "every rank must run the same model file with the same options "
                           "(opt level, batch, steps, resume checkpoint)",
                           err))
      return false;
  }

  bool deviceCollectives = train_.deviceActivity().deviceCollectiveNodes > 0;
  double timedMs = 0, timedDataMs = 0;
  int64_t timedSteps = 0;
  auto writeCheckpoint = [&](int64_t step) {
    info.step = step;
    info.microStep = step * k;
    return saveCheckpoint(options_.checkpointPath, train_, info, err, options_.specialOutputs);
  };

  // Profiles leave out the first step (JIT, first touches of the arenas)
  // unless it is the only one.
  if (options_.profile && options_.steps == result.firstStep + 1)
    train_.setProfiling(true, options_.traceSteps);
  for (int64_t step = result.firstStep + 1; step <= options_.steps; ++step) {
    if (options_.profile && step == result.firstStep + 2)
      train_.setProfiling(true, options_.traceSteps);
    auto start = std::chrono::steady_clock::now();
    double lossSum = 0, dataMs = 0;
    std::vector<double> termSums(termValues.size(), 0.0);
    for (int64_t m = 0; m < k; ++m) {
      int64_t rows = 0;
      auto dataStart = std::chrono::steady_clock::now();
      bool another = step < options_.steps || m + 1 < k;
      if (!prefetcher.next(batch, rows, another, err))
        return false;
      bindBatch(train_, batch);
      dataMs +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - dataStart)
              .count();
      {
        // With NCCL the all-reduces run on the GPU, and a rank that died or
        // hangs leaves this one waiting for its device, not in a
        // communicator call: the same timeout covers that wait.
        dist::WatchedWait wait(deviceCollectives ? comm : nullptr,
                               "a step whose all-reduces run on the GPU (NCCL)");
        train_.run(static_cast<uint64_t>((step - 1) * k + m));
        lossSum += readScalar(train_, lossValue);
        for (size_t t = 0; t < termValues.size(); ++t)
          termSums[t] += readScalar(train_, termValues[t]);
      }
    }
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    governor.afterStep();
    StepRecord rec;
    rec.step = step;
    rec.epoch = epochOf(step);
    rec.loss = lossSum / k;
    // The global batch's loss: the mean over the ranks' equal shards. Every
    // rank then sees the same value (and agrees on a non-finite one).
    if (comm && !comm->allReduce(&rec.loss, 1, DType::F64, dist::ReduceOp::Mean, err))
      return false;
    if (lrValue)
      rec.lr = readScalar(train_, lrValue);
    if (scaleValue)
      rec.lossScale = readScalar(train_, scaleValue);
    for (double sum : termSums)
      rec.lossTerms.push_back(sum / k);
    if (comm && !rec.lossTerms.empty() &&
        !comm->allReduce(rec.lossTerms.data(), rec.lossTerms.size(), DType::F64,
                         dist::ReduceOp::Mean, err))
      return false;
    for (const Value *scale : termScales)
      rec.lossScales.push_back(readScalar(train_, scale));
    for (const Value *lr : optimizerLrs)
      rec.lrs.push_back(readScalar(train_, lr));
    if (skippedValue) {
      rec.skipped = readScalar(train_, skippedValue) != 0;
      result.skippedSteps += *rec.skipped;
    }
    rec.stepMs = ms;
    rec.dataMs = dataMs;
    result.stepMs.push_back(ms);
    rec.samplesPerSecond =
        ms > 0 ? 1000.0 * k * batching_.batchSize * std::max<int64_t>(1, batching_.ranks) / ms : 0;
    if (step > result.firstStep + 1 || options_.steps == result.firstStep + 1) {
      timedMs += ms;
      timedDataMs += dataMs;
      ++timedSteps;
    }
    if (step == result.firstStep + 1)
      result.firstLoss = rec.loss;
    result.finalLoss = rec.loss;
    result.finalLossScale = rec.lossScale;
    result.finalLossScales = rec.lossScales;
    result.steps = step;
    if (eval_.program && options_.evalEvery > 0 &&
        (step % options_.evalEvery == 0 || step == options_.steps)) {
      EvalResult ev;
      if (!evaluate(ev, err))
        return false;
      rec.eval = ev;
      result.eval = ev;
    }
    if (!log.record(rec, err))
      return false;
    // With a loss scaler an overflow skips the step and backs the scale
    // off; without one a non-finite loss means the run diverged.
    // Under loss scaling a NaN in the data looks like an overflow: every
    // such step is skipped and the scale backs off without end.
    if (!std::isfinite(rec.loss) && skippedValue) {
      std::string badInput = nonFiniteInput(g, batch);
      if (!badInput.empty()) {
        log.finish();
        err = "the batch of step " + std::to_string(step) + " holds NaN or inf in its " + badInput +
              "; the data is bad (the loss scaler would skip such steps forever)";
        return false;
      }
    }
    if (!std::isfinite(rec.loss) && !skippedValue) {
      log.finish();
      if (comm)
        comm->setFailedTogether(); // every rank saw the same mean loss
      // Bad data and a learning rate past the edge of stability look alike
      // from the loss; the batch tells them apart.
      std::string badInput = nonFiniteInput(g, batch);
      err = "the loss is not finite at step " + std::to_string(step) +
            (badInput.empty() ? " (diverged; try a lower learning rate)"
                              : " (the batch's " + badInput +
                                    " holds NaN or inf: the data, not the learning rate)");
      return false;
    }
    if (!options_.checkpointPath.empty() && options_.checkpointEvery > 0 &&
        step % options_.checkpointEvery == 0 && step != options_.steps && !writeCheckpoint(step))
      return false;
  }
  log.finish();
  if (comm && !agreeWithRankZero(*comm, replicatedStateHash(train_),
                                 "replica (parameters, optimizer and loss-scaler state)",
                                 "the replicas diverged (a bug: please report it)", err))
    return false;
  if (!options_.checkpointPath.empty() && !writeCheckpoint(result.steps))
    return false;
  result.stepsAtThreads = governor.stepsAtThreads();
  result.threadChanges = governor.changes();
  result.prefetch = prefetcher.counts();
  result.meanStepMs = timedSteps ? timedMs / timedSteps : 0;
  result.meanDataMs = timedSteps ? timedDataMs / timedSteps : 0;
  MeasuredMemory measured = train_.measure();
  result.plannedBytes = train_.plan().peakBytes();
  result.allocatedBytes = measured.allocatedBytes;
  result.kernelHeldBytes = measured.kernelHeldBytes;
  if (eval_.program)
    result.kernelHeldBytes += eval_.program->measure().kernelHeldBytes;
  if (!measured.guardsIntact) {
    err = "a kernel wrote past the end of a memory arena";
    return false;
  }
  return true;
}

void printTrainSummary(const TrainResult &result, llvm::raw_ostream &out) {
  out << "trained " << result.steps - result.firstStep << " steps";
  if (result.firstStep)
    out << " (from step " << result.firstStep << " to " << result.steps << ")";
  out << ": loss " << llvm::format("%.6f", result.firstLoss) << " -> "
      << llvm::format("%.6f", result.finalLoss) << "\n";
  if (result.eval) {
    out << "eval on " << result.eval->samples << " samples: loss "
        << llvm::format("%.6f", result.eval->loss);
    if (result.eval->accuracy)
      out << ", accuracy " << llvm::format("%.2f%%", 100 * *result.eval->accuracy);
    if (result.eval->top5)
      out << ", top-5 " << llvm::format("%.2f%%", 100 * *result.eval->top5);
    out << "\n";
  }
  if (result.finalLossScale) {
    out << "loss scaling: " << result.skippedSteps << " of " << result.steps - result.firstStep
        << " steps skipped for overflow, final scale";
    if (result.finalLossScales.empty())
      out << " " << llvm::format("%g", *result.finalLossScale);
    else
      out << "s (one per loss)";
    for (double scale : result.finalLossScales)
      out << " " << llvm::format("%g", scale);
    out << "\n";
  }
  out << "mean step time " << llvm::format("%.2f", result.meanStepMs)
      << " ms (first step excluded), of which waiting for data "
      << llvm::format("%.2f", result.meanDataMs) << " ms\n";
  if (result.threadChanges > 0) {
    // The team shrank while other work held cores (ThreadGovernor).
    int most = result.stepsAtThreads.rbegin()->first;
    out << "threads: " << most << ", fewer while other work shared the cores (";
    bool first = true;
    for (auto [threads, steps] : result.stepsAtThreads) {
      out << (first ? "" : ", ") << steps << " step" << (steps == 1 ? "" : "s") << " at "
          << threads;
      first = false;
    }
    out << "; " << result.threadChanges << " change" << (result.threadChanges == 1 ? "" : "s")
        << "; --threads N keeps N)\n";
  }
  out << "peak memory: planned " << result.plannedBytes << " B, allocated " << result.allocatedBytes
      << " B";
  if (result.kernelHeldBytes)
    out << "; kernels keep " << result.kernelHeldBytes
        << " B outside the plan (weights in oneDNN's layout, all-reduce buffers)";
  out << "\n";
}

} // namespace ampc
