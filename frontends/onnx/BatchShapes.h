//===- BatchShapes.h - Which dims of a graph are the batch ------*- C++ -*-===//
//
// ampc's graphs have static shapes: the batch is a number, bound when the
// model is imported. An exported ONNX model should run at any batch, so the
// exporter must know which dims are the batch (or a multiple of it, as when
// a reshape folds it into the tokens: [B*T, H]). The graph alone cannot say:
// a 32 may be the batch or a channel count. The model imported a second time
// at another batch can: a dim is the batch's exactly when the two imports
// differ there.
//
// BatchProbe matches the two imports before any pass runs (passes may
// decide differently at another batch: the cast placement weighs tensor
// sizes), then, after the passes rewrote the first, carries the second
// batch's shapes through it with the registry's type inference. The only
// ops whose attributes spell out a shape the import computed from the batch
// are reshapes; each takes the target the second import gave it.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_FRONTENDS_ONNX_BATCHSHAPES_H
#define AMPC_FRONTENDS_ONNX_BATCHSHAPES_H

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace ampc {

/// A graph's types at a second batch, value by value.
struct BatchShapes {
  int64_t batch = 0;      ///< the graph's own batch
  int64_t otherBatch = 0; ///< the batch of `other`
  /// Every input and node result; state is absent (it has no batch).
  llvm::DenseMap<const Value *, TensorType> other;

  /// v's type at otherBatch.
  const TensorType &at(const Value *v) const;
  /// Whether dim d of v follows the batch.
  bool varies(const Value *v, unsigned d) const { return at(v).dim(d) != v->type().dim(d); }
  /// The ONNX name of a dim that follows the batch: "batch" for the batch
  /// itself, "batch*K" for K times it; none for anything else.
  std::optional<std::string> symbol(const Value *v, unsigned d) const;
};

class BatchProbe {
public:
  /// Matches `g` against `other`, the same model imported at another batch,
  /// before any pass ran on either: the same inputs (but their shapes), the
  /// same state, and node for node the same ops, operand and result names
  /// and attributes (but reshape targets). False, saying why, when they
  /// differ otherwise (an attribute computed from the batch that no ONNX
  /// op could compute, a model that does not import at the other batch).
  bool match(const Graph &g, const Graph &other, std::string &why);

  /// After passes rewrote `g` (the graph given to match): every value's
  /// type at the other batch, inferred node by node from the inputs'; a
  /// reshape of match's takes the target the other import gave it. False,
  /// saying why, when a node does not type-check at the other batch (a
  /// reshape a pass made from the batch).
  bool propagate(const Graph &g, BatchShapes &out, std::string &why) const;

private:
  int64_t batch_ = 0, otherBatch_ = 0;
  llvm::StringMap<TensorType> inputs_; ///< by name, at the other batch
  struct ReshapeTarget {
    std::vector<int64_t> shape; ///< its target at g's batch
    std::vector<int64_t> other; ///< at the other batch
  };
  llvm::DenseMap<uint64_t, ReshapeTarget> reshapes_; ///< by node id in g (never reused)
};

} // namespace ampc

#endif
