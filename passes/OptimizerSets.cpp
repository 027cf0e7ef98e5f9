//===- OptimizerSets.cpp ----------------------------------------------------===//
#include "passes/OptimizerSets.h"

#include "ir/MetaReader.h"

namespace ampc {

bool hasOptimizerSets(const Graph &g) { return metaInt(g, "optimizers", 0) > 0; }

int64_t optimizerIndexOf(const Graph &g, const Value *param) {
  return metaInt(g, "optimizer.of." + param->name().str(), -1);
}

std::optional<std::vector<OptimizerSet>> readOptimizerSets(const Graph &g, DiagnosticEngine &diag) {
  std::vector<OptimizerSet> sets;
  MetaReader meta(g.meta(), diag, "optimizer: ");
  int64_t count = meta.integer("optimizers", 0);
  int64_t period = meta.integer("optimizers.period", 1);
  if (meta.failed())
    return std::nullopt;
  if (count > 0 && (period < 1 || period > 64)) {
    meta.error("meta 'optimizers.period' must be in [1, 64], got " + llvm::Twine(period));
    return std::nullopt;
  }
  for (int64_t i = 0; i < count; ++i) {
    std::string prefix = "optimizers." + std::to_string(i);
    OptimizerSet set;
    set.name = meta.string(prefix + ".name", "");
    set.params = meta.string(prefix + ".params", "");
    set.lossTerm = meta.integer(prefix + ".loss", 0);
    set.period = period;
    std::vector<double> turns = meta.numbers(prefix + ".turns", {0.0});
    if (meta.failed())
      return std::nullopt;
    set.turns.clear();
    for (double t : turns)
      set.turns.push_back(int64_t(t));
    // Its settings stand in for optimizer.*; the other optimizers' and the
    // combined optimizer.* keys are left out.
    for (const auto &[key, value] : g.meta()) {
      llvm::StringRef k(key);
      if (k == "optimizers" || k.startswith("optimizers.") || k == "optimizer" ||
          (k.startswith("optimizer.") && !k.startswith("optimizer.of.")))
        continue;
      set.meta[key] = value;
    }
    for (const auto &[key, value] : g.meta()) {
      llvm::StringRef k(key);
      if (k == prefix)
        set.meta["optimizer"] = value;
      else if (k.consume_front(prefix + ".") && k != "name" && k != "params" && k != "loss" &&
               k != "turns")
        set.meta[("optimizer." + k).str()] = value;
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

} // namespace ampc
