//===- Profile.cpp - Kernel times by op kind and node; the trace file ------===//
#include "Internal.h"

#include "ir/OpRegistry.h"
#include "passes/PrecisionReport.h"
#include "runtime/Program.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace ampc::api {

namespace {

double bytesOf(const ampc::Value *v) {
  return static_cast<double>(v->type().numElements()) * ampc::dtypeSize(v->dtype());
}

/// "12.3 GFLOP/s" for dense rows, "4.5 GB/s" for the rest, "" when the row
/// took no measurable time.
std::string rateText(double flops, double bytes, double ms) {
  if (ms <= 0)
    return "";
  if (flops > 0)
    return format("%.1f GFLOP/s", flops / ms / 1e6);
  return format("%.1f GB/s", bytes / ms / 1e6);
}

/// The kernel at `last` (the last node of its fused chain, if any):
/// what it reads from outside the chain and what it writes.
double kernelBytes(const ampc::Program &p, unsigned first, unsigned last) {
  llvm::ArrayRef<const ampc::Node *> schedule = p.schedule();
  double bytes = 0;
  for (unsigned i = first; i <= last; ++i)
    for (const ampc::Value *v : schedule[i]->operands())
      if (v && !(i > first && v == schedule[i - 1]->result()))
        bytes += bytesOf(v);
  for (unsigned r = 0; r < schedule[last]->numResults(); ++r)
    bytes += bytesOf(schedule[last]->result(r));
  return bytes;
}

} // namespace

StepProfile collectProfile(const ampc::Program &p) {
  StepProfile out;
  out.runs = p.profiledRuns();
  out.runMs = out.runs ? p.profiledRunMicros() / 1000.0 / double(out.runs) : 0;
  llvm::ArrayRef<const ampc::Node *> schedule = p.schedule();
  double kernelMsTotal = 0;
  for (unsigned i = 0; i < schedule.size(); ++i) {
    if (p.profileCalls()[i] == 0)
      continue; // fused into a later kernel, or served from the cast cache
    unsigned first = p.chainStart(i);
    const ampc::Node &n = *schedule[i];
    ProfileRow row;
    row.role = static_cast<NodeRole>(n.role());
    if (std::optional<ampc::DType> d = computeDType(n))
      row.dtype = ampc::dtypeName(*d).str();
    if (first == i) {
      row.node = "%" + n.result()->name().str();
      row.op = n.opName().str();
      if (n.op().flops)
        row.flopsPerCall = n.op().flops(n);
    } else {
      row.node = "%" + schedule[first]->result()->name().str() + "..%" + n.result()->name().str() +
                 " (" + std::to_string(i - first + 1) + " fused)";
      row.op = "fused";
      for (unsigned j = first; j <= i; ++j)
        row.op += (j == first ? " " : "+") + schedule[j]->opName().str();
    }
    row.bytesPerCall = kernelBytes(p, first, i);
    row.totalMs = p.profileMicros()[i] / 1000.0;
    row.calls = p.profileCalls()[i];
    kernelMsTotal += row.totalMs;
    out.rows.push_back(std::move(row));
  }
  out.kernelMs = out.runs ? kernelMsTotal / double(out.runs) : 0;
  return out;
}

std::string StepProfile::str(size_t topNodes) const {
  std::string s;
  double totalMs = 0;
  for (const ProfileRow &r : rows)
    totalMs += r.totalMs;
  s += format("profile: %llu runs of the step program, %.3f ms each; its kernels %.3f ms "
              "(%.1f%%; the rest: state copy-back, scheduling)\n",
              static_cast<unsigned long long>(runs), runMs, kernelMs,
              runMs > 0 ? 100.0 * kernelMs / runMs : 0.0);
  // By op kind (fused chains apart, as one kind).
  struct Kind {
    double ms = 0, flops = 0, bytes = 0;
    uint64_t kernels = 0;
  };
  std::map<std::string, Kind> kinds;
  for (const ProfileRow &r : rows) {
    std::string key = r.op.rfind("fused", 0) == 0 ? "fused elementwise" : r.op;
    Kind &k = kinds[key];
    k.ms += r.totalMs;
    k.flops += r.flopsPerCall * double(r.calls);
    k.bytes += r.bytesPerCall * double(r.calls);
    ++k.kernels;
  }
  std::vector<std::pair<std::string, Kind>> byKind(kinds.begin(), kinds.end());
  std::stable_sort(byKind.begin(), byKind.end(),
                   [](const auto &a, const auto &b) { return a.second.ms > b.second.ms; });
  double perRun = runs ? 1.0 / double(runs) : 0;
  s += format("  %-24s %7s %10s %7s  %s\n", "by op kind", "kernels", "ms/step", "share", "rate");
  for (const auto &[name, k] : byKind)
    s += format("  %-24s %7llu %10.3f %6.1f%%  %s\n", name.c_str(),
                static_cast<unsigned long long>(k.kernels), k.ms * perRun,
                totalMs > 0 ? 100 * k.ms / totalMs : 0.0, rateText(k.flops, k.bytes, k.ms).c_str());
  // The slowest kernels.
  std::vector<const ProfileRow *> byTime;
  for (const ProfileRow &r : rows)
    byTime.push_back(&r);
  std::stable_sort(byTime.begin(), byTime.end(), [](const ProfileRow *a, const ProfileRow *b) {
    return a->totalMs > b->totalMs;
  });
  if (byTime.size() > topNodes)
    byTime.resize(topNodes);
  size_t width = 4;
  for (const ProfileRow *r : byTime)
    width = std::max(width, r->node.size());
  int w = static_cast<int>(std::min<size_t>(width, 48));
  s += format("  %-*s %-10s %-5s %-9s %10s %6s  %s\n", w, "slowest kernels", "op", "dtype", "role",
              "ms/step", "share", "rate");
  for (const ProfileRow *r : byTime) {
    std::string op = r->op.size() > 10 ? r->op.substr(0, 9) + "~" : r->op;
    s += format(
        "  %-*s %-10s %-5s %-9s %10.3f %5.1f%%  %s\n", w, r->node.c_str(), op.c_str(),
        r->dtype.empty() ? "-" : r->dtype.c_str(), std::string(roleName(r->role)).c_str(),
        r->totalMs * perRun, totalMs > 0 ? 100 * r->totalMs / totalMs : 0.0,
        rateText(r->flopsPerCall * double(r->calls), r->bytesPerCall * double(r->calls), r->totalMs)
            .c_str());
  }
  return s;
}

std::string traceJson(const ampc::Program &p) {
  llvm::ArrayRef<const ampc::Node *> schedule = p.schedule();
  auto escape = [](llvm::StringRef text) {
    std::string e;
    for (char c : text) {
      if (c == '"' || c == '\\')
        e += '\\';
      if (static_cast<unsigned char>(c) < 0x20)
        e += format("\\u%04x", c);
      else
        e += c;
    }
    return e;
  };
  std::string s = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  // One track (thread) per role, named, so forward, backward and the
  // optimizer read as separate lanes.
  const char *roles[] = {"forward", "loss", "backward", "optimizer", "loss-scale"};
  for (int r = 0; r < 5; ++r)
    s += format("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": %d, \"args\": "
                "{\"name\": \"%s\"}},\n",
                r + 1, roles[r]);
  bool first = true;
  for (const ampc::Program::KernelEvent &e : p.trace()) {
    const ampc::Node &n = *schedule[e.position];
    unsigned start = p.chainStart(e.position);
    std::string name = "%" + n.result()->name().str() + " " + n.opName().str();
    if (start != e.position)
      name = "fused " + std::to_string(e.position - start + 1) + " ops -> " + name;
    s += first ? "" : ",\n";
    first = false;
    s += format("{\"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, ",
                static_cast<int>(n.role()) + 1, e.startUs, e.durationUs);
    s += "\"name\": \"" + escape(name) + "\", \"cat\": \"" + escape(n.opName()) +
         "\", \"args\": {\"step\": " + std::to_string(e.step) + "}}";
  }
  s += "\n]}\n";
  return s;
}

} // namespace ampc::api
