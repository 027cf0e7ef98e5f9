//===- AttentionShape.h - An attention node's slices, lengths and layout -*- C++ -*-===//
//
// Host side, shared by the backends' attention kernels: what the query, key
// and value shapes and the node's `layout` attribute say about the slices,
// sequence lengths and widths (ir/ops/LinearAlgebra.cpp checks them).
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_KERNELS_ATTENTIONSHAPE_H
#define AMPC_KERNELS_ATTENTIONSHAPE_H

#include "ir/Graph.h"
#include "ir/OpAttrs.h"
#include "kernels/common/LinearAlgebraMath.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>

namespace ampc::kernels {

struct AttentionShape {
  int64_t slices = 1; ///< the leading dims' product (times the heads in bshd)
  int64_t queryLen = 0, keyLen = 0, headSize = 0, valueSize = 0;
  AttentionRows rows; ///< where a slice's rows live
};

/// The shape of attention node `n` (forward or backward: both carry the
/// forward's attributes) over query, key and value dims `q`, `k`, `v`.
inline AttentionShape attentionShape(const Node &n, llvm::ArrayRef<int64_t> q,
                                     llvm::ArrayRef<int64_t> k, llvm::ArrayRef<int64_t> v) {
  bool bshd = attrs::ScaledDotProductAttention(n).layout() == AttentionLayout::Bshd;
  size_t rank = q.size(), seq = rank - (bshd ? 3 : 2);
  AttentionShape s;
  for (int64_t d : q.take_front(seq))
    s.slices *= d;
  if (bshd) {
    s.rows.heads = q[rank - 2];
    s.slices *= s.rows.heads;
  }
  s.queryLen = q[seq];
  s.keyLen = k[seq];
  s.headSize = q[rank - 1];
  s.valueSize = v[rank - 1];
  return s;
}

} // namespace ampc::kernels

#endif
