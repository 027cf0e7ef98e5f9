//===- Patterns.cpp - erf-GELU and decomposed layernorm subgraphs ----------===//
//
// Exporters spell GELU and LayerNorm as chains of elementwise nodes (opsets
// before 17 have no LayerNormalization; torch exports nn.GELU through Erf).
// Lowered node by node they would run as half-precision arithmetic under O1,
// where autocast keeps both in fp32. Recognising them back into the
// registry's `gelu` and `layernorm` lets their precision category apply,
// and is also faster. Each match requires that the chain's intermediate
// values feed nothing else, so no other node loses an input.
//
//   gelu:      Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5), and the variants
//              with Mul(x, 1/sqrt 2) or the 0.5 applied to x first
//   layernorm: d = Sub(x, ReduceMean(x)), Div(d, Sqrt(Add(ReduceMean(Pow(d, 2)), eps)))
//              optionally followed by Mul(., gamma) and Add(., beta)
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Builders.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace ampc::onnxfe {

namespace {

struct Matcher {
  OnnxLowering &l;

  /// The single consumer of `name`, if it is the only one and `name` is no
  /// graph output.
  const onnx::NodeProto *soleConsumer(llvm::StringRef name) const {
    llvm::ArrayRef<const onnx::NodeProto *> users = l.consumers(name);
    if (users.size() != 1 || l.isGraphOutput(name))
      return nullptr;
    return users.front();
  }
  const onnx::NodeProto *producerOf(const onnx::NodeProto &n, int i, llvm::StringRef type) const {
    if (i >= n.input_size())
      return nullptr;
    const onnx::NodeProto *p = l.producer(n.input(i));
    return p && p->op_type() == type ? p : nullptr;
  }
  bool near(std::optional<double> v, double want, double tol = 1e-4) const {
    return v && std::fabs(*v - want) <= tol * std::max(1.0, std::fabs(want));
  }
  /// For a binary node, the index of the input that is the scalar `want`
  /// (-1 if neither).
  int scalarSide(const onnx::NodeProto &n, double want, double tol = 1e-4) const {
    if (n.input_size() != 2 || n.output_size() < 1)
      return -1;
    for (int i = 0; i < 2; ++i)
      if (near(l.staticScalar(n.input(i)), want, tol))
        return i;
    return -1;
  }
  /// The other input of a binary node.
  static const std::string &other(const onnx::NodeProto &n, int i) { return n.input(1 - i); }
};

/// gelu, anchored on the Erf node. Returns the final node and x.
bool matchGelu(const Matcher &m, const onnx::NodeProto &erf,
               llvm::SmallVectorImpl<const onnx::NodeProto *> &chain, std::string &x,
               const onnx::NodeProto *&last) {
  const double kSqrt2 = std::sqrt(2.0);
  if (erf.input_size() != 1 || erf.output_size() != 1)
    return false;
  const onnx::NodeProto *scaleNode = m.l.producer(erf.input(0));
  if (!scaleNode || !m.soleConsumer(erf.input(0)))
    return false;
  int side;
  if (scaleNode->op_type() == "Div" && scaleNode->input_size() == 2 &&
      m.near(m.l.staticScalar(scaleNode->input(1)), kSqrt2)) {
    x = scaleNode->input(0);
  } else if (scaleNode->op_type() == "Mul" && (side = m.scalarSide(*scaleNode, 1 / kSqrt2)) >= 0) {
    x = Matcher::other(*scaleNode, side);
  } else {
    return false;
  }
  const onnx::NodeProto *add = m.soleConsumer(erf.output(0));
  if (!add || add->op_type() != "Add" || (side = m.scalarSide(*add, 1.0)) < 0 ||
      Matcher::other(*add, side) != erf.output(0))
    return false;
  const onnx::NodeProto *mul = m.soleConsumer(add->output(0));
  if (!mul || mul->op_type() != "Mul" || mul->input_size() != 2 || mul->output_size() < 1)
    return false;
  int addSide = mul->input(0) == add->output(0) ? 0 : 1;
  const std::string &factor = Matcher::other(*mul, addSide);
  chain.assign({scaleNode, &erf, add, mul});
  if (factor == x) {
    // 0.5 applied last.
    const onnx::NodeProto *half = m.soleConsumer(mul->output(0));
    if (!half || half->op_type() != "Mul" || (side = m.scalarSide(*half, 0.5)) < 0)
      return false;
    chain.push_back(half);
    last = half;
    return true;
  }
  // 0.5 applied to x first: Mul(Mul(x, 0.5), Add(...)).
  const onnx::NodeProto *half = m.l.producer(factor);
  if (!half || half->op_type() != "Mul" || (side = m.scalarSide(*half, 0.5)) < 0 ||
      Matcher::other(*half, side) != x || !m.soleConsumer(factor))
    return false;
  chain.insert(chain.begin(), half);
  last = mul;
  return true;
}

struct LayerNormMatch {
  std::string x, gamma, beta;
  std::vector<int64_t> axes;
  double eps = 0;
};

std::optional<std::vector<int64_t>> reduceAxes(OnnxLowering &l, const onnx::NodeProto &r) {
  if (r.op_type() != "ReduceMean" || l.intAttr(r, "keepdims", 1) != 1)
    return std::nullopt;
  return l.intsAttr(r, "axes");
}

/// The initializer `name` is, directly or through Identity nodes (torch's
/// exporter ties equal initializers that way).
const onnx::TensorProto *initializerBehindIdentity(OnnxLowering &l, std::string name) {
  for (int hops = 0; hops < 8; ++hops) {
    if (const onnx::TensorProto *t = l.initializer(name))
      return t;
    const onnx::NodeProto *p = l.producer(name);
    if (!p || p->op_type() != "Identity" || p->input_size() != 1)
      return nullptr;
    name = p->input(0);
  }
  return nullptr;
}

/// layernorm, anchored on the Div node.
bool matchLayerNorm(const Matcher &m, const onnx::NodeProto &div,
                    llvm::SmallVectorImpl<const onnx::NodeProto *> &chain, LayerNormMatch &out,
                    const onnx::NodeProto *&last) {
  OnnxLowering &l = m.l;
  // Exporters never leave these ops short of inputs; a hostile file may.
  auto arity = [](const onnx::NodeProto *p, int ins) {
    return p && p->input_size() >= ins && p->output_size() >= 1;
  };
  if (!arity(&div, 2))
    return false;
  const onnx::NodeProto *sub = m.producerOf(div, 0, "Sub");
  const onnx::NodeProto *sqrt = m.producerOf(div, 1, "Sqrt");
  if (!arity(sub, 2) || !arity(sqrt, 1))
    return false;
  const onnx::NodeProto *mean = m.producerOf(*sub, 1, "ReduceMean");
  if (!arity(mean, 1) || mean->input(0) != sub->input(0) || !m.soleConsumer(mean->output(0)))
    return false;
  std::optional<std::vector<int64_t>> axes = reduceAxes(l, *mean);
  if (!axes || axes->empty())
    return false;
  const onnx::NodeProto *add = m.producerOf(*sqrt, 0, "Add");
  if (!arity(add, 2) || !m.soleConsumer(sqrt->output(0)) || !m.soleConsumer(add->output(0)))
    return false;
  int epsSide = -1;
  for (int i = 0; i < 2 && epsSide < 0; ++i)
    if (std::optional<double> e = l.staticScalar(add->input(i)); e && *e >= 0 && *e < 1)
      epsSide = i;
  if (epsSide < 0)
    return false;
  const onnx::NodeProto *var = m.l.producer(Matcher::other(*add, epsSide));
  if (!arity(var, 1) || reduceAxes(l, *var) != axes || !m.soleConsumer(var->output(0)))
    return false;
  const onnx::NodeProto *sq = l.producer(var->input(0));
  if (!arity(sq, 2) || !m.soleConsumer(sq->output(0)))
    return false;
  bool squares =
      (sq->op_type() == "Pow" && sq->input(0) == sub->output(0) &&
       m.near(l.staticScalar(sq->input(1)), 2.0, 0)) ||
      (sq->op_type() == "Mul" && sq->input(0) == sub->output(0) && sq->input(1) == sub->output(0));
  if (!squares)
    return false;
  // d feeds the square and the division only.
  llvm::ArrayRef<const onnx::NodeProto *> dUsers = l.consumers(sub->output(0));
  if (l.isGraphOutput(sub->output(0)) || dUsers.size() != 2)
    return false;
  out.x = sub->input(0);
  out.axes = *axes;
  out.eps = *l.staticScalar(add->input(epsSide));
  chain.assign({mean, sub, sq, var, add, sqrt, &div});
  last = &div;
  // The affine part, when its operands are initializers.
  if (const onnx::NodeProto *mul = m.soleConsumer(div.output(0));
      mul && mul->op_type() == "Mul" && mul->input_size() == 2 && mul->output_size() >= 1) {
    int side = mul->input(0) == div.output(0) ? 0 : 1;
    const std::string &gamma = Matcher::other(*mul, side);
    if (const onnx::TensorProto *t = initializerBehindIdentity(l, gamma);
        t && t->dims_size() == int(axes->size())) {
      out.gamma = gamma;
      chain.push_back(mul);
      last = mul;
      if (const onnx::NodeProto *addB = m.soleConsumer(mul->output(0));
          addB && addB->op_type() == "Add" && addB->input_size() == 2 && addB->output_size() >= 1) {
        int bside = addB->input(0) == mul->output(0) ? 0 : 1;
        const std::string &beta = Matcher::other(*addB, bside);
        if (const onnx::TensorProto *b = initializerBehindIdentity(l, beta);
            b && b->dims_size() == t->dims_size()) {
          out.beta = beta;
          chain.push_back(addB);
          last = addB;
        }
      }
    }
  }
  return true;
}

bool lowerLayerNormMatch(OnnxLowering &l, const LayerNormMatch &m, const std::string &output) {
  Value *x = l.valueOfName(m.x);
  if (!x)
    return false;
  unsigned rank = x->type().rank();
  // The reduced axes must be the last ones.
  std::vector<int64_t> axes;
  for (int64_t a : m.axes)
    axes.push_back(a < 0 ? a + rank : a);
  llvm::sort(axes);
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k] != int64_t(rank - axes.size() + k))
      return l.error("a normalisation over axes other than the last ones is not supported");
  llvm::ArrayRef<int64_t> normShape = x->type().dims().take_back(axes.size());
  TensorType paramType(x->dtype(), normShape);
  Value *gamma =
      m.gamma.empty() ? l.constantState("layernorm.ones", paramType, 1.0) : l.valueOfName(m.gamma);
  Value *beta =
      m.beta.empty() ? l.constantState("layernorm.zeros", paramType, 0.0) : l.valueOfName(m.beta);
  if (!gamma || !beta)
    return false;
  if (gamma->type() != paramType || beta->type() != paramType)
    return l.error("the affine parameters " + gamma->type().str() + " and " + beta->type().str() +
                   " of a decomposed layernorm do not match its normalised shape");
  l.setOutputName(output, l.build1(OpKind::LayerNorm, {x, gamma, beta},
                                   {{"normalized_dims", Attribute(int64_t(axes.size()))},
                                    {"eps", Attribute(m.eps)}},
                                   output));
  return true;
}

} // namespace

void recogniseOnnxPatterns(OnnxLowering &l, const onnx::GraphProto &g,
                           llvm::DenseMap<const onnx::NodeProto *, PatternLowering> &replaced) {
  Matcher m{l};
  unsigned gelus = 0, layernorms = 0;
  for (const onnx::NodeProto &n : g.node()) {
    llvm::SmallVector<const onnx::NodeProto *, 8> chain;
    const onnx::NodeProto *last = nullptr;
    if (n.op_type() == "Erf") {
      std::string x;
      if (!matchGelu(m, n, chain, x, last) ||
          llvm::any_of(chain, [&](const onnx::NodeProto *c) { return l.fused().count(c); }))
        continue;
      std::string output = last->output(0);
      replaced[last] = [x, output](OnnxLowering &l) {
        Value *v = l.valueOfName(x);
        if (!v)
          return false;
        l.setOutputName(output, l.build1(OpKind::Gelu, {v}, {}, output));
        return true;
      };
      ++gelus;
    } else if (n.op_type() == "Div") {
      LayerNormMatch match;
      if (!matchLayerNorm(m, n, chain, match, last) ||
          llvm::any_of(chain, [&](const onnx::NodeProto *c) { return l.fused().count(c); }))
        continue;
      std::string output = last->output(0);
      replaced[last] = [match, output](OnnxLowering &l) {
        return lowerLayerNormMatch(l, match, output);
      };
      ++layernorms;
    } else {
      continue;
    }
    for (const onnx::NodeProto *c : chain)
      if (c != last)
        l.fused().insert(c);
  }
  if (gelus)
    l.note(std::to_string(gelus) + " erf-GELU subgraph" + (gelus > 1 ? "s" : "") + " → gelu");
  if (layernorms)
    l.note(std::to_string(layernorms) + " decomposed layernorm" + (layernorms > 1 ? "s" : "") +
           " → layernorm");
}

} // namespace ampc::onnxfe
