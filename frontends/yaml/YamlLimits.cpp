//===- YamlLimits.cpp -------------------------------------------------------===//
#include "frontends/yaml/YamlLimits.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <optional>
#include <sstream>

namespace ampc::yamlfe {

namespace {

/// Measures the expanded tree from the parser's events. Each open
/// collection accumulates the expanded size and depth of what it holds; an
/// anchored node's totals are remembered when it closes, so an alias adds
/// them in O(1). The first violation is kept and the rest ignored (the
/// parser cannot be stopped from a handler without throwing).
class LimitChecker : public YAML::EventHandler {
public:
  LimitChecker(const LoadOptions &opts) : opts_(opts) {}

  /// The first violation, if any: where, and what.
  std::optional<std::pair<YAML::Mark, std::string>> problem;

  void OnDocumentStart(const YAML::Mark &) override {}
  void OnDocumentEnd() override {}

  void OnAnchor(const YAML::Mark &, const std::string &name) override { pendingName_ = name; }

  void OnNull(const YAML::Mark &mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark &mark, const std::string &, YAML::anchor_t anchor,
                const std::string &) override {
    leaf(mark, anchor);
  }

  void OnAlias(const YAML::Mark &mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end())
      return; // yaml-cpp itself reports an unknown anchor
    const AnchorInfo &info = it->second;
    if (info.open) {
      fail(mark, "alias '*" + info.name + "' refers to the node that contains it, a cycle");
      return;
    }
    add(mark, info.size, info.depth);
  }

  void OnSequenceStart(const YAML::Mark &mark, const std::string &, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark &mark, const std::string &, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

private:
  struct AnchorInfo {
    std::string name;
    uint64_t size = 0;  ///< expanded node count, itself included
    uint32_t depth = 0; ///< expanded levels below it
    bool open = false;
  };
  struct Frame {
    YAML::Mark mark;
    YAML::anchor_t anchor;
    uint64_t size = 1;
    uint32_t depth = 0;
  };

  void fail(const YAML::Mark &mark, std::string message) {
    if (!problem)
      problem.emplace(mark, std::move(message));
  }

  void nameAnchor(YAML::anchor_t anchor) {
    if (anchor == YAML::NullAnchor)
      return;
    anchors_[anchor].name = pendingName_;
    pendingName_.clear();
  }

  /// A node of `size` expanded nodes and `depth` levels below it appears
  /// inside the innermost open collection (or as the document's root).
  void add(const YAML::Mark &mark, uint64_t size, uint32_t depth) {
    uint64_t level = stack_.size(); // the level the node sits at (root: 0)
    if (level + depth > uint64_t(opts_.maxNesting))
      fail(mark, "the model file nests deeper than " + std::to_string(opts_.maxNesting) +
                     " levels (aliases expanded); raise the limit with --max-nesting");
    if (stack_.empty())
      return; // the root: its size was checked as its collection grew
    Frame &parent = stack_.back();
    parent.size = std::min(parent.size + size, kSaturated);
    parent.depth = std::max(parent.depth, depth + 1);
    if (parent.size > uint64_t(opts_.maxYamlNodes))
      fail(mark, "aliases expand the model file to more than " +
                     std::to_string(opts_.maxYamlNodes) +
                     " YAML nodes; raise the limit with --max-yaml-nodes");
  }

  void leaf(const YAML::Mark &mark, YAML::anchor_t anchor) {
    nameAnchor(anchor);
    if (anchor != YAML::NullAnchor) {
      AnchorInfo &info = anchors_[anchor];
      info.size = 1;
      info.depth = 0;
    }
    add(mark, 1, 0);
  }

  void open(const YAML::Mark &mark, YAML::anchor_t anchor) {
    nameAnchor(anchor);
    if (anchor != YAML::NullAnchor)
      anchors_[anchor].open = true;
    stack_.push_back(Frame{mark, anchor});
  }

  void close() {
    assert(!stack_.empty() && "the parser closes only what it opened");
    Frame f = stack_.pop_back_val();
    if (f.anchor != YAML::NullAnchor) {
      AnchorInfo &info = anchors_[f.anchor];
      info.open = false;
      info.size = f.size;
      info.depth = f.depth;
    }
    add(f.mark, f.size, f.depth);
  }

  static constexpr uint64_t kSaturated = uint64_t(1) << 62;

  const LoadOptions &opts_;
  llvm::SmallVector<Frame, 16> stack_;
  llvm::DenseMap<YAML::anchor_t, AnchorInfo> anchors_;
  std::string pendingName_;
};

} // namespace

bool checkYamlLimits(llvm::StringRef text, Reader &r, const LoadOptions &opts) {
  std::istringstream in(text.str());
  YAML::Parser parser(in);
  LimitChecker checker(opts);
  parser.HandleNextDocument(checker);
  if (!checker.problem)
    return true;
  return r.error(r.loc(checker.problem->first), checker.problem->second);
}

} // namespace ampc::yamlfe
