//===- OnnxExporter.cpp - Registry ops to ONNX nodes -----------------------===//
#include "frontends/onnx/OnnxExporter.h"
#include "frontends/onnx/OnnxFile.h"
#include "ir/HalfConversion.h"
#include "ir/OpAttrs.h"

#include "onnx/checker.h"
#include "onnx/onnx_pb.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <cstring>

namespace ampc {

namespace {

constexpr int64_t kExportOpset = 17;

int32_t onnxTypeOf(DType t) {
  switch (t) {
  case DType::F32:
    return onnx::TensorProto::FLOAT;
  case DType::F16:
    return onnx::TensorProto::FLOAT16;
  case DType::BF16:
    return onnx::TensorProto::BFLOAT16;
  case DType::F64:
    return onnx::TensorProto::DOUBLE;
  case DType::I64:
    return onnx::TensorProto::INT64;
  case DType::I32:
    return onnx::TensorProto::INT32;
  case DType::Bool:
    return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

class Exporter {
public:
  Exporter(const Graph &g, onnx::GraphProto &out, DiagnosticEngine &diag, const BatchShapes *batch)
      : g_(g), out_(out), diag_(diag), batch_(batch) {}

  const Graph &graph() const { return g_; }
  /// The graph's shapes at another batch; null when the batch is fixed.
  const BatchShapes *batch() const { return batch_; }
  bool error(const Node &n, const llvm::Twine &msg) {
    diag_.error(n.loc(), "cannot export " + n.opName() + " to ONNX: " + msg);
    return false;
  }
  /// Gives up the symbolic batch: the model is written again at g's.
  bool fixBatch(const Node &n, const llvm::Twine &why) {
    fixedBecause_ = (n.opName() + " making '" + n.result()->name() + "': " + why).str();
    return false;
  }
  const std::string &fixedBecause() const { return fixedBecause_; }

  std::string fresh(llvm::StringRef hint) {
    return ("ampc_" + hint + "_" + llvm::Twine(counter_++)).str();
  }
  static std::string name(const Value *v) { return v->name().str(); }

  onnx::NodeProto &node(llvm::StringRef type, llvm::ArrayRef<std::string> inputs,
                        llvm::ArrayRef<std::string> outputs) {
    onnx::NodeProto &n = *out_.add_node();
    n.set_op_type(type.str());
    n.set_name(outputs.empty() ? fresh(type) : outputs.front() + "/" + type.str());
    for (const std::string &i : inputs)
      n.add_input(i);
    for (const std::string &o : outputs)
      n.add_output(o);
    return n;
  }
  static void attrInt(onnx::NodeProto &n, llvm::StringRef k, int64_t v) {
    onnx::AttributeProto &a = *n.add_attribute();
    a.set_name(k.str());
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(v);
  }
  static void attrFloat(onnx::NodeProto &n, llvm::StringRef k, double v) {
    onnx::AttributeProto &a = *n.add_attribute();
    a.set_name(k.str());
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(float(v));
  }
  static void attrString(onnx::NodeProto &n, llvm::StringRef k, llvm::StringRef v) {
    onnx::AttributeProto &a = *n.add_attribute();
    a.set_name(k.str());
    a.set_type(onnx::AttributeProto::STRING);
    a.set_s(v.str());
  }
  static void attrInts(onnx::NodeProto &n, llvm::StringRef k, llvm::ArrayRef<int64_t> v) {
    onnx::AttributeProto &a = *n.add_attribute();
    a.set_name(k.str());
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a.add_ints(x);
  }

  /// An initializer holding `values` as int64 (shapes, axes).
  std::string constInts(llvm::ArrayRef<int64_t> values, bool scalar = false) {
    onnx::TensorProto &t = *out_.add_initializer();
    t.set_name(fresh("const"));
    t.set_data_type(onnx::TensorProto::INT64);
    if (!scalar)
      t.add_dims(int64_t(values.size()));
    for (int64_t v : values)
      t.add_int64_data(v);
    return t.name();
  }
  /// An initializer holding `values` as float32 (Resize's scales).
  std::string constFloats(llvm::ArrayRef<double> values) {
    onnx::TensorProto &t = *out_.add_initializer();
    t.set_name(fresh("const"));
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_dims(int64_t(values.size()));
    for (double v : values)
      t.add_float_data(float(v));
    return t.name();
  }
  /// A scalar initializer of dtype `t` (the other operand's type).
  std::string constScalar(double v, DType t) {
    onnx::TensorProto &p = *out_.add_initializer();
    p.set_name(fresh("scalar"));
    p.set_data_type(onnxTypeOf(t));
    std::string raw(dtypeSize(t), '\0');
    switch (t) {
    case DType::F32: {
      float f = float(v);
      std::memcpy(raw.data(), &f, 4);
      break;
    }
    case DType::F64:
      std::memcpy(raw.data(), &v, 8);
      break;
    case DType::F16:
    case DType::BF16: {
      uint16_t h = t == DType::F16 ? floatToHalfBits(float(v)) : floatToBf16Bits(float(v));
      std::memcpy(raw.data(), &h, 2);
      break;
    }
    case DType::I64: {
      int64_t i = int64_t(v);
      std::memcpy(raw.data(), &i, 8);
      break;
    }
    case DType::I32: {
      int32_t i = int32_t(v);
      std::memcpy(raw.data(), &i, 4);
      break;
    }
    case DType::Bool:
      raw[0] = v != 0;
      break;
    }
    p.set_raw_data(raw);
    return p.name();
  }

  /// Output name of a result (its IR name).
  static std::string out(const Node &n, unsigned i = 0) { return name(n.result(i)); }
  static std::string in(const Node &n, unsigned i) { return name(n.operand(i)); }

private:
  const Graph &g_;
  onnx::GraphProto &out_;
  DiagnosticEngine &diag_;
  const BatchShapes *batch_;
  std::string fixedBecause_;
  unsigned counter_ = 0;
};

using EmitFn = bool (*)(Exporter &e, const Node &n);

bool emitSimple(Exporter &e, const Node &n, llvm::StringRef type) {
  std::vector<std::string> ins;
  for (unsigned i = 0; i < n.numOperands(); ++i)
    ins.push_back(Exporter::in(n, i));
  e.node(type, ins, {Exporter::out(n)});
  return true;
}

/// A result whose shape is all that changes: a Reshape. Its target is the
/// result's static shape, but for the dims that follow a symbolic batch: 0
/// where the result has the input's dim at the same place (ONNX copies it),
/// else -1 (ONNX infers it from the element count; one dim at most).
bool emitReshape(Exporter &e, const Node &n) {
  const Value *x = n.operand(0), *y = n.result();
  std::vector<int64_t> dims(y->type().dims().begin(), y->type().dims().end());
  // A 0 in the target copies the input's dim unless allowzero says it is 0.
  bool empty = llvm::is_contained(dims, 0);
  if (const BatchShapes *b = e.batch()) {
    bool inferred = false;
    for (unsigned d = 0; d < dims.size(); ++d) {
      if (!b->varies(y, d))
        continue;
      if (empty)
        return e.fixBatch(n, "an empty tensor's reshape cannot infer the batch");
      if (d < x->type().rank() && x->type().dim(d) == dims[d] &&
          b->at(x).dim(d) == b->at(y).dim(d)) {
        dims[d] = 0;
      } else if (!inferred) {
        dims[d] = -1;
        inferred = true;
      } else {
        return e.fixBatch(n, "two of its dims follow the batch and are not its input's (" +
                                 x->type().str() + " to " + y->type().str() + ")");
      }
    }
  }
  onnx::NodeProto &r =
      e.node("Reshape", {Exporter::in(n, 0), e.constInts(dims)}, {Exporter::out(n)});
  if (empty)
    Exporter::attrInt(r, "allowzero", 1);
  return true;
}

/// flatten(1, -1) is ONNX's Flatten (axis 1: [d0, the rest]), which holds
/// at any batch; any other span is a Reshape.
bool emitFlatten(Exporter &e, const Node &n) {
  unsigned rank = n.operand(0)->type().rank();
  attrs::Flatten a(n);
  int64_t start = a.start_dim() < 0 ? a.start_dim() + rank : a.start_dim();
  int64_t end = a.end_dim() < 0 ? a.end_dim() + rank : a.end_dim();
  if (rank < 2 || start != 1 || end != int64_t(rank) - 1)
    return emitReshape(e, n);
  Exporter::attrInt(e.node("Flatten", {Exporter::in(n, 0)}, {Exporter::out(n)}), "axis", 1);
  return true;
}

bool emitLinear(Exporter &e, const Node &n) {
  const TensorType &x = n.operand(0)->type();
  if (x.rank() == 2) {
    onnx::NodeProto &g = e.node("Gemm", {}, {Exporter::out(n)});
    for (unsigned i = 0; i < n.numOperands(); ++i)
      g.add_input(Exporter::in(n, i));
    Exporter::attrInt(g, "transB", 1);
    return true;
  }
  // [..., in] x W^T (+ b): MatMul with the weight transposed once.
  std::string wt = e.fresh("weight_t");
  e.node("Transpose", {Exporter::in(n, 1)}, {wt});
  if (n.numOperands() == 2) {
    e.node("MatMul", {Exporter::in(n, 0), wt}, {Exporter::out(n)});
    return true;
  }
  std::string y = e.fresh("matmul");
  e.node("MatMul", {Exporter::in(n, 0), wt}, {y});
  e.node("Add", {y, Exporter::in(n, 2)}, {Exporter::out(n)});
  return true;
}

bool emitMatMul(Exporter &e, const Node &n) {
  std::string a = Exporter::in(n, 0), b = Exporter::in(n, 1);
  auto transposeLast2 = [&](const std::string &v, unsigned rank) {
    std::vector<int64_t> perm;
    for (unsigned d = 0; d < rank; ++d)
      perm.push_back(d);
    std::swap(perm[rank - 1], perm[rank - 2]);
    std::string t = e.fresh("transposed");
    Exporter::attrInts(e.node("Transpose", {v}, {t}), "perm", perm);
    return t;
  };
  if (attrs::MatMul(n).transpose_a())
    a = transposeLast2(a, n.operand(0)->type().rank());
  if (attrs::MatMul(n).transpose_b())
    b = transposeLast2(b, n.operand(1)->type().rank());
  e.node("MatMul", {a, b}, {Exporter::out(n)});
  return true;
}

bool emitConv(Exporter &e, const Node &n) {
  onnx::NodeProto &c = e.node("Conv", {}, {Exporter::out(n)});
  for (unsigned i = 0; i < n.numOperands(); ++i)
    c.add_input(Exporter::in(n, i));
  attrs::Conv2d a(n);
  const std::vector<int64_t> &p = a.padding();
  Exporter::attrInts(c, "pads", {p[0], p[1], p[0], p[1]});
  Exporter::attrInts(c, "strides", a.stride());
  Exporter::attrInts(c, "dilations", a.dilation());
  Exporter::attrInt(c, "group", a.groups());
  const TensorType &w = n.operand(1)->type();
  Exporter::attrInts(c, "kernel_shape", {w.dim(2), w.dim(3)});
  return true;
}

bool emitBatchNorm(Exporter &e, const Node &n) {
  attrs::BatchNorm2d a(n);
  if (a.training())
    return e.error(n, "batchnorm is in training mode (export the inference graph)");
  onnx::NodeProto &b = e.node("BatchNormalization", {}, {Exporter::out(n)});
  for (unsigned i = 0; i < 5; ++i)
    b.add_input(Exporter::in(n, i));
  Exporter::attrFloat(b, "epsilon", a.eps());
  Exporter::attrFloat(b, "momentum", 1.0 - a.momentum());
  return true;
}

bool emitLayerNorm(Exporter &e, const Node &n) {
  onnx::NodeProto &l =
      e.node("LayerNormalization", {Exporter::in(n, 0), Exporter::in(n, 1), Exporter::in(n, 2)},
             {Exporter::out(n)});
  attrs::LayerNorm a(n);
  Exporter::attrInt(l, "axis", -a.normalized_dims());
  Exporter::attrFloat(l, "epsilon", a.eps());
  return true;
}

bool emitGelu(Exporter &e, const Node &n) {
  DType t = n.operand(0)->dtype();
  std::string x = Exporter::in(n, 0);
  if (attrs::Gelu(n).approximate() == GeluApproximate::Tanh) {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    std::string x3 = e.fresh("gelu"), inner = e.fresh("gelu"), scaled = e.fresh("gelu"),
                th = e.fresh("gelu"), one = e.fresh("gelu"), half = e.fresh("gelu");
    e.node("Pow", {x, e.constScalar(3.0, t)}, {x3});
    std::string x3s = e.fresh("gelu");
    e.node("Mul", {x3, e.constScalar(0.044715, t)}, {x3s});
    e.node("Add", {x, x3s}, {inner});
    e.node("Mul", {inner, e.constScalar(std::sqrt(2.0 / M_PI), t)}, {scaled});
    e.node("Tanh", {scaled}, {th});
    e.node("Add", {th, e.constScalar(1.0, t)}, {one});
    e.node("Mul", {x, one}, {half});
    e.node("Mul", {half, e.constScalar(0.5, t)}, {Exporter::out(n)});
    return true;
  }
  // The erf form torch exports, which the importer recognises back.
  std::string d = e.fresh("gelu"), er = e.fresh("gelu"), a = e.fresh("gelu"), m = e.fresh("gelu");
  e.node("Div", {x, e.constScalar(std::sqrt(2.0), t)}, {d});
  e.node("Erf", {d}, {er});
  e.node("Add", {er, e.constScalar(1.0, t)}, {a});
  e.node("Mul", {x, a}, {m});
  e.node("Mul", {m, e.constScalar(0.5, t)}, {Exporter::out(n)});
  return true;
}

bool emitSilu(Exporter &e, const Node &n) {
  std::string s = e.fresh("silu");
  e.node("Sigmoid", {Exporter::in(n, 0)}, {s});
  e.node("Mul", {Exporter::in(n, 0), s}, {Exporter::out(n)});
  return true;
}

bool emitSoftmaxLike(Exporter &e, const Node &n, llvm::StringRef type) {
  Exporter::attrInt(e.node(type, {Exporter::in(n, 0)}, {Exporter::out(n)}), "axis",
                    attrs::Softmax(n).dim()); // log_softmax declares the same
  return true;
}

bool emitScale(Exporter &e, const Node &n) {
  e.node("Mul",
         {Exporter::in(n, 0), e.constScalar(attrs::Scale(n).factor(), n.operand(0)->dtype())},
         {Exporter::out(n)});
  return true;
}

bool emitPool(Exporter &e, const Node &n, bool isMax) {
  onnx::NodeProto &p =
      e.node(isMax ? "MaxPool" : "AveragePool", {Exporter::in(n, 0)}, {Exporter::out(n)});
  // maxpool2d and avgpool2d declare the same window attributes.
  attrs::AvgPool2d a(n);
  std::vector<int64_t> kernel = a.kernel(), stride = a.stride();
  if (stride.empty())
    stride = kernel;
  const std::vector<int64_t> &pad = a.padding();
  Exporter::attrInts(p, "kernel_shape", kernel);
  Exporter::attrInts(p, "strides", stride);
  if (pad.size() == 4)
    Exporter::attrInts(p, "pads", pad);
  else
    Exporter::attrInts(p, "pads", {pad[0], pad[1], pad[0], pad[1]});
  Exporter::attrInt(p, "ceil_mode", a.ceil_mode() ? 1 : 0);
  if (isMax)
    Exporter::attrInts(p, "dilations", attrs::MaxPool2d(n).dilation());
  else
    Exporter::attrInt(p, "count_include_pad", a.count_include_pad() ? 1 : 0);
  return true;
}

bool emitPad(Exporter &e, const Node &n) {
  attrs::Pad a(n);
  std::vector<std::string> inputs = {Exporter::in(n, 0), e.constInts(a.pads())};
  if (a.mode() == PadMode::Constant)
    inputs.push_back(e.constScalar(a.value(), n.operand(0)->dtype()));
  Exporter::attrString(e.node("Pad", inputs, {Exporter::out(n)}), "mode", a.modeAttr().getString());
  return true;
}

bool emitResize(Exporter &e, const Node &n) {
  attrs::Resize a(n);
  std::vector<std::string> inputs = {Exporter::in(n, 0), ""};
  if (!a.scales().empty()) {
    inputs.push_back(e.constFloats({1.0, 1.0, a.scales()[0], a.scales()[1]}));
  } else {
    inputs.push_back("");
    llvm::ArrayRef<int64_t> y = n.result()->type().dims();
    if (e.batch()) {
      for (unsigned d = 1; d < y.size(); ++d)
        if (e.batch()->varies(n.result(), d))
          return e.fixBatch(n, "a dim other than the first follows the batch");
    }
    if (e.batch() && e.batch()->varies(n.result(), 0)) {
      // The batch dim comes from the input at run time (Shape with end=1),
      // the others are fixed: sizes = Concat(Shape(x)[:1], [C, H', W']).
      std::string batch = e.fresh("resize_batch"), sizes = e.fresh("resize_sizes");
      Exporter::attrInt(e.node("Shape", {Exporter::in(n, 0)}, {batch}), "end", 1);
      std::string rest = e.constInts(std::vector<int64_t>(y.begin() + 1, y.end()));
      Exporter::attrInt(e.node("Concat", {batch, rest}, {sizes}), "axis", 0);
      inputs.push_back(sizes);
    } else {
      inputs.push_back(e.constInts(std::vector<int64_t>(y.begin(), y.end())));
    }
  }
  onnx::NodeProto &r = e.node("Resize", inputs, {Exporter::out(n)});
  Exporter::attrString(r, "mode", a.modeAttr().getString());
  Exporter::attrString(r, "coordinate_transformation_mode", a.coordinate_modeAttr().getString());
  Exporter::attrString(r, "nearest_mode", a.nearest_modeAttr().getString());
  // ONNX's defaults (-0.75, 0) are ampc's, but a cubic node writes both so
  // that the file says which kernel it was computed with.
  if (a.mode() == ResizeMode::Cubic) {
    Exporter::attrFloat(r, "cubic_coeff_a", a.cubic_coeff_a());
    Exporter::attrInt(r, "exclude_outside", a.exclude_outside() ? 1 : 0);
  }
  return true;
}

bool emitTranspose(Exporter &e, const Node &n) {
  unsigned rank = n.operand(0)->type().rank();
  std::vector<int64_t> perm;
  for (unsigned d = 0; d < rank; ++d)
    perm.push_back(d);
  auto norm = [&](int64_t d) { return d < 0 ? d + rank : d; };
  attrs::Transpose a(n);
  std::swap(perm[norm(a.dim0())], perm[norm(a.dim1())]);
  Exporter::attrInts(e.node("Transpose", {Exporter::in(n, 0)}, {Exporter::out(n)}), "perm", perm);
  return true;
}

bool emitPermute(Exporter &e, const Node &n) {
  unsigned rank = n.operand(0)->type().rank();
  std::vector<int64_t> perm = attrs::Permute(n).dims();
  for (int64_t &d : perm)
    d = d < 0 ? d + rank : d;
  Exporter::attrInts(e.node("Transpose", {Exporter::in(n, 0)}, {Exporter::out(n)}), "perm", perm);
  return true;
}

bool emitConcat(Exporter &e, const Node &n) {
  std::vector<std::string> ins;
  for (unsigned i = 0; i < n.numOperands(); ++i)
    ins.push_back(Exporter::in(n, i));
  Exporter::attrInt(e.node("Concat", ins, {Exporter::out(n)}), "axis", attrs::Concat(n).axis());
  return true;
}

bool emitEmbedding(Exporter &e, const Node &n) {
  e.node("Gather", {Exporter::in(n, 1), Exporter::in(n, 0)}, {Exporter::out(n)});
  return true;
}

bool emitCast(Exporter &e, const Node &n) {
  Exporter::attrInt(e.node("Cast", {Exporter::in(n, 0)}, {Exporter::out(n)}), "to",
                    onnxTypeOf(attrs::Cast(n).to()));
  return true;
}

bool emitSlice(Exporter &e, const Node &n) {
  e.node("Slice",
         {Exporter::in(n, 0), e.constInts({attrs::Slice(n).start()}),
          e.constInts({attrs::Slice(n).end()}), e.constInts({attrs::Slice(n).axis()})},
         {Exporter::out(n)});
  return true;
}

bool emitDropout(Exporter &e, const Node &n) {
  if (attrs::Dropout(n).training() && attrs::Dropout(n).p() > 0)
    return e.error(n, "dropout is in training mode (export the inference graph)");
  e.node("Identity", {Exporter::in(n, 0)}, {Exporter::out(n)});
  return true;
}

bool emitReduce(Exporter &e, const Node &n, bool mean) {
  // reduce_sum and reduce_mean declare the same attributes.
  attrs::ReduceSum a(n);
  std::vector<int64_t> axes = a.dims();
  if (axes.empty())
    for (unsigned d = 0; d < n.operand(0)->type().rank(); ++d)
      axes.push_back(d);
  bool keep = a.keepdim();
  if (mean) {
    onnx::NodeProto &r = e.node("ReduceMean", {Exporter::in(n, 0)}, {Exporter::out(n)});
    Exporter::attrInts(r, "axes", axes);
    Exporter::attrInt(r, "keepdims", keep);
  } else {
    onnx::NodeProto &r =
        e.node("ReduceSum", {Exporter::in(n, 0), e.constInts(axes)}, {Exporter::out(n)});
    Exporter::attrInt(r, "keepdims", keep);
  }
  return true;
}

bool emitClamp(Exporter &e, const Node &n) {
  DType t = n.operand(0)->dtype();
  e.node("Clip",
         {Exporter::in(n, 0), e.constScalar(attrs::Clamp(n).min(), t),
          e.constScalar(attrs::Clamp(n).max(), t)},
         {Exporter::out(n)});
  return true;
}

bool emitPow(Exporter &e, const Node &n) {
  e.node("Pow",
         {Exporter::in(n, 0), e.constScalar(attrs::Pow(n).exponent(), n.operand(0)->dtype())},
         {Exporter::out(n)});
  return true;
}

bool emitCompare(Exporter &e, const Node &n) {
  ComparePredicate p = attrs::Compare(n).predicate();
  std::vector<std::string> ins{Exporter::in(n, 0), Exporter::in(n, 1)};
  switch (p) {
  case ComparePredicate::Eq:
    return emitSimple(e, n, "Equal");
  case ComparePredicate::Lt:
    return emitSimple(e, n, "Less");
  case ComparePredicate::Le:
    return emitSimple(e, n, "LessOrEqual");
  case ComparePredicate::Gt:
    return emitSimple(e, n, "Greater");
  case ComparePredicate::Ge:
    return emitSimple(e, n, "GreaterOrEqual");
  case ComparePredicate::Ne: {
    std::string eq = e.fresh("equal");
    e.node("Equal", ins, {eq});
    e.node("Not", {eq}, {Exporter::out(n)});
    return true;
  }
  }
  return false;
}

bool emitLogical(Exporter &e, const Node &n) {
  LogicalOp op = attrs::Logical(n).op();
  return emitSimple(e, n, op == LogicalOp::And ? "And" : op == LogicalOp::Or ? "Or" : "Xor");
}

bool emitExtremum(Exporter &e, const Node &n, llvm::StringRef type) {
  attrs::ReduceMax a(n);
  std::vector<int64_t> axes = a.dims();
  if (axes.empty())
    for (unsigned d = 0; d < n.operand(0)->type().rank(); ++d)
      axes.push_back(d);
  onnx::NodeProto &r = e.node(type, {Exporter::in(n, 0)}, {Exporter::out(n)});
  Exporter::attrInts(r, "axes", axes);
  Exporter::attrInt(r, "keepdims", a.keepdim());
  return true;
}

bool emitArgMax(Exporter &e, const Node &n) {
  attrs::ArgMax a(n);
  onnx::NodeProto &r = e.node("ArgMax", {Exporter::in(n, 0)}, {Exporter::out(n)});
  Exporter::attrInt(r, "axis", a.dim());
  Exporter::attrInt(r, "keepdims", a.keepdim());
  Exporter::attrInt(r, "select_last_index", a.select_last_index());
  return true;
}

/// Expand to the result's shape, but 1 wherever the input already has the
/// result's dim: ONNX broadcasts the target against the input, so those
/// dims (the batch among them) follow the input at any batch.
bool emitBroadcastTo(Exporter &e, const Node &n) {
  llvm::ArrayRef<int64_t> in = n.operand(0)->type().dims(), out = n.result()->type().dims();
  std::vector<int64_t> target(out.begin(), out.end());
  for (size_t d = 0; d < in.size(); ++d) {
    size_t o = out.size() - in.size() + d;
    if (in[d] == out[o])
      target[o] = 1;
  }
  e.node("Expand", {Exporter::in(n, 0), e.constInts(target)}, {Exporter::out(n)});
  return true;
}

/// conv2d_grad_input as a layer: ONNX ConvTranspose, with output_padding
/// making up the rows a strided convolution's floor dropped.
bool emitConvTranspose(Exporter &e, const Node &n) {
  attrs::Conv2dGradInput a(n);
  const TensorType &x = n.operand(0)->type(), &w = n.operand(1)->type();
  const std::vector<int64_t> &shape = a.input_shape(), &s = a.stride(), &p = a.padding(),
                             &d = a.dilation();
  std::vector<int64_t> extra;
  for (unsigned i = 0; i < 2; ++i)
    extra.push_back(shape[2 + i] -
                    ((x.dim(2 + i) - 1) * s[i] - 2 * p[i] + d[i] * (w.dim(2 + i) - 1) + 1));
  onnx::NodeProto &c =
      e.node("ConvTranspose", {Exporter::in(n, 0), Exporter::in(n, 1)}, {Exporter::out(n)});
  Exporter::attrInts(c, "pads", {p[0], p[1], p[0], p[1]});
  Exporter::attrInts(c, "strides", s);
  Exporter::attrInts(c, "dilations", d);
  Exporter::attrInt(c, "group", a.groups());
  Exporter::attrInts(c, "kernel_shape", {w.dim(2), w.dim(3)});
  if (extra[0] || extra[1])
    Exporter::attrInts(c, "output_padding", extra);
  return true;
}

// ONNX's other activations: their attributes under ONNX's names.
bool emitHardSigmoid(Exporter &e, const Node &n) {
  onnx::NodeProto &h = e.node("HardSigmoid", {Exporter::in(n, 0)}, {Exporter::out(n)});
  Exporter::attrFloat(h, "alpha", attrs::HardSigmoid(n).alpha());
  Exporter::attrFloat(h, "beta", attrs::HardSigmoid(n).beta());
  return true;
}

bool emitLeakyRelu(Exporter &e, const Node &n) {
  Exporter::attrFloat(e.node("LeakyRelu", {Exporter::in(n, 0)}, {Exporter::out(n)}), "alpha",
                      attrs::LeakyRelu(n).negative_slope());
  return true;
}

bool emitElu(Exporter &e, const Node &n) {
  Exporter::attrFloat(e.node("Elu", {Exporter::in(n, 0)}, {Exporter::out(n)}), "alpha",
                      attrs::Elu(n).alpha());
  return true;
}

struct ExportRow {
  OpKind kind;
  EmitFn emit;
};

// clang-format off
const ExportRow kExportTable[] = {
  {OpKind::Linear,       emitLinear},
  {OpKind::MatMul,       emitMatMul},
  {OpKind::BatchMatMul,  emitMatMul},
  {OpKind::Conv2d,       emitConv},
  {OpKind::BatchNorm2d,  emitBatchNorm},
  {OpKind::LayerNorm,    emitLayerNorm},
  {OpKind::Relu,         [](Exporter &e, const Node &n) { return emitSimple(e, n, "Relu"); }},
  {OpKind::Sigmoid,      [](Exporter &e, const Node &n) { return emitSimple(e, n, "Sigmoid"); }},
  {OpKind::Tanh,         [](Exporter &e, const Node &n) { return emitSimple(e, n, "Tanh"); }},
  {OpKind::Gelu,         emitGelu},
  {OpKind::Silu,         emitSilu},
  {OpKind::Softmax,      [](Exporter &e, const Node &n) { return emitSoftmaxLike(e, n, "Softmax"); }},
  {OpKind::LogSoftmax,   [](Exporter &e, const Node &n) { return emitSoftmaxLike(e, n, "LogSoftmax"); }},
  {OpKind::Dropout,      emitDropout},
  {OpKind::Add,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Add"); }},
  {OpKind::Sub,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Sub"); }},
  {OpKind::Mul,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Mul"); }},
  {OpKind::Div,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Div"); }},
  {OpKind::Scale,        emitScale},
  {OpKind::MaxPool2d,    [](Exporter &e, const Node &n) { return emitPool(e, n, true); }},
  {OpKind::AvgPool2d,    [](Exporter &e, const Node &n) { return emitPool(e, n, false); }},
  {OpKind::GlobalAvgPool,[](Exporter &e, const Node &n) { return emitSimple(e, n, "GlobalAveragePool"); }},
  {OpKind::Pad,          emitPad},
  {OpKind::Resize,       emitResize},
  {OpKind::Flatten,      emitFlatten},
  {OpKind::Reshape,      emitReshape},
  {OpKind::Transpose,    emitTranspose},
  {OpKind::Permute,      emitPermute},
  {OpKind::Concat,       emitConcat},
  {OpKind::Embedding,    emitEmbedding},
  {OpKind::Cast,         emitCast},
  {OpKind::Slice,        emitSlice},
  {OpKind::ReduceSum,    [](Exporter &e, const Node &n) { return emitReduce(e, n, false); }},
  {OpKind::ReduceMean,   [](Exporter &e, const Node &n) { return emitReduce(e, n, true); }},
  {OpKind::Clamp,        emitClamp},
  {OpKind::Sqrt,         [](Exporter &e, const Node &n) { return emitSimple(e, n, "Sqrt"); }},
  {OpKind::Erf,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Erf"); }},
  {OpKind::Exp,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Exp"); }},
  {OpKind::Pow,          emitPow},
  {OpKind::Compare,      emitCompare},
  {OpKind::Logical,      emitLogical},
  {OpKind::LogicalNot,   [](Exporter &e, const Node &n) { return emitSimple(e, n, "Not"); }},
  {OpKind::Where,        [](Exporter &e, const Node &n) { return emitSimple(e, n, "Where"); }},
  {OpKind::ReduceMax,    [](Exporter &e, const Node &n) { return emitExtremum(e, n, "ReduceMax"); }},
  {OpKind::ReduceMin,    [](Exporter &e, const Node &n) { return emitExtremum(e, n, "ReduceMin"); }},
  {OpKind::ArgMax,       emitArgMax},
  {OpKind::BroadcastTo,  emitBroadcastTo},
  {OpKind::Conv2dGradInput, emitConvTranspose},
  {OpKind::HardSigmoid,  emitHardSigmoid},
  {OpKind::HardSwish,    [](Exporter &e, const Node &n) { return emitSimple(e, n, "HardSwish"); }},
  {OpKind::LeakyRelu,    emitLeakyRelu},
  {OpKind::Elu,          emitElu},
  {OpKind::Softplus,     [](Exporter &e, const Node &n) { return emitSimple(e, n, "Softplus"); }},
  {OpKind::PRelu,        [](Exporter &e, const Node &n) { return emitSimple(e, n, "PRelu"); }},
  {OpKind::Neg,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Neg"); }},
  {OpKind::Floor,        [](Exporter &e, const Node &n) { return emitSimple(e, n, "Floor"); }},
  {OpKind::Ceil,         [](Exporter &e, const Node &n) { return emitSimple(e, n, "Ceil"); }},
  {OpKind::Abs,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Abs"); }},
  {OpKind::Log,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Log"); }},
  {OpKind::Reciprocal,   [](Exporter &e, const Node &n) { return emitSimple(e, n, "Reciprocal"); }},
  {OpKind::Max,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Max"); }},
  {OpKind::Power,        [](Exporter &e, const Node &n) { return emitSimple(e, n, "Pow"); }},
  {OpKind::Mod,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Mod"); }},
  {OpKind::Fmod,         [](Exporter &e, const Node &n) {
     Exporter::attrInt(e.node("Mod", {Exporter::in(n, 0), Exporter::in(n, 1)}, {Exporter::out(n)}),
                       "fmod", 1);
     return true;
   }},
  {OpKind::Min,          [](Exporter &e, const Node &n) { return emitSimple(e, n, "Min"); }},
};
// clang-format on

const ExportRow *findRow(OpKind k) {
  for (const ExportRow &r : kExportTable)
    if (r.kind == k)
      return &r;
  return nullptr;
}

/// A graph input's or output's type; a dim that follows a symbolic batch is
/// named ("batch", "batch*6"), or left unknown when it is not a multiple.
void setValueInfo(onnx::ValueInfoProto &vi, const Value *v, const BatchShapes *batch) {
  vi.set_name(v->name().str());
  onnx::TypeProto::Tensor &t = *vi.mutable_type()->mutable_tensor_type();
  t.set_elem_type(onnxTypeOf(v->dtype()));
  onnx::TensorShapeProto &s = *t.mutable_shape();
  for (unsigned d = 0; d < v->type().rank(); ++d) {
    onnx::TensorShapeProto::Dimension &dim = *s.add_dim();
    if (!batch || !batch->varies(v, d))
      dim.set_dim_value(v->type().dim(d));
    else if (std::optional<std::string> symbol = batch->symbol(v, d))
      dim.set_dim_param(*symbol);
  }
}

/// The model of `g`; false when an op cannot be written, or, with `batch`,
/// with `fixedBecause` set when the batch cannot stay symbolic.
bool buildModel(const Graph &g, StateBytesFn stateBytes, const BatchShapes *batch,
                onnx::ModelProto &model, DiagnosticEngine &diag, std::string &fixedBecause) {
  model.set_ir_version(onnx::IR_VERSION);
  model.set_producer_name("ampc");
  onnx::OperatorSetIdProto &opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kExportOpset);
  onnx::GraphProto &graph = *model.mutable_graph();
  graph.set_name(g.name());
  llvm::DenseSet<const Value *> used;
  for (const Node &n : g.nodes())
    for (const Value *v : n.operands())
      used.insert(v);
  for (const Value *o : g.outputs())
    used.insert(o);
  // Inputs only the loss read (labels) are not the model's.
  for (const Value *in : g.inputs())
    if (used.count(in))
      setValueInfo(*graph.add_input(), in, batch);
  for (const Value *s : g.state()) {
    if (!used.count(s))
      continue;
    onnx::TensorProto &t = *graph.add_initializer();
    t.set_name(s->name().str());
    t.set_data_type(onnxTypeOf(s->dtype()));
    for (int64_t d : s->type().dims())
      t.add_dims(d);
    std::vector<char> bytes;
    if (!stateBytes(s, bytes))
      return false;
    t.set_raw_data(std::string(bytes.begin(), bytes.end()));
  }
  Exporter e(g, graph, diag, batch);
  for (const Node &n : g.nodes()) {
    if (n.role() != NodeRole::Forward)
      return e.error(n,
                     "the graph has " + roleName(n.role()) + " nodes; export the inference graph");
    const ExportRow *row = findRow(n.kind());
    if (!row)
      return e.error(n, "the op has no ONNX form yet (docs/onnx.md lists the exported ops)");
    if (!row->emit(e, n)) {
      fixedBecause = e.fixedBecause();
      return false;
    }
  }
  for (const Value *o : g.outputs())
    setValueInfo(*graph.add_output(), o, batch);
  return true;
}

} // namespace

std::vector<std::string> exportableOps() {
  std::vector<std::string> ops;
  for (const ExportRow &r : kExportTable)
    ops.push_back(std::string(OpRegistry::builtin().get(r.kind).name));
  llvm::sort(ops);
  return ops;
}

bool exportOnnxModel(const Graph &g, StateBytesFn stateBytes, std::string &out,
                     DiagnosticEngine &diag, const BatchShapes *batch, bool *batchKept) {
  onnx::ModelProto model;
  std::string fixedBecause;
  if (!buildModel(g, stateBytes, batch, model, diag, fixedBecause)) {
    if (fixedBecause.empty())
      return false;
    diag.warning({}, "the exported model's batch is fixed at " + llvm::Twine(batch->batch) + ": " +
                         fixedBecause);
    model.Clear();
    batch = nullptr;
    if (!buildModel(g, stateBytes, batch, model, diag, fixedBecause))
      return false;
  }
  if (batchKept)
    *batchKept = batch != nullptr;
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &ex) {
    diag.error({}, llvm::Twine("internal error: the exported model fails the ONNX checker: ") +
                       ex.what());
    return false;
  }
  if (!model.SerializeToString(&out)) {
    diag.error({}, "cannot serialise the ONNX model (over 2 GiB?)");
    return false;
  }
  return true;
}

} // namespace ampc
