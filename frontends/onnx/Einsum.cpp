//===- Einsum.cpp - Einsum as permutes, reshapes and a batched matmul ------===//
//
// The forms attention code writes ("bhid,bhjd->bhij", MaxViT's
// "B G H I D, B G H J D -> B G H I J") and every other contraction of one
// or two operands without repeated labels in one operand: labels only one
// operand has and the output lacks are summed first; the rest are batch
// labels (both operands and the output), contracted labels (both operands),
// and labels of one operand kept in the output. Each operand is permuted to
// [batch, kept, contracted] / [batch, contracted, kept], flattened to 3-D,
// multiplied by batch_matmul, and the result unflattened and permuted to
// the output's order.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <map>

namespace ampc::onnxfe {

namespace {

/// Labels of "..." dims lie below this, above every letter.
constexpr int64_t kEllipsisEnd = 320;

/// One operand's (or the output's) labels; "..." becomes one label per
/// dim it stands for, numbered below kEllipsisEnd (no letter collides).
bool parseLabels(OnnxLowering &l, llvm::StringRef term, int64_t rank, std::vector<int> &labels) {
  labels.clear();
  size_t dots = term.find("...");
  int64_t letters = 0;
  for (char c : term)
    letters += llvm::isAlpha(c);
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == ' ')
      continue;
    if (i == dots) {
      if (rank < 0)
        return l.error("'...' in the output needs '...' in an operand");
      // Right-aligned, as numpy broadcasts: the last ellipsis dim of every
      // operand is label 319.
      for (int64_t k = 0; k < rank - letters; ++k)
        labels.push_back(int(kEllipsisEnd - (rank - letters) + k));
      i += 2;
      continue;
    }
    if (!llvm::isAlpha(c))
      return l.error("the equation has '" + llvm::Twine(c) + "', expected letters and '...'");
    labels.push_back(c);
  }
  if (rank >= 0 && int64_t(labels.size()) != rank)
    return l.error("the equation gives an operand " + llvm::Twine(labels.size()) +
                   " labels, it has " + llvm::Twine(rank) + " dims");
  return true;
}

std::vector<int64_t> permutation(const std::vector<int> &from, const std::vector<int> &to) {
  std::vector<int64_t> perm;
  for (int label : to)
    perm.push_back(llvm::find(from, label) - from.begin());
  return perm;
}

Value *permuteTo(OnnxLowering &l, Value *v, const std::vector<int> &from,
                 const std::vector<int> &to) {
  std::vector<int64_t> perm = permutation(from, to);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == int64_t(i);
  return identity ? v : l.build1(OpKind::Permute, {v}, {{"dims", Attribute(perm)}});
}

/// Sums out the labels of `labels` not in `keep`.
Value *sumOut(OnnxLowering &l, Value *v, std::vector<int> &labels,
              llvm::function_ref<bool(int)> keep) {
  std::vector<int64_t> dims;
  std::vector<int> kept;
  for (size_t d = 0; d < labels.size(); ++d)
    if (keep(labels[d]))
      kept.push_back(labels[d]);
    else
      dims.push_back(int64_t(d));
  if (dims.empty())
    return v;
  labels = kept;
  return l.build1(OpKind::ReduceSum, {v},
                  {{"dims", Attribute(dims)}, {"keepdim", Attribute(false)}});
}

} // namespace

bool lowerEinsum(OnnxLowering &l, const onnx::NodeProto &n) {
  if (!l.checkAttrs(n, {"equation"}))
    return false;
  std::string equation = l.stringAttr(n, "equation", "");
  if (n.input_size() < 1 || n.input_size() > 2)
    return l.error("Einsum of " + llvm::Twine(n.input_size()) +
                   " operands is not supported (one or two)");
  llvm::StringRef eq(equation);
  auto [lhs, rhs] = eq.split("->");
  bool explicitOutput = eq.contains("->");
  llvm::SmallVector<llvm::StringRef, 2> terms;
  lhs.split(terms, ',');
  if (int(terms.size()) != n.input_size())
    return l.error("the equation '" + equation + "' has " + llvm::Twine(terms.size()) +
                   " operand terms for " + llvm::Twine(n.input_size()) + " inputs");
  std::vector<Value *> values;
  std::vector<std::vector<int>> labels(terms.size());
  std::map<int, int64_t> sizes;
  int64_t ellipsisRank = -1;
  for (size_t k = 0; k < terms.size(); ++k) {
    Value *v = l.valueOf(n, int(k));
    if (!v)
      return false;
    if (!parseLabels(l, terms[k], v->type().rank(), labels[k]))
      return false;
    for (size_t d = 0; d < labels[k].size(); ++d) {
      int label = labels[k][d];
      if (llvm::count(labels[k], label) > 1)
        return l.error("a label repeated within one operand (a diagonal) is not supported");
      if (label >= 256)
        ellipsisRank = std::max<int64_t>(ellipsisRank, kEllipsisEnd - label);
      auto [it, inserted] = sizes.emplace(label, v->type().dim(d));
      if (!inserted && it->second != v->type().dim(d))
        return l.error("a label stands for dims of " + llvm::Twine(it->second) + " and " +
                       llvm::Twine(v->type().dim(d)));
    }
    values.push_back(v);
  }
  std::vector<int> out;
  if (explicitOutput && !rhs.contains("...")) {
    if (!parseLabels(l, rhs, -1, out))
      return false;
  } else if (explicitOutput) {
    // The output's "..." stands for the operands' ellipsis dims.
    if (ellipsisRank < 0)
      return l.error("'...' in the output needs '...' in an operand");
    size_t dots = rhs.find("...");
    std::vector<int> head, tail;
    if (!parseLabels(l, rhs.substr(0, dots), -1, head) ||
        !parseLabels(l, rhs.substr(dots + 3), -1, tail))
      return false;
    out = head;
    for (int64_t k = 0; k < ellipsisRank; ++k)
      out.push_back(int(kEllipsisEnd - ellipsisRank + k));
    out.insert(out.end(), tail.begin(), tail.end());
  } else {
    // Implicit output: the ellipsis, then labels seen once, alphabetically.
    for (int64_t k = 0; k < ellipsisRank; ++k)
      out.push_back(int(kEllipsisEnd - ellipsisRank + k));
    std::vector<int> once;
    for (const auto &[label, size] : sizes) {
      int uses = 0;
      for (const std::vector<int> &ls : labels)
        uses += int(llvm::count(ls, label));
      if (label < 256 && uses == 1)
        once.push_back(label);
    }
    llvm::sort(once);
    out.insert(out.end(), once.begin(), once.end());
  }
  for (int label : out)
    if (!sizes.count(label))
      return l.error("the output has a label no operand has");

  auto inOutput = [&](int label) { return llvm::is_contained(out, label); };
  if (values.size() == 1) {
    Value *v = sumOut(l, values[0], labels[0], inOutput);
    v = v ? permuteTo(l, v, labels[0], out) : nullptr;
    if (!v)
      return false;
    l.setOutput(n, 0, l.reshape(v, v->type().dims(), n.output(0)));
    return true;
  }
  // Labels of one operand that the output lacks are summed before the product.
  std::vector<int> &a = labels[0], &b = labels[1];
  Value *va =
      sumOut(l, values[0], a, [&](int x) { return inOutput(x) || llvm::is_contained(b, x); });
  Value *vb =
      sumOut(l, values[1], b, [&](int x) { return inOutput(x) || llvm::is_contained(a, x); });
  if (!va || !vb)
    return false;
  std::vector<int> batch, contracted, aKept, bKept;
  for (int x : a) {
    bool inB = llvm::is_contained(b, x);
    (inB ? (inOutput(x) ? batch : contracted) : aKept).push_back(x);
  }
  for (int x : b)
    if (!llvm::is_contained(a, x))
      bKept.push_back(x);
  auto product = [&](const std::vector<int> &ls) {
    int64_t p = 1;
    for (int x : ls)
      p *= sizes[x];
    return p;
  };
  std::vector<int> aOrder = batch, bOrder = batch;
  aOrder.insert(aOrder.end(), aKept.begin(), aKept.end());
  aOrder.insert(aOrder.end(), contracted.begin(), contracted.end());
  bOrder.insert(bOrder.end(), contracted.begin(), contracted.end());
  bOrder.insert(bOrder.end(), bKept.begin(), bKept.end());
  int64_t bt = product(batch), m = product(aKept), k = product(contracted), nn = product(bKept);
  Value *a3 = l.reshape(permuteTo(l, va, a, aOrder), {bt, m, k});
  Value *b3 = l.reshape(permuteTo(l, vb, b, bOrder), {bt, k, nn});
  Value *c3 = l.build1(OpKind::BatchMatMul, {a3, b3});
  if (!c3)
    return false;
  std::vector<int> cOrder = batch;
  cOrder.insert(cOrder.end(), aKept.begin(), aKept.end());
  cOrder.insert(cOrder.end(), bKept.begin(), bKept.end());
  std::vector<int64_t> cDims;
  for (int x : cOrder)
    cDims.push_back(sizes[x]);
  Value *c = permuteTo(l, l.reshape(c3, cDims), cOrder, out);
  if (!c)
    return false;
  l.setOutput(n, 0, l.reshape(c, c->type().dims(), n.output(0)));
  return true;
}

} // namespace ampc::onnxfe
