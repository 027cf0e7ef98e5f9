//===- Layers.cpp - `layers:` and `blocks:` to graph nodes ------------------===//
//
// Each layer is a one-key map `<kind>: {args}`. A kind is a block or a
// registry op; ops with parameters also have a ParamBuilder. Everything else
// about an op layer (its attributes, their types and defaults, the shape
// checks) comes from the op's registry row, so a new param-free op needs no
// change here.
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/Lowering.h"
#include "frontends/yaml/ParamBuilders.h"

#include "ir/Builder.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/xxhash.h"

namespace ampc::yamlfe {

namespace {

/// Keys every layer may carry, besides its own arguments.
constexpr llvm::StringRef kCommonKeys[] = {"name", "input", "inputs", "precision", "trainable"};

/// The name a block's layers use for the block's (first) input.
constexpr llvm::StringRef kBlockIn = "block_in";

/// One list of layers being lowered: the top level or one block instance.
struct Scope {
  /// Prepended to local names to make value names: "" or "c1.".
  std::string prefix;
  /// Local names (layers of this scope, `block_in`, graph inputs at top level).
  llvm::StringMap<Value *> names;
  /// Layers of each kind seen so far, for default names `<kind>_<n>`.
  llvm::StringMap<unsigned> kindCounts;
  /// The previous layer's output: the default input of the next.
  Value *prev = nullptr;
  const Env *env = nullptr;
  bool frozen = false;
  PrecisionOverride precision = PrecisionOverride::None;
  /// The blocks being instantiated around this scope, outermost first.
  std::vector<std::string> activeBlocks;
  bool topLevel = true;
};

/// The keys every layer may carry, read.
struct LayerHeader {
  std::string kind;
  Location loc;
  Bound layerNode; ///< the `kind` key, for errors about the layer as a whole
  std::string localName;
  Bound nameNode;
  std::vector<Value *> inputs;
  /// False when `inputs` holds only the default (the previous layer).
  bool inputsGiven = false;
  std::optional<PrecisionOverride> precision;
  std::optional<bool> trainable;
};

class LayerLowering {
public:
  explicit LayerLowering(ModelContext &ctx) : ctx_(ctx), r_(ctx.r), g_(ctx.g) {}

  bool lowerList(const Bound &layers, Scope &scope) {
    Bound list;
    if (!r_.resolve(layers, list))
      return false;
    if (list.node.IsSequence() && list.node.size() == 0)
      return r_.error(list, "'layers' must list at least one layer, got an empty list");
    if (!list.node.IsSequence())
      return r_.error(list,
                      "'layers' must be a non-empty list, got " + Reader::describe(list.node));
    for (const YAML::Node &item : list.node)
      if (!lowerLayer(Bound{item, list.env, list.fallback}, scope))
        return false;
    return true;
  }

private:
  bool lowerLayer(const Bound &item, Scope &scope) {
    // Checked before each layer, so a file whose blocks fan out to billions
    // of layers stops here instead of exhausting memory.
    if (g_.numNodes() >= uint64_t(ctx_.opts.maxNodes))
      return r_.error(item, "the layers expand to more than " + llvm::Twine(ctx_.opts.maxNodes) +
                                " graph nodes; raise the limit with --max-nodes");
    MapEntry layer;
    if (!r_.readOneKeyMap(item, "a layer", layer))
      return false;
    LayerHeader h;
    h.kind = layer.key;
    h.loc = r_.loc(layer.keyNode);
    h.layerNode = Bound{layer.keyNode, scope.env};

    auto block = ctx_.blocks.find(h.kind);
    const BlockDef *def = block == ctx_.blocks.end() ? nullptr : &block->second;
    const OpInfo *op = def ? nullptr : OpRegistry::builtin().lookup(h.kind);
    if (!def && !op)
      return unknownKind(layer.keyNode, h.kind);

    MapEntries args;
    if (!r_.readMap(layer.value, "the arguments of " + h.kind, args))
      return false;
    const ParamBuilder *builder = op ? findParamBuilder(h.kind) : nullptr;
    std::vector<llvm::StringRef> known(std::begin(kCommonKeys), std::end(kCommonKeys));
    if (def) {
      known.insert(known.end(), def->params.begin(), def->params.end());
    } else {
      if (builder)
        for (const BuilderArg &a : builder->args)
          known.push_back(a.name);
      for (const AttrSpec &a : op->attrs)
        if (!builder || !llvm::is_contained(builder->hiddenAttrs, a.name))
          known.push_back(a.name);
    }
    std::string suffix = " for " + (def ? "block '" + h.kind + "'" : h.kind);
    if (!r_.checkKnownKeys(args, known, "argument", suffix))
      return false;
    if (!readHeader(args, scope, h))
      return false;
    if (def)
      return instantiateBlock(*def, args, h, scope);
    return lowerOp(*op, builder, args, h, scope);
  }

  bool unknownKind(const YAML::Node &keyNode, llvm::StringRef kind) {
    std::vector<std::string> storage;
    for (const OpInfo *info : OpRegistry::builtin().all())
      storage.push_back(info->name);
    for (const auto &b : ctx_.blocks)
      storage.push_back(b.getKey().str());
    std::vector<llvm::StringRef> candidates(storage.begin(), storage.end());
    std::string hint = Reader::closest(kind, candidates);
    return r_.error(keyNode, "unknown op or block '" + kind + "'" +
                                 (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  }

  static const MapEntry *find(const MapEntries &entries, llvm::StringRef key) {
    for (const MapEntry &e : entries)
      if (e.key == key)
        return &e;
    return nullptr;
  }

  /// Reads name, input(s), precision and trainable; picks the default name.
  bool readHeader(const MapEntries &args, Scope &scope, LayerHeader &h) {
    unsigned ordinal = scope.kindCounts[h.kind]++;
    if (const MapEntry *e = find(args, "name")) {
      if (!r_.readString(e->value, "'name'", h.localName) || !r_.resolve(e->value, h.nameNode))
        return false;
      if (!isValidName(h.localName))
        return r_.error(h.nameNode, "invalid name '" + h.localName +
                                        "': use letters, digits, '_', '.' and '-'");
    } else {
      h.localName = h.kind + "_" + std::to_string(ordinal);
      h.nameNode = h.layerNode;
    }
    if (scope.names.count(h.localName) || !g_.isNameFree(scope.prefix + h.localName))
      return r_.error(h.nameNode, "duplicate name '" + h.localName + "'");

    const MapEntry *input = find(args, "input"), *inputs = find(args, "inputs");
    if (input && inputs)
      return r_.error(inputs->keyNode, "give 'input' or 'inputs', not both");
    h.inputsGiven = input || inputs;
    if (input || inputs) {
      const MapEntry *e = input ? input : inputs;
      std::vector<Bound> refs;
      if (!r_.readStringList(e->value, "'" + e->key + "'", refs))
        return false;
      if (refs.empty())
        return r_.error(e->value, "'inputs' must name at least one value");
      for (const Bound &ref : refs) {
        Value *v = lookup(scope, ref);
        if (!v)
          return false;
        h.inputs.push_back(v);
      }
    } else {
      assert(scope.prev && "a scope starts with a previous value");
      h.inputs.push_back(scope.prev);
    }

    if (const MapEntry *e = find(args, "precision")) {
      std::string p;
      Bound v;
      if (!r_.resolve(e->value, v) || !r_.readString(v, "'precision'", p))
        return false;
      if (p == "fp32")
        h.precision = PrecisionOverride::Fp32;
      else if (p == "half")
        h.precision = PrecisionOverride::Half;
      else
        return r_.error(v, "precision must be fp32 or half, got '" + p + "'");
    }
    if (const MapEntry *e = find(args, "trainable")) {
      bool t = true;
      if (!r_.readBool(e->value, "'trainable'", t))
        return false;
      h.trainable = t;
    }
    return true;
  }

  Value *lookup(Scope &scope, const Bound &ref) {
    llvm::StringRef name = ref.node.Scalar();
    if (Value *v = scope.names.lookup(name))
      return v;
    // Graph inputs are visible everywhere; at the top level so is any value
    // by its full name (e.g. "c1.conv2d_0" inside block instance c1).
    if (Value *v = g_.lookup(name))
      if (v->isInput() || (scope.topLevel && v->isResult()))
        return v;
    std::vector<llvm::StringRef> candidates;
    for (const auto &entry : scope.names)
      candidates.push_back(entry.getKey());
    llvm::sort(candidates);
    std::string hint = Reader::closest(name, candidates);
    r_.error(ref, "unknown name '" + name + "' (not a graph input or an earlier layer" +
                      (scope.topLevel ? "" : " of this block") + ")" +
                      (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    return nullptr;
  }

  /// Reads the op attributes the layer gives (by the row's types).
  bool readOpAttrs(const OpInfo &op, const MapEntries &args, AttrMap &attrs) {
    for (const MapEntry &e : args) {
      const AttrSpec *spec = op.findAttr(e.key);
      if (!spec || llvm::is_contained(kCommonKeys, e.key))
        continue;
      Attribute a;
      if (!r_.readAttribute(e.value, e.key, spec->type, a))
        return false;
      attrs[e.key] = std::move(a);
    }
    return true;
  }

  bool lowerOp(const OpInfo &op, const ParamBuilder *builder, const MapEntries &args,
               LayerHeader &h, Scope &scope) {
    AttrMap attrs;
    if (!readOpAttrs(op, args, attrs))
      return false;
    std::string fullName = scope.prefix + h.localName;
    std::vector<std::string> names = {fullName};
    llvm::SmallVector<Value *, 4> operands;
    ParamPlan plan;
    if (builder) {
      if (!planParams(op, *builder, args, attrs, h, scope, plan, operands))
        return false;
      for (const std::string &s : plan.extraResultSuffixes)
        names.push_back(fullName + "." + s);
      for (auto &[k, v] : plan.attrs)
        attrs[k] = v;
    } else {
      // A random op (one with a `seed` attribute) that the file leaves
      // unseeded gets a seed from its layer's full name: two dropout layers
      // then draw independent masks, and the same file always the same ones.
      if (op.findAttr("seed") && !attrs.count("seed"))
        attrs["seed"] = Attribute(static_cast<int64_t>(llvm::xxHash64(fullName) >> 33));
      // An op without operands (fill) reads no previous layer.
      if (h.inputsGiven || op.maxOperands() > 0)
        operands.assign(h.inputs.begin(), h.inputs.end());
      // A custom op may have several results: name the extra ones
      // "<name>.1", "<name>.2", ... (buildNode reports any other problem).
      unsigned n = countResults(op, operands, attrs);
      for (unsigned i = 1; i < n; ++i)
        names.push_back(fullName + "." + std::to_string(i));
    }

    Node *node = buildNode(g_, op, operands, std::move(attrs), h.loc, r_.diag(), names);
    if (!node)
      return false;
    PrecisionOverride precision = h.precision.value_or(scope.precision);
    node->setPrecisionOverride(precision);
    for (Value *res : node->results())
      if (!checkElementCount(ctx_, res->type(), "the result of " + h.kind, h.loc))
        return false;
    for (const auto &[index, suffix] : plan.updates)
      g_.addStateUpdate(g_.lookup(fullName + "." + suffix), node->result(index));
    scope.names[h.localName] = node->result(0);
    scope.prev = node->result(0);
    return true;
  }

  static unsigned countResults(const OpInfo &op, llvm::ArrayRef<Value *> operands, AttrMap attrs) {
    std::string err;
    if (!checkOperandCount(op, operands.size(), err) || !normalizeAttrs(op, attrs, err))
      return 1;
    llvm::SmallVector<TensorType, 4> types, results;
    for (Value *v : operands)
      types.push_back(v->type());
    if (!inferResultTypes(op, types, attrs, results, err))
      return 1;
    return std::max<unsigned>(1, results.size());
  }

  /// Reads the builder's arguments, plans and creates the layer's state, and
  /// orders the operands by the op row's operand names.
  bool planParams(const OpInfo &op, const ParamBuilder &builder, const MapEntries &args,
                  const AttrMap &attrs, LayerHeader &h, Scope &scope, ParamPlan &plan,
                  llvm::SmallVectorImpl<Value *> &operands) {
    if (h.inputs.size() != 1)
      return r_.error(h.loc, h.kind + " takes one input, got " + llvm::Twine(h.inputs.size()));
    AttrMap builderArgs;
    for (const BuilderArg &spec : builder.args) {
      if (const MapEntry *e = find(args, spec.name)) {
        Attribute a;
        if (!r_.readAttribute(e->value, spec.name, spec.type, a))
          return false;
        builderArgs[spec.name] = std::move(a);
      } else if (spec.defaultValue) {
        builderArgs[spec.name] = *spec.defaultValue;
      } else {
        return r_.error(h.loc, "missing argument '" + llvm::Twine(spec.name) + "' for " + h.kind);
      }
    }
    AttrMap opAttrs = attrs;
    std::string err;
    if (!normalizeAttrs(op, opAttrs, err))
      return r_.error(h.loc, h.kind + ": " + err);
    if (!builder.plan(PlanRequest{*h.inputs[0], builderArgs, opAttrs}, plan, err))
      return r_.error(h.loc, h.kind + ": " + err);

    std::string fullName = scope.prefix + h.localName;
    bool trainable = !scope.frozen && h.trainable.value_or(true);
    llvm::StringMap<Value *> byOperand;
    for (const ParamDecl &decl : plan.params) {
      std::string name = fullName + "." + decl.suffix;
      if (!g_.isNameFree(name))
        return r_.error(h.nameNode, "duplicate name '" + name + "'");
      TensorType type(DType::F32, decl.shape);
      if (!checkElementCount(ctx_, type, "parameter '" + name + "'", h.loc))
        return false;
      Value *state = g_.addState(name, type, decl.kind, decl.init, h.loc);
      state->setTrainable(decl.kind == StateKind::Parameter && trainable);
      byOperand[decl.operand] = state;
    }
    // Each operand is a parameter when one is planned for its name, else the
    // layer's input; optional operands with neither are left out.
    Value *input = h.inputs[0];
    for (const OperandSpec &spec : op.operands) {
      if (Value *p = byOperand.lookup(spec.name)) {
        operands.push_back(p);
        continue;
      }
      if (input) {
        operands.push_back(input);
        input = nullptr;
        continue;
      }
      if (!spec.optional)
        return r_.error(h.loc, h.kind + ": nothing feeds operand '" + spec.name + "'");
    }
    return true;
  }

  bool instantiateBlock(const BlockDef &def, const MapEntries &args, LayerHeader &h, Scope &scope) {
    for (const std::string &p : def.params)
      if (!find(args, p))
        return r_.error(h.loc, "missing argument '" + p + "' for block '" + def.name + "'");
    // Each level of blocks is a level of recursion here.
    if (int64_t(scope.activeBlocks.size()) >= ctx_.opts.maxNesting)
      return r_.error(h.loc, "blocks nest deeper than " + llvm::Twine(ctx_.opts.maxNesting) +
                                 " levels; raise the limit with --max-nesting");
    if (llvm::is_contained(scope.activeBlocks, def.name)) {
      std::string chain;
      for (const std::string &b : scope.activeBlocks)
        chain += b + " -> ";
      return r_.error(h.loc, "block '" + def.name + "' instantiates itself: " + chain + def.name);
    }
    Env env;
    env.blockName = def.name;
    for (const std::string &p : def.params) {
      Bound value;
      if (!r_.resolve(find(args, p)->value, value))
        return false;
      env.args[p] = value;
    }

    Scope inner;
    inner.prefix = scope.prefix + h.localName + ".";
    inner.names[kBlockIn] = h.inputs[0];
    if (h.inputs.size() > 1)
      for (unsigned i = 0; i < h.inputs.size(); ++i)
        inner.names[(kBlockIn + "_" + llvm::Twine(i)).str()] = h.inputs[i];
    inner.prev = h.inputs[0];
    inner.env = &env;
    inner.frozen = scope.frozen || !h.trainable.value_or(true);
    inner.precision = h.precision.value_or(scope.precision);
    inner.activeBlocks = scope.activeBlocks;
    inner.activeBlocks.push_back(def.name);
    inner.topLevel = false;

    Bound layers = def.layers;
    layers.env = &env;
    if (!lowerList(layers, inner)) {
      r_.diag().note(h.loc, "in block '" + def.name + "' instantiated here as '" + scope.prefix +
                                h.localName + "'");
      return false;
    }
    scope.names[h.localName] = inner.prev;
    scope.prev = inner.prev;
    return true;
  }

  ModelContext &ctx_;
  Reader &r_;
  Graph &g_;
};

/// Reports the first `$name` in a block's layers that is not a parameter.
bool checkParamUses(Reader &r, const YAML::Node &n, const BlockDef &def) {
  if (n.IsScalar()) {
    llvm::StringRef text = n.Scalar();
    if (n.Tag() == "?" && text.startswith("$") &&
        !llvm::is_contained(def.params, text.drop_front()))
      return r.error(n, "block '" + def.name + "' has no parameter '" + text.drop_front() + "'");
    return true;
  }
  if (n.IsSequence()) {
    for (const YAML::Node &item : n)
      if (!checkParamUses(r, item, def))
        return false;
    return true;
  }
  if (n.IsMap())
    for (auto it = n.begin(); it != n.end(); ++it)
      if (!checkParamUses(r, it->second, def))
        return false;
  return true;
}

} // namespace

bool checkElementCount(ModelContext &ctx, const TensorType &t, const llvm::Twine &what,
                       const Location &loc) {
  std::optional<int64_t> n = t.checkedNumElements();
  if (!n)
    return ctx.r.error(loc, what + " " + t.str() + " has an element count that overflows int64");
  if (*n > ctx.opts.maxElements)
    return ctx.r.error(loc, what + " " + t.str() + " has " + llvm::Twine(*n) +
                                " elements, more than the limit of " +
                                llvm::Twine(ctx.opts.maxElements));
  return true;
}

bool readBlocks(ModelContext &ctx, const Bound &blocks) {
  Reader &r = ctx.r;
  MapEntries entries;
  if (!r.readMap(blocks, "'blocks'", entries))
    return false;
  for (const MapEntry &e : entries) {
    if (!isValidName(e.key))
      return r.error(e.keyNode, "invalid block name '" + e.key + "'");
    if (OpRegistry::builtin().lookup(e.key))
      return r.error(e.keyNode, "block '" + e.key + "' has the name of an op");
    BlockDef def;
    def.name = e.key;
    def.keyNode.reset(e.keyNode);
    MapEntries fields;
    if (!r.readMap(e.value, "block '" + e.key + "'", fields) ||
        !r.checkKnownKeys(fields, {"params", "layers"}, "key", " in block '" + e.key + "'"))
      return false;
    bool sawLayers = false;
    for (const MapEntry &f : fields) {
      if (f.key == "layers") {
        def.layers = f.value;
        sawLayers = true;
        continue;
      }
      std::vector<Bound> params;
      Bound list;
      if (!r.resolve(f.value, list))
        return false;
      if (!list.node.IsSequence())
        return r.error(list,
                       "'params' must be a list of names, got " + Reader::describe(list.node));
      if (!r.readStringList(list, "'params'", params))
        return false;
      for (const Bound &p : params) {
        std::string name = p.node.Scalar();
        if (!isValidName(name) || name.find('.') != std::string::npos)
          return r.error(p, "invalid block parameter name '" + name + "'");
        if (llvm::is_contained(kCommonKeys, name))
          return r.error(p, "block parameter '" + name + "' clashes with the layer key '" + name +
                                "'");
        if (llvm::is_contained(def.params, name))
          return r.error(p, "duplicate block parameter '" + name + "'");
        def.params.push_back(name);
      }
    }
    if (!sawLayers)
      return r.error(e.keyNode, "block '" + e.key + "' has no 'layers'");
    if (def.layers.node.IsSequence() && def.layers.node.size() == 0)
      return r.error(def.layers, "the 'layers' of block '" + e.key +
                                     "' must list at least one layer, got an empty list");
    if (!def.layers.node.IsSequence())
      return r.error(def.layers, "the 'layers' of block '" + e.key +
                                     "' must be a non-empty list, got " +
                                     Reader::describe(def.layers.node));
    if (!checkParamUses(r, def.layers.node, def))
      return false;
    ctx.blocks[e.key] = std::move(def);
  }
  return true;
}

bool lowerLayers(ModelContext &ctx, const Bound &layers, Value *&last,
                 llvm::StringMap<Value *> &names) {
  Scope top;
  for (Value *in : ctx.g.inputs())
    top.names[in->name()] = in;
  // Layers after a wrapped ONNX graph see its outputs by name and start
  // from its first one.
  for (const auto &named : names)
    top.names[named.getKey()] = named.getValue();
  assert(!ctx.g.inputs().empty() && "inputs are read first");
  top.prev = last ? last : ctx.g.inputs().front();
  LayerLowering lowering(ctx);
  if (!lowering.lowerList(layers, top))
    return false;
  last = top.prev;
  names = std::move(top.names);
  return true;
}

} // namespace ampc::yamlfe
