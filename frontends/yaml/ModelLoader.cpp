//===- ModelLoader.cpp - The top level of a model file ----------------------===//
//
// Order of work: model, batch, inputs, blocks, layers, loss, init (seed and
// parameter files), optimizer, train; then the verifier. The first problem
// stops the import: later checks would mostly report its consequences.
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ModelLoader.h"
#include "frontends/yaml/GraphYamlReader.h"
#include "frontends/yaml/Lowering.h"
#include "frontends/yaml/YamlLimits.h"
#if AMPC_HAVE_ONNX
#include "frontends/onnx/OnnxImporter.h"
#endif

#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "ir/support/NpyFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <exception>

namespace ampc {

namespace {
using namespace yamlfe;

constexpr llvm::StringRef kTopLevelKeys[] = {"model",  "batch", "inputs",    "init",  "blocks",
                                             "layers", "loss",  "optimizer", "train", "amp"};
constexpr llvm::StringRef kLossKinds[] = {"mse_loss", "cross_entropy", "binary_cross_entropy"};

/// "[2,3]" for messages.
std::string shapeString(llvm::ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += ',';
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

class ModelImporter {
public:
  ModelImporter(Reader &r, const LoadOptions &opts, llvm::StringRef baseDir)
      : r_(r), opts_(opts), baseDir_(baseDir.str()) {}

  std::unique_ptr<Graph> run(const YAML::Node &root) {
    auto g = std::make_unique<Graph>();
    g->setLoc(r_.fileLoc());
    ModelContext ctx{r_, *g, opts_, {}};
    if (!import(Bound{root}, ctx))
      return nullptr;
    if (!verifyGraph(*g, r_.diag()))
      return nullptr;
    return g;
  }

private:
  struct OnnxWrapper {
    std::string file;
    std::vector<std::string> frozen;
    Location loc, fileLoc;
  };
  std::optional<OnnxWrapper> onnx_;

  const MapEntry *find(llvm::StringRef key) const {
    for (const MapEntry &e : top_)
      if (e.key == key)
        return &e;
    return nullptr;
  }
  const MapEntry *require(llvm::StringRef key) {
    const MapEntry *e = find(key);
    if (!e)
      r_.error(rootLoc_, "missing required key '" + key + "'");
    return e;
  }

  bool import(const Bound &root, ModelContext &ctx) {
    Graph &g = ctx.g;
    rootLoc_ = root.node.IsDefined() && root.node.IsMap() ? r_.loc(root) : r_.fileLoc();
    if (!root.node.IsMap())
      return r_.error(root.node.IsNull() ? r_.fileLoc() : r_.loc(root),
                      "a model file must be a map of keys (model, batch, inputs, "
                      "layers, ...), got " +
                          Reader::describe(root.node));
    if (!r_.readMap(root, "the model file", top_))
      return false;
    if (!r_.checkKnownKeys(top_, kTopLevelKeys, "key", ""))
      return false;

    const MapEntry *model = require("model");
    if (!model)
      return false;
    std::string name;
    if (model->value.node.IsMap()) {
      if (!readOnnxWrapper(*model, name))
        return false;
    } else if (!r_.readString(model->value, "'model'", name)) {
      return false;
    }
    if (!isValidName(name))
      return r_.error(model->value,
                      "invalid model name '" + name + "': use letters, digits, '_', '.' and '-'");
    g.setName(name);
    g.meta()["model"] = Attribute(name);

    if (!readBatch(g) || !readInputs(ctx))
      return false;
    if (const MapEntry *blocks = find("blocks"))
      if (!readBlocks(ctx, blocks->value))
        return false;

    Value *last = nullptr;
    llvm::StringMap<Value *> names;
    if (onnx_) {
      // `layers:` after a wrapped graph continue from its outputs (select
      // one, reshape it before the loss).
      if (!lowerOnnx(ctx, last, names))
        return false;
      if (const MapEntry *layers = find("layers"))
        if (!lowerLayers(ctx, layers->value, last, names))
          return false;
    } else {
      const MapEntry *layers = require("layers");
      if (!layers || !lowerLayers(ctx, layers->value, last, names))
        return false;
    }
    if (const MapEntry *loss = find("loss")) {
      if (!readLoss(ctx, *loss, names))
        return false;
    } else {
      g.addOutput(last);
    }
    g.meta()["init.seed"] = Attribute(int64_t(0));
    if (const MapEntry *init = find("init"))
      if (!readInit(g, *init))
        return false;
    if (const MapEntry *opt = find("optimizer"))
      if (!readOptimizer(r_, opt->value, g, g.meta()))
        return false;
    if (const MapEntry *train = find("train"))
      if (!readTrain(r_, train->value, g, g.meta()))
        return false;
    if (const MapEntry *amp = find("amp"))
      if (!readAmp(r_, amp->value, g.meta()))
        return false;
    return true;
  }

  /// `model: {onnx: FILE, name: NAME, frozen: [initializer, ...]}`.
  bool readOnnxWrapper(const MapEntry &model, std::string &name) {
    MapEntries fields;
    if (!r_.readMap(model.value, "'model'", fields) ||
        !r_.checkKnownKeys(fields, {"onnx", "name", "frozen"}, "key", " in 'model'"))
      return false;
    OnnxWrapper w;
    w.loc = r_.loc(model.value);
    for (const MapEntry &f : fields) {
      if (f.key == "onnx") {
        if (!r_.readString(f.value, "'onnx'", w.file))
          return false;
        w.fileLoc = r_.loc(f.value);
      } else if (f.key == "name") {
        if (!r_.readString(f.value, "'name'", name))
          return false;
      } else {
        std::vector<Bound> items;
        if (!r_.readStringList(f.value, "'frozen'", items))
          return false;
        for (const Bound &b : items) {
          std::string s;
          if (!r_.readString(b, "a frozen initializer", s))
            return false;
          w.frozen.push_back(s);
        }
      }
    }
    if (w.file.empty())
      return r_.error(model.value, "'model' as a map needs 'onnx: FILE' (the ONNX graph it wraps)");
    if (name.empty()) {
      name = llvm::sys::path::stem(w.file).str();
      for (char &c : name)
        if (!llvm::isAlnum(c) && c != '_' && c != '.' && c != '-')
          c = '_';
    }
    onnx_ = std::move(w);
    return true;
  }

  /// The wrapped ONNX graph in place of `layers:`: its inputs are the
  /// model file's inputs of the same names; its outputs are names for
  /// `loss:`, the first of them the model's output.
  bool lowerOnnx(ModelContext &ctx, Value *&last, llvm::StringMap<Value *> &names) {
#if AMPC_HAVE_ONNX
    OnnxImportSettings settings;
    llvm::SmallString<256> path;
    if (llvm::sys::path::is_absolute(onnx_->file)) {
      path = onnx_->file;
    } else {
      path = baseDir_;
      llvm::sys::path::append(path, onnx_->file);
    }
    settings.path = std::string(path);
    settings.pathInInit = onnx_->file;
    settings.training = find("loss") != nullptr;
    settings.frozen = onnx_->frozen;
    settings.load = opts_;
    llvm::StringMap<Value *> inputs;
    for (Value *in : ctx.g.inputs())
      inputs[in->name()] = in;
    llvm::StringMap<Value *> outputs;
    if (!lowerOnnxInto(ctx.g, settings, inputs, onnx_->fileLoc, r_.diag(), outputs))
      return false;
    for (Value *in : ctx.g.inputs())
      names[in->name()] = in;
    for (const auto &o : outputs)
      names[o.getKey()] = o.getValue();
    // The first ONNX output (lowerOnnxInto records its name in meta).
    if (outputs.empty())
      return r_.error(onnx_->fileLoc, "the ONNX graph has no outputs");
    last = outputs.begin()->getValue();
    if (auto first = ctx.g.meta().find("source.onnx.first_output"); first != ctx.g.meta().end())
      if (Value *v = outputs.lookup(first->second.getString()))
        last = v;
    return true;
#else
    (void)ctx;
    (void)last;
    (void)names;
    return r_.error(onnx_->fileLoc, "this ampc was built without the ONNX frontend (configure "
                                    "with -DAMPC_WITH_ONNX=ON and libonnx-dev installed)");
#endif
  }

  bool readBatch(Graph &g) {
    const MapEntry *batch = require("batch");
    if (!batch)
      return false;
    int64_t b = 0;
    if (!r_.readInt(batch->value, "'batch'", b))
      return false;
    if (b < 1)
      return r_.error(batch->value, "'batch' must be a positive integer, got " + llvm::Twine(b));
    if (opts_.batchOverride) {
      b = *opts_.batchOverride;
      if (b < 1)
        return r_.error(batch->value,
                        "the batch override must be a positive integer, got " + llvm::Twine(b));
    }
    r_.setBatch(b);
    g.meta()["batch"] = Attribute(b);
    return true;
  }

  bool readInputs(ModelContext &ctx) {
    const MapEntry *inputs = require("inputs");
    if (!inputs)
      return false;
    MapEntries entries;
    if (!r_.readMap(inputs->value, "'inputs'", entries))
      return false;
    if (entries.empty())
      return r_.error(inputs->value, "'inputs' must declare at least one input");
    for (const MapEntry &e : entries) {
      if (!isValidName(e.key))
        return r_.error(e.keyNode, "invalid input name '" + e.key +
                                       "': use letters, digits, '_', '.' and '-'");
      MapEntries fields;
      std::string what = "input '" + e.key + "'";
      if (!r_.readMap(e.value, what, fields) ||
          !r_.checkKnownKeys(fields, {"shape", "dtype"}, "key", " in " + what))
        return false;
      const MapEntry *shape = nullptr, *dtype = nullptr;
      for (const MapEntry &f : fields)
        (f.key == "shape" ? shape : dtype) = &f;
      if (!shape)
        return r_.error(e.keyNode, what + " has no 'shape'");
      std::vector<int64_t> dims;
      if (!r_.readIntList(shape->value, "'shape'", dims, /*allowBatch=*/true))
        return false;
      for (size_t i = 0; i < dims.size(); ++i)
        if (dims[i] < 1)
          return r_.error(shape->value.node[i], "dimension " + llvm::Twine(i) + " of " + what +
                                                    " must be positive, got " +
                                                    llvm::Twine(dims[i]));
      DType t = DType::F32;
      if (dtype) {
        Attribute a;
        if (!r_.readAttribute(dtype->value, "dtype", AttrType::DType, a))
          return false;
        t = a.getDType();
      }
      TensorType type(t, dims);
      Location loc = r_.loc(e.keyNode);
      if (!checkElementCount(ctx, type, what, r_.loc(shape->value)))
        return false;
      ctx.g.addInput(e.key, type, loc);
    }
    return true;
  }

  /// `loss:` is one loss, `{cross_entropy: {input: logits, target: y}}`, or
  /// a list of them with optional weights, summed:
  ///   loss:
  ///     - cross_entropy: {input: logits, target: y}
  ///     - mse_loss: {input: recon, target: x}
  ///       weight: 0.5
  /// The terms are %loss.0, %loss.1, ... (a weighted one scaled into
  /// %loss.<k>.weighted) and their sum is %loss; every one of these nodes has
  /// role loss, so they run in fp32 and inference drops them.
  bool readLoss(ModelContext &ctx, const MapEntry &lossEntry,
                const llvm::StringMap<Value *> &names) {
    if (!ctx.g.isNameFree("loss"))
      return r_.error(lossEntry.keyNode,
                      "the name 'loss' is taken by a layer; the loss result needs it");
    if (!lossEntry.value.node.IsSequence()) {
      MapEntry loss;
      if (!r_.readOneKeyMap(lossEntry.value, "'loss'", loss))
        return false;
      Node *node = readLossTerm(ctx, loss, names, "loss");
      if (!node)
        return false;
      ctx.g.addOutput(node->result(0));
      ctx.g.meta()["loss"] = Attribute(loss.key);
      return true;
    }
    const YAML::Node &list = lossEntry.value.node;
    if (list.size() == 0)
      return r_.error(lossEntry.value, "'loss' must be one loss or a non-empty list of losses");
    std::vector<Value *> terms;
    std::string kinds;
    for (size_t k = 0; k < list.size(); ++k) {
      Bound item{list[k], lossEntry.value.env, lossEntry.value.fallback};
      std::string what = "loss " + std::to_string(k);
      MapEntries fields;
      if (!r_.readMap(item, "'" + what + "'", fields))
        return false;
      const MapEntry *kind = nullptr;
      double weight = 1.0;
      for (const MapEntry &f : fields) {
        if (f.key == "weight") {
          if (!r_.readFloat(f.value, "'weight'", weight))
            return false;
          if (!std::isfinite(weight))
            return r_.error(f.value, "'weight' of " + what + " must be finite");
          continue;
        }
        if (kind)
          return r_.error(f.keyNode, what + " has two keys '" + kind->key + "' and '" + f.key +
                                         "'; give one loss and an optional 'weight'");
        kind = &f;
      }
      if (!kind)
        return r_.error(item, what + " names no loss; expected mse_loss, cross_entropy or "
                                     "binary_cross_entropy");
      std::string name = "loss." + std::to_string(k);
      if (!ctx.g.isNameFree(name))
        return r_.error(kind->keyNode,
                        "the name '" + name + "' is taken by a layer; " + what + " needs it");
      Node *node = readLossTerm(ctx, *kind, names, name);
      if (!node)
        return false;
      Value *term = node->result(0);
      ctx.g.addOutput(term); // so a trainer can log each loss
      if (weight != 1.0) {
        Node *scaled = buildNode(ctx.g, OpRegistry::builtin().get(OpKind::Scale), {term},
                                 {{"factor", Attribute(weight)}}, node->loc(), r_.diag(),
                                 {ctx.g.uniqueName(name + ".weighted")});
        if (!scaled)
          return false;
        scaled->setRole(NodeRole::Loss);
        term = scaled->result(0);
      }
      terms.push_back(term);
      kinds += (kinds.empty() ? "" : ",") + kind->key;
    }
    // The sum, left to right (lossTerms reads the terms back in this order).
    Value *total = terms[0];
    for (size_t k = 1; k < terms.size(); ++k) {
      std::string name = k + 1 == terms.size() ? "loss" : ctx.g.uniqueName("loss.sum");
      Node *add = buildNode(ctx.g, OpRegistry::builtin().get(OpKind::Add), {total, terms[k]}, {},
                            r_.loc(lossEntry.keyNode), r_.diag(), {name});
      if (!add)
        return false;
      add->setRole(NodeRole::Loss);
      total = add->result(0);
    }
    if (terms.size() == 1) {
      // One term: %loss is that term (its weight applied), as for `loss: {...}`.
      Node *same =
          buildNode(ctx.g, OpRegistry::builtin().get(OpKind::Scale), {total},
                    {{"factor", Attribute(1.0)}}, r_.loc(lossEntry.keyNode), r_.diag(), {"loss"});
      if (!same)
        return false;
      same->setRole(NodeRole::Loss);
      total = same->result(0);
    }
    ctx.g.addOutput(total);
    ctx.g.meta()["loss"] = Attribute(kinds);
    return true;
  }

  /// An error's `false` as readLossTerm's null result.
  static Node *none(bool) { return nullptr; }

  /// One loss `{kind: {input: a, target: b, <attrs>}}`, built under `name`
  /// with role loss.
  Node *readLossTerm(ModelContext &ctx, const MapEntry &loss, const llvm::StringMap<Value *> &names,
                     const std::string &name) {
    if (!llvm::is_contained(kLossKinds, loss.key))
      return none(r_.error(loss.keyNode, "unknown loss '" + loss.key +
                                             "'; expected mse_loss, cross_entropy or "
                                             "binary_cross_entropy"));
    const OpInfo *op = OpRegistry::builtin().lookup(loss.key);
    assert(op && "loss kinds are built-in ops");
    MapEntries args;
    std::vector<llvm::StringRef> known = {"input", "target"};
    for (const AttrSpec &a : op->attrs)
      known.push_back(a.name);
    if (!r_.readMap(loss.value, "the arguments of " + loss.key, args) ||
        !r_.checkKnownKeys(args, known, "argument", " for " + loss.key))
      return nullptr;
    Location loc = r_.loc(loss.keyNode);
    llvm::SmallVector<Value *, 2> operands;
    for (llvm::StringRef role : {"input", "target"}) {
      const MapEntry *e = nullptr;
      for (const MapEntry &a : args)
        if (a.key == role)
          e = &a;
      if (!e)
        return none(r_.error(loc, "missing argument '" + role + "' for " + loss.key));
      std::string ref;
      if (!r_.readString(e->value, "'" + role + "'", ref))
        return nullptr;
      Value *v = names.lookup(ref);
      if (!v)
        if (Value *any = ctx.g.lookup(ref); any && !any->isState())
          v = any;
      if (!v)
        return none(
            r_.error(e->value, "unknown name '" + ref + "' (not a graph input or a layer)"));
      operands.push_back(v);
    }
    AttrMap attrs;
    for (const MapEntry &a : args) {
      const AttrSpec *spec = op->findAttr(a.key);
      if (!spec)
        continue;
      Attribute value;
      if (!r_.readAttribute(a.value, a.key, spec->type, value))
        return nullptr;
      attrs[a.key] = std::move(value);
    }
    if (loss.key == "cross_entropy" && !flattenTokens(ctx, operands, loc))
      return nullptr;
    Node *node = buildNode(ctx.g, *op, operands, std::move(attrs), loc, r_.diag(), {name});
    if (node)
      node->setRole(NodeRole::Loss);
    return node;
  }

  /// A language model's cross entropy: logits [B, T, ..., V] (classes last)
  /// against targets [B, T, ...] are flattened to [B*T*..., V] and
  /// [B*T*...], so the loss is the mean over every token (but those of
  /// ignore_index), as F.cross_entropy(logits.view(-1, V), y.view(-1)).
  bool flattenTokens(ModelContext &ctx, llvm::SmallVectorImpl<Value *> &operands,
                     const Location &loc) {
    const TensorType &logits = operands[0]->type(), &target = operands[1]->type();
    if (logits.rank() <= 2)
      return true;
    if (target.rank() + 1 != logits.rank() || target.dims() != logits.dims().drop_back()) {
      r_.diag().error(loc, "cross_entropy: input " + logits.str() +
                               " has its classes in the last dim, so target must have its "
                               "other dims, got " +
                               target.str());
      return false;
    }
    int64_t tokens = 1;
    for (int64_t d : target.dims())
      tokens *= d;
    auto reshape = [&](Value *v, std::vector<int64_t> dims) -> Value * {
      Node *n = buildNode(ctx.g, OpRegistry::builtin().get(OpKind::Reshape), {v},
                          {{"shape", Attribute(std::move(dims))}}, loc, r_.diag());
      return n ? n->result(0) : nullptr;
    };
    operands[0] = reshape(operands[0], {tokens, logits.dims().back()});
    operands[1] = operands[0] ? reshape(operands[1], {tokens}) : nullptr;
    return operands[1] != nullptr;
  }

  bool readInit(Graph &g, const MapEntry &init) {
    MapEntries fields;
    if (!r_.readMap(init.value, "'init'", fields) ||
        !r_.checkKnownKeys(fields, {"seed", "from"}, "key", " in 'init'"))
      return false;
    int64_t seed = 0;
    const MapEntry *from = nullptr;
    for (const MapEntry &f : fields) {
      if (f.key == "from") {
        from = &f;
        continue;
      }
      if (!r_.readInt(f.value, "'seed'", seed))
        return false;
    }
    g.meta()["init.seed"] = Attribute(seed);
    if (!from)
      return true;
    std::string folder;
    if (!r_.readString(from->value, "'from'", folder))
      return false;
    g.meta()["init.from"] = Attribute(folder);
    return readParamFiles(g, folder, r_.loc(from->value));
  }

  /// Points every parameter (and every buffer that has a file) at
  /// <folder>/<name>.npy after checking the file's header against it.
  bool readParamFiles(Graph &g, llvm::StringRef folder, const Location &fromLoc) {
    llvm::SmallString<256> dir;
    if (llvm::sys::path::is_absolute(folder)) {
      dir = folder;
    } else {
      dir = baseDir_;
      llvm::sys::path::append(dir, folder);
    }
    if (!llvm::sys::fs::is_directory(dir))
      return r_.error(fromLoc, "init.from folder '" + dir + "' does not exist");
    for (Value *v : g.state()) {
      llvm::SmallString<256> file(dir);
      llvm::sys::path::append(file, v->name() + ".npy");
      bool required = v->stateKind() == StateKind::Parameter;
      if (!llvm::sys::fs::exists(file)) {
        if (!required)
          continue;
        return r_.error(fromLoc, "missing file '" + file + "' for parameter '" + v->name() + "'");
      }
      NpyArray header;
      std::string err;
      if (!readNpyHeader(file, header, err))
        return r_.error(fromLoc, err);
      if (header.isUint8 || header.dtype != v->dtype())
        return r_.error(fromLoc, "'" + file + "' holds " +
                                     (header.isUint8 ? "u8" : dtypeName(header.dtype).str()) +
                                     " data, parameter '" + v->name() + "' needs " +
                                     dtypeName(v->dtype()));
      if (llvm::ArrayRef<int64_t>(header.shape) != v->type().dims())
        return r_.error(fromLoc, "'" + file + "' has shape " + shapeString(header.shape) +
                                     ", parameter '" + v->name() + "' needs " +
                                     shapeString(v->type().dims()));
      v->setInit(InitSpec{InitSpec::Kind::File, 0, 0, std::string(file)});
    }
    return true;
  }

  Reader &r_;
  const LoadOptions &opts_;
  std::string baseDir_;
  MapEntries top_;
  Location rootLoc_;
};

/// The 1-based column of the first tab in the indentation of line `line`
/// (0-based) of `text`, or 0 when that line's indentation has no tab or the
/// line holds only whitespace.
unsigned tabColumnInIndentation(llvm::StringRef text, int line) {
  if (line < 0)
    return 0;
  llvm::SmallVector<llvm::StringRef, 0> lines;
  text.split(lines, '\n', /*MaxSplit=*/line + 1);
  if (static_cast<size_t>(line) >= lines.size())
    return 0;
  llvm::StringRef l = lines[line];
  size_t indentEnd = l.find_first_not_of(" \t\r");
  if (indentEnd == llvm::StringRef::npos)
    return 0;
  size_t tab = l.take_front(indentEnd).find('\t');
  return tab == llvm::StringRef::npos ? 0 : static_cast<unsigned>(tab) + 1;
}

} // namespace

std::unique_ptr<Graph> loadModelString(llvm::StringRef text, llvm::StringRef bufferName,
                                       DiagnosticEngine &diag, const LoadOptions &opts,
                                       llvm::StringRef baseDir, YamlContent *content) {
  Reader r(diag, Location::inFile(bufferName.str(), 1, 1));
  // yaml-cpp reports malformed input (and misuse) by throwing; nothing may
  // escape this function.
  try {
    if (!yamlfe::checkYamlLimits(text, r, opts))
      return nullptr;
    YAML::Node root = YAML::Load(text.str());
    // What `ampc --emit yaml` wrote is a graph, read back as written.
    bool graph = isGraphYaml(root);
    if (content)
      *content = graph ? YamlContent::Graph : YamlContent::Model;
    if (graph)
      return readGraphYaml(root, r, opts);
    return ModelImporter(r, opts, baseDir).run(root);
  } catch (const YAML::Exception &e) {
    // yaml-cpp's messages for a tab in indentation ("illegal map value",
    // "illegal block entry", ...) do not name the cause. YAML allows tabs
    // elsewhere (inside flow collections and block scalars, between tokens),
    // so the tab is blamed only when the line yaml-cpp stopped on is
    // indented with one.
    if (unsigned column = tabColumnInIndentation(text, e.mark.line))
      r.error(r.fileLoc().at(uint32_t(e.mark.line) + 1, column),
              "tabs are not allowed for indentation in YAML; use spaces");
    else
      r.error(r.loc(e.mark), "invalid YAML: " + e.msg);
  } catch (const std::exception &e) {
    r.error(r.fileLoc(), llvm::Twine("cannot read the model file: ") + e.what());
  }
  return nullptr;
}

std::unique_ptr<Graph> loadModelFile(llvm::StringRef path, DiagnosticEngine &diag,
                                     const LoadOptions &opts, YamlContent *content) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    diag.error(Location(), "cannot open model file '" + path + "': " + buffer.getError().message());
    return nullptr;
  }
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  return loadModelString((*buffer)->getBuffer(), path, diag, opts, dir.empty() ? "." : dir,
                         content);
}

} // namespace ampc
