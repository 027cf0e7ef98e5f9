//===- Importer.cpp - The ONNX graph walk: inputs, nodes, outputs ----------===//
#include "frontends/onnx/ConstFold.h"
#include "frontends/onnx/Lowering.h"
#include "frontends/onnx/OnnxFile.h"

#include "ir/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstring>

namespace ampc {
namespace onnxfe {

OnnxLowering::OnnxLowering(Graph &g, DiagnosticEngine &diag, const onnx::ModelProto &model,
                           const OnnxImportSettings &settings)
    : g_(g), diag_(diag), model_(model), settings_(settings), opset_(defaultOpset(model)),
      fileLabel_(settings.path) {
  for (const onnx::NodeProto &n : model.graph().node()) {
    for (const std::string &in : n.input())
      if (!in.empty())
        consumers_[in].push_back(&n);
    for (const std::string &out : n.output())
      if (!out.empty())
        producers_[out] = &n;
  }
  for (const onnx::ValueInfoProto &o : model.graph().output())
    graphOutputs_.insert(o.name());
}

bool OnnxLowering::error(const llvm::Twine &msg) {
  diag_.error(nodeLoc_, msg);
  return false;
}

llvm::ArrayRef<const onnx::NodeProto *> OnnxLowering::consumers(llvm::StringRef name) const {
  auto it = consumers_.find(name);
  if (it == consumers_.end())
    return {};
  return it->second;
}

const onnx::NodeProto *OnnxLowering::producer(llvm::StringRef name) const {
  auto it = producers_.find(name);
  return it == producers_.end() ? nullptr : it->second;
}

std::string OnnxLowering::valueName(llvm::StringRef onnxName) {
  std::string name;
  for (char c : onnxName)
    name += (c == '"' || c == '\\' || c == '\n' || c == '\r') ? '_' : c;
  if (name.empty())
    return "";
  return g_.isNameFree(name) ? name : g_.uniqueName(name);
}

const Term *OnnxLowering::input(const onnx::NodeProto &n, int i) {
  if (!hasInput(n, i))
    return nullptr;
  auto it = terms_.find(n.input(i));
  return it == terms_.end() ? nullptr : &it->second;
}

const TensorType &OnnxLowering::typeOf(const onnx::NodeProto &n, int i) {
  return terms_.find(n.input(i))->second.type;
}

Value *OnnxLowering::materialise(llvm::StringRef name, Term &t, StateKind kind) {
  if (t.value)
    return t.value;
  InitSpec init;
  Location loc;
  if (t.initializer) {
    init.kind = InitSpec::Kind::File;
    init.path = settings_.pathInInit;
    init.key = t.initializer->name();
    loc = Location::inFile(fileLabel_ + ": initializer '" + t.initializer->name() + "'", 0, 0);
    if (!isFloating(t.type.dtype()) || t.onlyFeedsMasks)
      kind = StateKind::Buffer;
  } else if (t.constant) {
    const ConstTensor &c = *t.constant;
    loc = nodeLoc_;
    bool uniform = llvm::all_of(c.values, [&](double v) { return v == c.values.front(); });
    if (uniform && !c.values.empty()) {
      init.kind = InitSpec::Kind::Constant;
      init.a = c.values.front();
    } else if (t.fromConstantNode) {
      init.kind = InitSpec::Kind::File;
      init.path = settings_.pathInInit;
      init.key = name.str();
    } else {
      // Computed here (a mask, positions): the graph carries the elements.
      init.kind = InitSpec::Kind::Data;
      init.data = std::make_shared<std::vector<double>>(c.values);
    }
    kind = StateKind::Buffer;
  } else {
    return nullptr;
  }
  if (t.type.dtype() == DType::I32 && t.constant) {
    // Index constants (Range of int32, a Cast the exporter left): the
    // registry's ops take i64 indices, and the values are exact in either.
    t.type = t.type.withDType(DType::I64);
    t.constant->dtype = DType::I64;
  }
  if (t.type.dtype() == DType::F64 || t.type.dtype() == DType::I32) {
    // The registry's ops take f32/half data, i64 indices and bool masks.
    error("'" + name + "' is " + t.type.str() +
          "; ampc imports float32/float16 data, int64 "
          "indices and bool masks");
    return nullptr;
  }
  std::string vname = valueName(name);
  Value *v = g_.addState(vname, t.type, kind, init, loc);
  if (kind == StateKind::Parameter && llvm::is_contained(settings_.frozen, name.str()))
    v->setTrainable(false);
  t.value = v;
  return v;
}

Value *OnnxLowering::valueOf(const onnx::NodeProto &n, int i, StateKind kind) {
  if (!hasInput(n, i)) {
    error("input " + llvm::Twine(i) + " is missing");
    return nullptr;
  }
  auto it = terms_.find(n.input(i));
  if (it == terms_.end()) {
    error("input '" + n.input(i) + "' is not defined before this node");
    return nullptr;
  }
  Value *v = materialise(it->getKey(), it->second, kind);
  if (!v && !diag_.hasErrors())
    error("input '" + n.input(i) + "' has no value");
  return v;
}

Value *OnnxLowering::valueOfName(llvm::StringRef name, StateKind kind) {
  auto it = terms_.find(name);
  if (it == terms_.end()) {
    error("'" + name + "' is not defined before this node");
    return nullptr;
  }
  return materialise(it->getKey(), it->second, kind);
}

void OnnxLowering::setOutputName(llvm::StringRef name, Value *v) {
  if (!v)
    return;
  Term &t = terms_[name];
  t.value = v;
  t.type = v->type();
}

const onnx::TensorProto *OnnxLowering::initializer(llvm::StringRef name) const {
  for (const onnx::TensorProto &t : model_.graph().initializer())
    if (t.name() == name)
      return &t;
  return nullptr;
}

std::optional<double> OnnxLowering::staticScalar(llvm::StringRef name) const {
  const onnx::TensorProto *tensor = initializer(name);
  if (!tensor)
    if (const onnx::NodeProto *p = producer(name); p && p->op_type() == "Constant")
      for (const onnx::AttributeProto &a : p->attribute()) {
        if (a.name() == "value" && a.has_t())
          tensor = &a.t();
        else if (a.name() == "value_float")
          return a.f();
        else if (a.name() == "value_int")
          return double(a.i());
      }
  if (!tensor)
    return std::nullopt;
  NpyArray array;
  std::string err;
  if (!tensorToArray(*tensor, llvm::sys::path::parent_path(settings_.path), array, err) ||
      array.numElements() != 1)
    return std::nullopt;
  return arrayElement(array, 0);
}

Value *OnnxLowering::constantState(llvm::StringRef base, TensorType type, double value) {
  InitSpec init;
  init.kind = InitSpec::Kind::Constant;
  init.a = value;
  return g_.addState(g_.uniqueName(base), std::move(type), StateKind::Buffer, init, nodeLoc_);
}

Value *OnnxLowering::constantBuffer(llvm::StringRef base, const ConstTensor &c) {
  TensorType type(c.dtype == DType::I32 ? DType::I64 : c.dtype, c.dims);
  if (type.dtype() == DType::F64)
    type = type.withDType(DType::F32);
  InitSpec init;
  bool uniform =
      !c.values.empty() && llvm::all_of(c.values, [&](double v) { return v == c.values.front(); });
  if (uniform) {
    init.kind = InitSpec::Kind::Constant;
    init.a = c.values.front();
  } else {
    init.kind = InitSpec::Kind::Data;
    init.data = std::make_shared<std::vector<double>>(c.values);
  }
  return g_.addState(g_.uniqueName(valueName(base)), std::move(type), StateKind::Buffer, init,
                     nodeLoc_);
}

bool OnnxLowering::onlyFeedsMasks(llvm::StringRef name, unsigned depth) const {
  // Deep chains are not masks; the bound also keeps a hostile file's
  // recursion short.
  if (depth > 16 || isGraphOutput(name))
    return false;
  llvm::ArrayRef<const onnx::NodeProto *> users = consumers(name);
  if (users.empty())
    return false;
  for (const onnx::NodeProto *u : users) {
    llvm::StringRef op = u->op_type();
    bool asData = u->input_size() > 0 && u->input(0) == name;
    if (op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
        op == "GreaterOrEqual" || op == "Shape")
      continue;
    if (op == "Where" && asData && !llvm::is_contained(llvm::drop_begin(u->input()), name))
      continue;
    if (op == "Cast") {
      bool toFloat = false;
      for (const onnx::AttributeProto &a : u->attribute())
        if (a.name() == "to")
          toFloat =
              dtypeOfOnnx(int32_t(a.i())).has_value() && isFloating(*dtypeOfOnnx(int32_t(a.i())));
      if (!toFloat)
        continue;
    }
    bool moves = op == "Slice" || op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" ||
                 op == "Transpose" || op == "Expand" || op == "Identity" || op == "Flatten" ||
                 (op == "Gather" && asData) || op == "Cast";
    if (!moves || !asData)
      return false;
    for (const std::string &out : u->output())
      if (!out.empty() && !onlyFeedsMasks(out, depth + 1))
        return false;
  }
  return true;
}

Value *OnnxLowering::privateBuffer(const onnx::NodeProto &n, int i) {
  const Term *t = input(n, i);
  if (!t || !t->initializer)
    return valueOf(n, i, StateKind::Buffer);
  const std::string &key = t->initializer->name();
  bool shared = t->value || consumers(n.input(i)).size() > 1 || isGraphOutput(n.input(i));
  if (!shared)
    return valueOf(n, i, StateKind::Buffer);
  InitSpec init;
  init.kind = InitSpec::Kind::File;
  init.path = settings_.pathInInit;
  init.key = key;
  std::string base =
      (n.name().empty() ? n.output(0) : n.name()) + (i == 3 ? ".running_mean" : ".running_var");
  note("'" + key + "' is shared; node " + base + " keeps its own copy");
  return g_.addState(valueName(base), t->type, StateKind::Buffer, init, nodeLoc_);
}

namespace {
bool loadConstant(const onnx::TensorProto &t, llvm::StringRef baseDir, ConstTensor &c,
                  std::string &err) {
  NpyArray a;
  if (!tensorToArray(t, baseDir, a, err))
    return false;
  c.dtype = a.dtype;
  c.dims.assign(a.shape.begin(), a.shape.end());
  int64_t n = a.numElements();
  c.values.resize(n);
  for (int64_t k = 0; k < n; ++k)
    c.values[k] = arrayElement(a, k);
  return true;
}
} // namespace

const ConstTensor *OnnxLowering::constantOf(const onnx::NodeProto &n, int i, llvm::StringRef what) {
  const Term *t = input(n, i);
  if (!t) {
    error(what + " (input " + llvm::Twine(i) + ") is missing");
    return nullptr;
  }
  if (t->constant)
    return &*t->constant;
  if (t->initializer) {
    // Small initializers (shapes, axes, scalars; masks) are read on demand.
    if (t->type.numElements() > (t->onlyFeedsMasks ? kMaxFoldedElements : int64_t(1) << 16)) {
      error(what + " '" + n.input(i) + "' is too large to fold");
      return nullptr;
    }
    ConstTensor c;
    std::string err;
    if (!loadConstant(*t->initializer, llvm::sys::path::parent_path(settings_.path), c, err)) {
      error(err);
      return nullptr;
    }
    Term &mut = terms_.find(n.input(i))->second;
    mut.constant = std::move(c);
    return &*mut.constant;
  }
  bool isGraphInput = t->value && t->value->isInput();
  error(what + " '" + n.input(i) +
        "' must be known when the model is imported; here it is "
        "computed at run time" +
        (isGraphInput ? "; it is an input of the model: --fix-input " + n.input(i) +
                            "=FILE.npy holds it constant"
                      : std::string()));
  return nullptr;
}

Node *OnnxLowering::build(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                          llvm::ArrayRef<std::string> names) {
  for (Value *v : operands)
    if (!v)
      return nullptr;
  return buildNode(g_, OpRegistry::builtin().get(kind), operands, std::move(attrs), nodeLoc_, diag_,
                   names);
}

Value *OnnxLowering::build1(OpKind kind, llvm::ArrayRef<Value *> operands, AttrMap attrs,
                            llvm::StringRef onnxName) {
  std::vector<std::string> names;
  if (!onnxName.empty())
    names.push_back(valueName(onnxName));
  Node *node = build(kind, operands, std::move(attrs), names);
  return node ? node->result(0) : nullptr;
}

Value *OnnxLowering::reshape(Value *v, llvm::ArrayRef<int64_t> dims, llvm::StringRef resultName) {
  if (!v)
    return nullptr;
  if (v->type().dims() == dims)
    return v;
  return build1(OpKind::Reshape, {v}, {{"shape", Attribute(std::vector<int64_t>(dims))}},
                resultName);
}

void OnnxLowering::setOutput(const onnx::NodeProto &n, int i, Value *v) {
  if (i >= n.output_size() || n.output(i).empty() || !v)
    return;
  Term &t = terms_[n.output(i)];
  t.value = v;
  t.type = v->type();
}

void OnnxLowering::setConstant(const onnx::NodeProto &n, int i, ConstTensor c) {
  if (i >= n.output_size() || n.output(i).empty())
    return;
  Term &t = terms_[n.output(i)];
  t.type = TensorType(c.dtype, c.dims);
  t.constant = std::move(c);
  t.fromConstantNode = n.op_type() == "Constant";
}

void OnnxLowering::alias(const onnx::NodeProto &n, int i, int j) {
  if (i >= n.output_size() || n.output(i).empty())
    return;
  auto src = terms_.find(n.input(j));
  // An initializer passed through Identity (exporters tie deduplicated
  // weights this way) is one parameter under its own name, not a copy.
  if (src->second.initializer && !src->second.value && isFloating(src->second.type.dtype()))
    materialise(src->getKey(), src->second, StateKind::Parameter);
  terms_[n.output(i)] = src->second;
}

const onnx::AttributeProto *OnnxLowering::attr(const onnx::NodeProto &n, llvm::StringRef name) {
  for (const onnx::AttributeProto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t OnnxLowering::intAttr(const onnx::NodeProto &n, llvm::StringRef name, int64_t dflt) {
  const onnx::AttributeProto *a = attr(n, name);
  return a ? a->i() : dflt;
}

double OnnxLowering::floatAttr(const onnx::NodeProto &n, llvm::StringRef name, double dflt) {
  const onnx::AttributeProto *a = attr(n, name);
  return a ? a->f() : dflt;
}

std::string OnnxLowering::stringAttr(const onnx::NodeProto &n, llvm::StringRef name,
                                     llvm::StringRef dflt) {
  const onnx::AttributeProto *a = attr(n, name);
  return a ? a->s() : dflt.str();
}

std::optional<std::vector<int64_t>> OnnxLowering::intsAttr(const onnx::NodeProto &n,
                                                           llvm::StringRef name) {
  const onnx::AttributeProto *a = attr(n, name);
  if (!a)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

bool OnnxLowering::checkAttrs(const onnx::NodeProto &n,
                              std::initializer_list<llvm::StringRef> known) {
  for (const onnx::AttributeProto &a : n.attribute())
    if (!llvm::is_contained(known, a.name()))
      return error("attribute '" + a.name() + "' is not supported");
  return true;
}

bool OnnxLowering::normAxis(int64_t axis, unsigned rank, unsigned &out, llvm::StringRef what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= int64_t(rank))
    return error(what + " " + llvm::Twine(axis) + " is out of range for rank " + llvm::Twine(rank));
  out = unsigned(a);
  return true;
}

bool OnnxLowering::declareInputs(const llvm::StringMap<Value *> &bound) {
  const onnx::GraphProto &graph = model_.graph();
  llvm::StringSet<> initializerNames;
  for (const onnx::TensorProto &t : graph.initializer()) {
    initializerNames.insert(t.name());
    std::optional<DType> dtype = dtypeOfOnnx(t.data_type());
    nodeLoc_ = Location::inFile(fileLabel_ + ": initializer '" + t.name() + "'", 0, 0);
    if (!dtype)
      return error("data type " + onnxTypeName(t.data_type()) + " is not supported");
    Term term;
    term.initializer = &t;
    term.type = TensorType(*dtype, llvm::SmallVector<int64_t, 4>(t.dims().begin(), t.dims().end()));
    term.onlyFeedsMasks = isFloating(*dtype) && onlyFeedsMasks(t.name());
    if (!term.type.checkedNumElements() ||
        *term.type.checkedNumElements() > settings_.load.maxElements)
      return error("has " + term.type.str() + ", more elements than the limit (" +
                   llvm::Twine(settings_.load.maxElements) + ")");
    terms_[t.name()] = term;
  }
  int64_t batch = settings_.load.batchOverride.value_or(1);
  llvm::StringSet<> inputNames;
  for (const onnx::ValueInfoProto &in : graph.input()) {
    inputNames.insert(in.name());
    if (initializerNames.count(in.name()))
      continue; // IR < 4 lists initializers among the inputs
    nodeLoc_ = Location::inFile(fileLabel_ + ": input '" + in.name() + "'", 0, 0);
    if (!in.type().has_tensor_type())
      return error("only tensor inputs are supported");
    const onnx::TypeProto::Tensor &tt = in.type().tensor_type();
    std::optional<DType> dtype = dtypeOfOnnx(tt.elem_type());
    if (!dtype)
      return error("data type " + onnxTypeName(tt.elem_type()) + " is not supported");
    if (const std::string *file = fixedInputFile(in.name())) {
      if (!fixInput(in.name(), *dtype, tt, *file))
        return false;
      continue;
    }
    auto it = bound.find(in.name());
    if (it != bound.end()) {
      Value *v = it->second;
      const TensorType &t = v->type();
      bool fits =
          t.dtype() == *dtype && (!tt.has_shape() || t.rank() == unsigned(tt.shape().dim_size()));
      for (int d = 0; fits && tt.has_shape() && d < tt.shape().dim_size(); ++d)
        // Dim 0 is the batch, which the model file binds (torch.onnx.export
        // records the example's batch unless told otherwise).
        if (tt.shape().dim(d).has_dim_value() && tt.shape().dim(d).dim_value() != t.dim(d) &&
            d != 0)
          fits = false;
      if (!fits)
        return error("the model file declares it " + t.str() +
                     ", which does not fit the ONNX "
                     "input's type");
      terms_[in.name()] = Term{v, std::nullopt, nullptr, false, false, t};
      continue;
    }
    if (!bound.empty())
      return error("the model file's `inputs:` does not declare this ONNX input");
    if (!tt.has_shape())
      return error("has no shape; ampc needs static shapes (wrap the model in a model file "
                   "whose `inputs:` gives it one)");
    llvm::SmallVector<int64_t, 4> dims;
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const onnx::TensorShapeProto::Dimension &dim = tt.shape().dim(d);
      if (dim.has_dim_value() && dim.dim_value() > 0 && !(d == 0 && settings_.load.batchOverride)) {
        dims.push_back(dim.dim_value());
      } else if (d == 0) {
        dims.push_back(batch); // the batch: --batch, or 1
      } else {
        return error("dim " + llvm::Twine(d) + " is symbolic ('" + dim.dim_param() +
                     "'); ampc binds only the first (batch) dim of a bare ONNX file: wrap the "
                     "model in a model file whose `inputs:` gives the shape");
      }
    }
    TensorType type(*dtype, dims);
    if (!type.checkedNumElements() || *type.checkedNumElements() > settings_.load.maxElements)
      return error("has " + type.str() + ", more elements than the limit");
    if (!g_.isNameFree(in.name()))
      return error("the name is used twice");
    Value *v = g_.addInput(valueName(in.name()), type, nodeLoc_);
    terms_[in.name()] = Term{v, std::nullopt, nullptr, false, false, type};
  }
  for (const auto &[name, file] : settings_.load.fixedInputs)
    if (!inputNames.count(name) || initializerNames.count(name)) {
      nodeLoc_ = Location::inFile(fileLabel_, 0, 0);
      return error("--fix-input " + name + ": the model has no input of that name");
    }
  return true;
}

const std::string *OnnxLowering::fixedInputFile(llvm::StringRef name) const {
  for (const auto &[input, file] : settings_.load.fixedInputs)
    if (input == name)
      return &file;
  return nullptr;
}

bool OnnxLowering::fixInput(llvm::StringRef name, DType dtype,
                            const onnx::TypeProto::Tensor &declared, const std::string &file) {
  NpyArray a;
  std::string err;
  if (!readNpy(file, a, err))
    return error("--fix-input " + name + ": " + err);
  if (a.isUint8 || a.dtype != dtype)
    return error("--fix-input " + name + ": '" + file + "' holds " +
                 (a.isUint8 ? std::string("u8") : std::string(dtypeName(a.dtype))) +
                 ", the input is " + dtypeName(dtype));
  bool fits = !declared.has_shape() || declared.shape().dim_size() == int(a.shape.size());
  for (int d = 0; fits && declared.has_shape() && d < declared.shape().dim_size(); ++d)
    if (declared.shape().dim(d).has_dim_value() &&
        declared.shape().dim(d).dim_value() != a.shape[d])
      fits = false;
  TensorType type(dtype, a.shape);
  if (!fits)
    return error("--fix-input " + name + ": '" + file + "' holds " + type.str() +
                 ", which does not fit the input's declared shape");
  if (a.numElements() > kMaxFoldedElements)
    return error("--fix-input " + name + ": " + type.str() + " is too large to fold");
  ConstTensor c;
  c.dtype = dtype;
  c.dims.assign(a.shape.begin(), a.shape.end());
  c.values.resize(a.numElements());
  for (int64_t k = 0; k < a.numElements(); ++k)
    c.values[k] = arrayElement(a, k);
  Term term;
  term.constant = std::move(c);
  term.type = type;
  terms_[name] = std::move(term);
  return true;
}

bool OnnxLowering::lowerNode(const onnx::NodeProto &n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return error("ops of domain '" + n.domain() + "' are not supported");
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && !terms_.count(n.input(i)))
      return error("input '" + n.input(i) + "' is not defined before this node");
  const OpTableEntry *entry = findOnnxOp(n.op_type(), opset_);
  if (!entry)
    return error("op type '" + n.op_type() + "' is not supported (docs/onnx.md lists the " +
                 llvm::Twine(supportedOnnxOps().size()) + " supported ones)");
  if (size_t(g_.numNodes()) > size_t(settings_.load.maxNodes))
    return error("the graph grows past " + llvm::Twine(settings_.load.maxNodes) + " nodes");
  return entry->build(*this, n);
}

bool OnnxLowering::checkOpTypes() {
  // One error for the whole model: a user meets every op type ampc lacks in
  // one run, not one per run.
  struct Missing {
    unsigned count = 0;
    std::string first;
  };
  llvm::StringMap<Missing> missing;
  std::vector<std::string> order;
  for (const onnx::NodeProto &n : model_.graph().node()) {
    if (findOnnxOp(n.op_type(), opset_))
      continue;
    auto [it, inserted] = missing.try_emplace(n.op_type());
    if (inserted) {
      order.push_back(n.op_type());
      it->second.first = n.name().empty()
                             ? "producing '" + (n.output_size() ? n.output(0) : "?") + "'"
                             : "'" + n.name() + "'";
    }
    ++it->second.count;
  }
  if (order.empty())
    return true;
  Location fileLoc = Location::inFile(settings_.path, 0, 0);
  unsigned nodes = 0;
  for (const std::string &op : order)
    nodes += missing[op].count;
  diag_.error(fileLoc, llvm::Twine(order.size()) + " op type" +
                           (order.size() > 1 ? "s are" : " is") + " not supported (" +
                           llvm::Twine(nodes) + " node" + (nodes > 1 ? "s" : "") +
                           "): " + llvm::join(order, ", ") + " (docs/onnx.md lists the " +
                           llvm::Twine(supportedOnnxOps().size()) + " supported ones)");
  for (const std::string &op : order) {
    const Missing &m = missing[op];
    diag_.note(fileLoc, "op type '" + op + "': " + llvm::Twine(m.count) + " node" +
                            (m.count > 1 ? "s, the first " : " ") + m.first);
  }
  return false;
}

bool OnnxLowering::run(const llvm::StringMap<Value *> &bound) {
  if (!checkOpTypes() || !declareInputs(bound))
    return false;
  const onnx::GraphProto &graph = model_.graph();
  llvm::DenseMap<const onnx::NodeProto *, PatternLowering> replaced;
  recogniseOnnxPatterns(*this, graph, replaced);
  for (const onnx::NodeProto &n : graph.node()) {
    std::string label =
        n.name().empty()
            ? "node producing '" + (n.output_size() ? n.output(0) : std::string("?")) + "'"
            : "node '" + n.name() + "'";
    nodeLoc_ = Location::inFile(fileLabel_ + ": " + label + " (op " + n.op_type() + ", opset " +
                                    std::to_string(opset_) + ")",
                                0, 0);
    if (fused_.count(&n))
      continue;
    auto it = replaced.find(&n);
    bool ok = it != replaced.end() ? it->second(*this) : lowerNode(n);
    // A builder whose registry op was refused has reported it already.
    if (!ok || diag_.hasErrors()) {
      if (!diag_.hasErrors())
        error("cannot be lowered");
      return false;
    }
  }
  for (const onnx::ValueInfoProto &o : graph.output()) {
    nodeLoc_ = Location::inFile(fileLabel_ + ": output '" + o.name() + "'", 0, 0);
    auto it = terms_.find(o.name());
    if (it == terms_.end())
      return error("no node produces it");
    Value *v = materialise(o.name(), it->second, StateKind::Buffer);
    if (!v)
      return false;
    outputs_.push_back({o.name(), v});
  }
  // An eval-mode torch export folds BatchNorm into the convolutions and
  // renames their weights; the graph then has no batchnorm left to train.
  unsigned foldedConvs = 0;
  bool hasBatchNorm = false;
  for (const onnx::NodeProto &n : graph.node()) {
    hasBatchNorm |= n.op_type() == "BatchNormalization";
    foldedConvs += n.op_type() == "Conv" && n.input_size() > 1 &&
                   llvm::StringRef(n.input(1)).startswith("onnx::Conv_");
  }
  Location fileLoc = Location::inFile(settings_.path, 0, 0);
  if (!hasBatchNorm && foldedConvs)
    diag_.add(settings_.training ? Severity::Warning : Severity::Note, fileLoc,
              llvm::Twine(foldedConvs) + " convolution" + (foldedConvs > 1 ? "s have" : " has") +
                  " weights the exporter renamed (onnx::Conv_*) and the graph has no "
                  "BatchNormalization: batchnorm was probably folded into them (an eval-mode "
                  "export)" +
                  (settings_.training ? "; training it trains without batchnorm (export with "
                                        "training=TrainingMode.TRAINING to keep it)"
                                      : "; inference is exact"));
  for (const std::string &n : notes_)
    diag_.add(Severity::Note, fileLoc, "recognised " + n);
  for (const std::string &f : settings_.frozen)
    if (!terms_.count(f) || !terms_.find(f)->second.initializer) {
      diag_.error(Location::inFile(settings_.path, 0, 0),
                  "frozen: '" + f + "' is not an initializer of the ONNX model");
      return false;
    }
  return true;
}

} // namespace onnxfe

void registerOnnxTensorFiles() { onnxfe::registerOnnxTensorReader(); }

std::vector<std::string> supportedOnnxOpTypes() { return onnxfe::supportedOnnxOps(); }

static std::string stemOf(llvm::StringRef path) {
  std::string stem = llvm::sys::path::stem(path).str();
  std::string out;
  for (char c : stem)
    out += (llvm::isAlnum(c) || c == '_' || c == '.' || c == '-') ? c : '_';
  return out.empty() ? "onnx_model" : out;
}

std::unique_ptr<Graph> loadOnnxModel(llvm::StringRef path, DiagnosticEngine &diag,
                                     const LoadOptions &opts) {
  registerOnnxTensorFiles();
  onnx::ModelProto model;
  if (!onnxfe::readOnnxModel(path, model, diag))
    return nullptr;
  OnnxImportSettings settings;
  settings.path = path.str();
  settings.pathInInit = llvm::sys::path::filename(path).str();
  settings.training = false;
  settings.load = opts;
  auto g = std::make_unique<Graph>(stemOf(path));
  onnxfe::OnnxLowering lowering(*g, diag, model, settings);
  if (!lowering.run({}))
    return nullptr;
  for (const auto &[name, v] : lowering.outputs())
    g->addOutput(v);
  g->meta()["model"] = Attribute(g->name());
  // The batch: dim 0 of the first input that has one (a scalar input has none).
  int64_t batch = 1;
  for (const Value *in : g->inputs())
    if (in->type().rank() > 0) {
      batch = in->type().dim(0);
      break;
    }
  g->meta()["batch"] = Attribute(batch);
  g->meta()["init.seed"] = Attribute(int64_t(0));
  g->meta()["source.onnx"] = Attribute(settings.pathInInit);
  if (!verifyGraph(*g, diag))
    return nullptr;
  return g;
}

bool lowerOnnxInto(Graph &g, const OnnxImportSettings &settings,
                   const llvm::StringMap<Value *> &inputs, const Location &where,
                   DiagnosticEngine &diag, llvm::StringMap<Value *> &outputs) {
  registerOnnxTensorFiles();
  onnx::ModelProto model;
  if (!onnxfe::readOnnxModel(settings.path, model, diag)) {
    diag.note(where, "in the ONNX model named here");
    return false;
  }
  onnxfe::OnnxLowering lowering(g, diag, model, settings);
  if (!lowering.run(inputs))
    return false;
  for (const auto &[name, v] : lowering.outputs())
    outputs[name] = v;
  g.meta()["source.onnx"] = Attribute(settings.pathInInit);
  if (!lowering.outputs().empty())
    g.meta()["source.onnx.first_output"] = Attribute(lowering.outputs().front().first);
  return true;
}

} // namespace ampc
