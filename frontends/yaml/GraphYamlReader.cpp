//===- GraphYamlReader.cpp - A graph written by --emit yaml, read back -----===//
//
// Mirrors GraphYamlEmitter.cpp field for field and ir/Parser.cpp check for
// check. One pass over the YAML builds the graph; an operand naming a value
// defined further down (a forward reference, as in the textual IR) is filled
// in once every node is read. The first problem stops the read, except names
// used but never defined, which are all reported.
//
// Attribute types come from the spelling, as GraphYamlEmitter writes them:
// a double-quoted scalar is a string; a plain one is true/false, an integer,
// a float (with '.', an exponent, inf or nan), a dtype name, else a string;
// a list of numbers is an int list unless one of them is a float. The op's
// row then widens ints where it wants floats (normalizeAttrs), as the
// parser does; meta keeps what it reads.
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/GraphYamlReader.h"

#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <charconv>

namespace ampc::yamlfe {

namespace {

constexpr llvm::StringRef kTopKeys[] = {"graph", "meta",    "inputs", "state",
                                        "nodes", "updates", "outputs"};
constexpr llvm::StringRef kInputKeys[] = {"name", "dtype", "shape", "loc"};
constexpr llvm::StringRef kStateKeys[] = {"name", "kind",      "dtype", "shape",
                                          "init", "trainable", "loc"};
constexpr llvm::StringRef kNodeKeys[] = {"op",   "inputs",    "outputs", "attrs",
                                         "role", "precision", "loc"};
constexpr llvm::StringRef kResultKeys[] = {"name", "dtype", "shape"};
constexpr llvm::StringRef kUpdateKeys[] = {"state", "value"};

bool isPlainScalar(const YAML::Node &n) { return n.IsScalar() && n.Tag() == "?"; }

/// -?[0-9]+, the textual IR's integer.
bool isIntText(llvm::StringRef s) {
  s.consume_front("-");
  return !s.empty() && llvm::all_of(s, llvm::isDigit);
}

/// The textual IR's float: digits with a '.' and digits after it, or an
/// exponent, or one of inf, -inf, nan (formatDouble's spellings).
bool isFloatText(llvm::StringRef s) {
  if (s == "inf" || s == "-inf" || s == "nan")
    return true;
  s.consume_front("-");
  size_t digits = 0;
  while (digits < s.size() && llvm::isDigit(s[digits]))
    ++digits;
  if (digits == 0)
    return false;
  s = s.drop_front(digits);
  bool isFloat = false;
  if (s.consume_front(".")) {
    isFloat = true;
    size_t frac = 0;
    while (frac < s.size() && llvm::isDigit(s[frac]))
      ++frac;
    if (frac == 0)
      return false;
    s = s.drop_front(frac);
  }
  if (s.consume_front("e") || s.consume_front("E")) {
    isFloat = true;
    if (!s.consume_front("+"))
      s.consume_front("-");
    if (s.empty() || !llvm::all_of(s, llvm::isDigit))
      return false;
    s = "";
  }
  return isFloat && s.empty();
}

class GraphYamlImporter {
public:
  GraphYamlImporter(Reader &r, const LoadOptions &opts, const OpRegistry &registry)
      : r_(r), opts_(opts), registry_(registry) {}

  std::unique_ptr<Graph> run(const YAML::Node &root) {
    unsigned errorsBefore = r_.diag().numErrors();
    g_ = std::make_unique<Graph>();
    g_->setLoc(r_.fileLoc());
    if (!readTop(Bound{root}) || !resolvePending() || r_.diag().numErrors() != errorsBefore ||
        !verify())
      return nullptr;
    return std::move(g_);
  }

private:
  //===--------------------------------------------------------------------===//
  // The sections
  //===--------------------------------------------------------------------===//

  bool readTop(const Bound &root) {
    MapEntries top;
    if (!r_.readMap(root, "a graph written by 'ampc --emit yaml'", top) ||
        !r_.checkKnownKeys(top, kTopKeys, "key", " in a graph written by 'ampc --emit yaml'"))
      return false;
    // Every section the emitter writes is required: a file cut short loses
    // the last ones, and a graph without its updates or outputs would still
    // verify, and then train wrongly. Each is looked for when its turn
    // comes, so a file cut inside a node is reported there.
    const MapEntry *e = nullptr;
    auto section = [&](size_t i) {
      return requireKeys(top, llvm::ArrayRef(kTopKeys).slice(i, 1), root,
                         "a graph written by 'ampc --emit yaml'", &e, " (is the file cut short?)");
    };
    return section(0) && readName(*e) && section(1) && readMeta(e->value) && section(2) &&
           readInputs(e->value) && section(3) && readState(e->value) && section(4) &&
           readNodes(*e) && section(5) && readUpdates(e->value) && section(6) &&
           readOutputs(e->value);
  }

  bool readName(const MapEntry &e) {
    std::string name;
    if (!r_.readString(e.value, "'graph'", name))
      return false;
    // The textual IR prints it as @name: what it cannot print is refused.
    if (!isValidName(name))
      return r_.error(e.value,
                      "invalid graph name '" + name + "': use letters, digits, '_', '.' and '-'");
    g_->setName(name);
    return true;
  }

  bool readMeta(const Bound &b) {
    MapEntries entries;
    if (!r_.readMap(b, "'meta'", entries))
      return false;
    for (const MapEntry &e : entries) {
      Attribute value;
      if (!readAttr(e.value, "meta '" + e.key + "'", value))
        return false;
      g_->meta()[e.key] = std::move(value);
      g_->setMetaLocation(e.key, r_.loc(e.keyNode));
    }
    return true;
  }

  bool readInputs(const Bound &b) {
    std::vector<Bound> items;
    if (!readList(b, "'inputs'", items))
      return false;
    for (const Bound &item : items) {
      MapEntries fields;
      if (!readFields(item, "an input", kInputKeys, fields))
        return false;
      const MapEntry *required[3];
      if (!requireKeys(fields, llvm::ArrayRef(kInputKeys).take_front(3), item, "an input",
                       required))
        return false;
      const auto &[name, dtype, shape] = required;
      std::string n;
      TensorType type;
      Location loc = r_.loc(item);
      if (!defineName(*name, n) || !readType(*dtype, *shape, type) || !readOptionalLoc(fields, loc))
        return false;
      g_->addInput(n, std::move(type), std::move(loc));
    }
    return true;
  }

  bool readState(const Bound &b) {
    std::vector<Bound> items;
    if (!readList(b, "'state'", items))
      return false;
    for (const Bound &item : items) {
      MapEntries fields;
      if (!readFields(item, "a state tensor", kStateKeys, fields))
        return false;
      const MapEntry *required[6];
      if (!requireKeys(fields, llvm::ArrayRef(kStateKeys).take_front(6), item, "a state tensor",
                       required))
        return false;
      const auto &[name, kindEntry, dtype, shape, initEntry, trainableEntry] = required;
      std::string n, kindText, initText;
      TensorType type;
      bool trainable = true;
      Location loc = r_.loc(item);
      if (!defineName(*name, n) || !r_.readString(kindEntry->value, "'kind'", kindText) ||
          !readType(*dtype, *shape, type) || !r_.readString(initEntry->value, "'init'", initText) ||
          !r_.readBool(trainableEntry->value, "'trainable'", trainable) ||
          !readOptionalLoc(fields, loc))
        return false;
      std::optional<StateKind> kind = parseStateKind(kindText);
      if (!kind)
        return r_.error(kindEntry->value, "unknown state kind '" + kindText +
                                              "' (expected param, buffer, optstate, master "
                                              "or scaler)");
      std::string err;
      std::optional<InitSpec> init = parseInitSpec(initText, err);
      if (!init)
        return r_.error(initEntry->value, "invalid initializer '" + initText + "': " + err);
      Value *v = g_->addState(n, std::move(type), *kind, std::move(*init), std::move(loc));
      v->setTrainable(trainable);
    }
    return true;
  }

  bool readNodes(const MapEntry &section) {
    std::vector<Bound> items;
    if (!readList(section.value, "'nodes'", items))
      return false;
    // Checked before a node is built, so a huge list costs nothing.
    if (items.size() > uint64_t(opts_.maxNodes))
      return r_.error(section.keyNode, "the graph has " + llvm::Twine(items.size()) +
                                           " nodes, more than the limit of " +
                                           llvm::Twine(opts_.maxNodes) +
                                           "; raise the limit with --max-nodes");
    for (const Bound &item : items)
      if (!readNode(item))
        return false;
    return true;
  }

  bool readNode(const Bound &item) {
    MapEntries fields;
    if (!readFields(item, "a node", kNodeKeys, fields))
      return false;
    const MapEntry *required[6];
    if (!requireKeys(fields, llvm::ArrayRef(kNodeKeys).take_front(6), item, "a node", required))
      return false;
    const auto &[opEntry, operandsEntry, resultsEntry, attrsEntry, roleEntry, precisionEntry] =
        required;

    std::string opName;
    if (!r_.readString(opEntry->value, "'op'", opName))
      return false;
    const OpInfo *op = registry_.lookup(opName);
    if (!op)
      return r_.error(opEntry->value, "unknown op '" + opName + "'");

    // Operands; names not yet defined are resolved after the whole file.
    std::vector<Bound> operandItems;
    if (!readList(operandsEntry->value, "'inputs' of a node", operandItems))
      return false;
    llvm::SmallVector<Value *, 4> operands;
    llvm::SmallVector<std::pair<std::string, Location>, 4> operandNames;
    for (const Bound &o : operandItems) {
      std::string name;
      if (!readValueName(o, "operands", name))
        return false;
      operands.push_back(g_->lookup(name));
      operandNames.push_back({std::move(name), r_.loc(o)});
    }

    // Results: names and types, taken as written (the verifier compares
    // them with the op's inference).
    std::vector<Bound> resultItems;
    if (!readList(resultsEntry->value, "'outputs' of a node", resultItems))
      return false;
    llvm::SmallVector<std::string, 2> resultNames;
    llvm::SmallVector<TensorType, 2> resultTypes;
    for (const Bound &res : resultItems) {
      MapEntries rf;
      if (!readFields(res, "a node's output", kResultKeys, rf))
        return false;
      const MapEntry *required[3];
      if (!requireKeys(rf, kResultKeys, res, "a node's output", required))
        return false;
      const auto &[name, dtype, shape] = required;
      std::string n;
      TensorType type;
      if (!defineName(*name, n) || !readType(*dtype, *shape, type))
        return false;
      resultNames.push_back(std::move(n));
      resultTypes.push_back(std::move(type));
    }

    AttrMap attrs;
    MapEntries attrEntries;
    if (!r_.readMap(attrsEntry->value, "'attrs'", attrEntries))
      return false;
    for (const MapEntry &e : attrEntries) {
      Attribute value;
      if (!readAttr(e.value, "attribute '" + e.key + "'", value))
        return false;
      attrs[e.key] = std::move(value);
    }

    std::string roleText, precisionText;
    if (!r_.readString(roleEntry->value, "'role'", roleText) ||
        !r_.readString(precisionEntry->value, "'precision'", precisionText))
      return false;
    std::optional<NodeRole> role = parseRole(roleText);
    if (!role)
      return r_.error(roleEntry->value,
                      "unknown role '" + roleText +
                          "' (expected forward, loss, backward, optimizer or loss_scale)");
    std::optional<PrecisionOverride> precision;
    for (PrecisionOverride p :
         {PrecisionOverride::None, PrecisionOverride::Fp32, PrecisionOverride::Half})
      if (precisionOverrideName(p) == precisionText)
        precision = p;
    if (!precision)
      return r_.error(precisionEntry->value,
                      "unknown precision '" + precisionText + "' (expected none, fp32 or half)");
    Location yamlLoc = r_.loc(item), loc = yamlLoc;
    if (!readOptionalLoc(fields, loc))
      return false;

    // Check the node against its op's row, as the parser does.
    std::string err;
    if (!checkOperandCount(*op, operands.size(), err))
      return r_.error(operandsEntry->value, op->name + ": " + err);
    if (!normalizeAttrs(*op, attrs, err)) {
      Location where = r_.loc(attrsEntry->value);
      for (const MapEntry &e : attrEntries)
        if (llvm::StringRef(err).contains("'" + e.key + "'"))
          where = r_.loc(e.keyNode);
      return r_.error(where, op->name + ": " + err);
    }

    Node *n =
        g_->createNode(*op, operands, std::move(attrs), resultTypes, resultNames, std::move(loc));
    n->setRole(*role);
    n->setPrecisionOverride(*precision);
    yamlLocs_.push_back({n, yamlLoc});
    for (unsigned i = 0; i < operands.size(); ++i)
      if (!operands[i])
        pendingOperands_.push_back({n, i, operandNames[i].first, operandNames[i].second});
    return true;
  }

  bool readUpdates(const Bound &b) {
    std::vector<Bound> items;
    if (!readList(b, "'updates'", items))
      return false;
    for (const Bound &item : items) {
      MapEntries fields;
      if (!readFields(item, "a state update", kUpdateKeys, fields))
        return false;
      const MapEntry *required[2];
      if (!requireKeys(fields, kUpdateKeys, item, "a state update", required))
        return false;
      const auto &[state, value] = required;
      PendingUpdate u;
      if (!readValueName(state->value, "'state'", u.state) ||
          !readValueName(value->value, "'value'", u.value))
        return false;
      u.stateLoc = r_.loc(state->value);
      u.valueLoc = r_.loc(value->value);
      pendingUpdates_.push_back(std::move(u));
    }
    return true;
  }

  bool readOutputs(const Bound &b) {
    std::vector<Bound> items;
    if (!readList(b, "'outputs'", items))
      return false;
    for (const Bound &item : items) {
      std::string name;
      if (!readValueName(item, "'outputs'", name))
        return false;
      pendingOutputs_.push_back({std::move(name), r_.loc(item)});
    }
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Fields
  //===--------------------------------------------------------------------===//

  /// A list; the emitter writes `[]` for an empty one, so nothing else is one.
  bool readList(const Bound &b, const llvm::Twine &what, std::vector<Bound> &items) {
    if (!b.node.IsSequence())
      return r_.error(b, what + " must be a list, got " + Reader::describe(b.node));
    for (const YAML::Node &item : b.node)
      items.emplace_back(item, nullptr, b.fallback);
    return true;
  }

  bool readFields(const Bound &item, const llvm::Twine &what, llvm::ArrayRef<llvm::StringRef> known,
                  MapEntries &fields) {
    if (!item.node.IsMap())
      return r_.error(item, what + " must be a map, got " + Reader::describe(item.node));
    return r_.readMap(item, what, fields) &&
           r_.checkKnownKeys(fields, known, "key", " in " + what.str());
  }

  /// The entries of `keys`, in their order, into `out`; the first one
  /// missing is an error at `where`.
  bool requireKeys(const MapEntries &fields, llvm::ArrayRef<llvm::StringRef> keys,
                   const Bound &where, const llvm::Twine &what, const MapEntry **out,
                   llvm::StringRef hint = "") {
    for (size_t i = 0; i < keys.size(); ++i) {
      out[i] = nullptr;
      for (const MapEntry &e : fields)
        if (e.key == keys[i])
          out[i] = &e;
      if (!out[i])
        return r_.error(where, what + " needs '" + keys[i] + "'" + hint);
    }
    return true;
  }

  bool readValueName(const Bound &b, const llvm::Twine &what, std::string &out) {
    if (!r_.readString(b, what, out))
      return false;
    if (out.empty())
      return r_.error(b, what + ": a value name must not be empty");
    return true;
  }

  /// A new value's name: defined once in the whole graph.
  bool defineName(const MapEntry &e, std::string &out) {
    if (!readValueName(e.value, "'name'", out))
      return false;
    Location here = r_.loc(e.value);
    auto [it, inserted] = definedAt_.try_emplace(out, here);
    if (inserted)
      return true;
    return r_.error(here, "redefinition of value '" + out + "' (first defined at " +
                              llvm::Twine(it->second.line()) + ":" + llvm::Twine(it->second.col()) +
                              ")");
  }

  /// dtype and shape; the element count within opts.maxElements.
  bool readType(const MapEntry &dtypeEntry, const MapEntry &shapeEntry, TensorType &type) {
    std::string dtypeText;
    if (!r_.readString(dtypeEntry.value, "'dtype'", dtypeText))
      return false;
    std::optional<DType> dtype = parseDType(dtypeText);
    if (!dtype)
      return r_.error(dtypeEntry.value, "unknown dtype '" + dtypeText +
                                            "' (expected f32, f16, bf16, f64, i64, i32 or bool)");
    std::vector<int64_t> dims;
    if (!r_.readIntList(shapeEntry.value, "'shape'", dims, /*allowBatch=*/false))
      return false;
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] < 0)
        return r_.error(Bound{shapeEntry.value.node[i]},
                        "dimension " + llvm::Twine(dims[i]) + " is negative");
    type = TensorType(*dtype, dims);
    std::optional<int64_t> n = type.checkedNumElements();
    if (!n)
      return r_.error(shapeEntry.value,
                      "type " + type.str() + " has an element count that overflows int64");
    if (*n > opts_.maxElements)
      return r_.error(shapeEntry.value, "type " + type.str() + " has " + llvm::Twine(*n) +
                                            " elements, more than the limit of " +
                                            llvm::Twine(opts_.maxElements) +
                                            "; raise the limit with --max-elements");
    return true;
  }

  /// `loc: FILE:LINE:COL` as Location::str() writes it, or `loc: FILE`
  /// for a place without lines (line 0: an ONNX node).
  bool readOptionalLoc(const MapEntries &fields, Location &loc) {
    const MapEntry *e = nullptr;
    for (const MapEntry &f : fields)
      if (f.key == "loc")
        e = &f;
    if (!e)
      return true;
    std::string text;
    if (!r_.readString(e->value, "'loc'", text))
      return false;
    llvm::StringRef file = text;
    uint32_t line = 0, col = 0;
    auto [rest, colText] = llvm::StringRef(text).rsplit(':');
    auto [fileText, lineText] = rest.rsplit(':');
    if (!colText.empty() && !lineText.empty() && llvm::all_of(colText, llvm::isDigit) &&
        llvm::all_of(lineText, llvm::isDigit) && rest.contains(':')) {
      if (lineText.getAsInteger(10, line) || colText.getAsInteger(10, col))
        return r_.error(e->value, "line or column number out of range in 'loc': " + text);
      file = fileText;
    }
    // One copy of each file name, shared by every location in it.
    std::shared_ptr<const std::string> &shared = fileNames_[file];
    if (!shared)
      shared = std::make_shared<const std::string>(file.str());
    loc = Location(shared, line, col);
    return true;
  }

  /// An attribute or meta value, its type from its spelling (see the top).
  bool readAttr(const Bound &b, const llvm::Twine &what, Attribute &out) {
    const YAML::Node &n = b.node;
    if (n.IsScalar()) {
      if (!isPlainScalar(n)) {
        out = Attribute(n.Scalar());
        return true;
      }
      return readPlainScalar(b, what, out);
    }
    if (n.IsSequence())
      return readNumberList(b, what, out);
    return r_.error(b, what +
                           " must be a number, true, false, a string, a list of numbers or "
                           "a dtype, got " +
                           Reader::describe(n));
  }

  bool readPlainScalar(const Bound &b, const llvm::Twine &what, Attribute &out) {
    const std::string &text = b.node.Scalar();
    if (text == "true" || text == "false") {
      out = Attribute(text == "true");
      return true;
    }
    if (isIntText(text)) {
      int64_t i = 0;
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
      if (ec != std::errc() || ptr != text.data() + text.size())
        return r_.error(b, what + ": integer " + text + " does not fit in 64 bits");
      out = Attribute(i);
      return true;
    }
    if (isFloatText(text)) {
      double d = 0;
      if (!parseFloat(b, what, text, d))
        return false;
      out = Attribute(d);
      return true;
    }
    if (std::optional<DType> t = parseDType(text)) {
      out = Attribute(*t);
      return true;
    }
    out = Attribute(text);
    return true;
  }

  bool parseFloat(const Bound &b, const llvm::Twine &what, const std::string &text, double &d) {
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (ec != std::errc() || ptr != text.data() + text.size())
      return r_.error(b, what + ": number " + text + " is out of range for a 64-bit float");
    return true;
  }

  /// [1, 2] is an int list; a list with any float in it is a float list.
  bool readNumberList(const Bound &b, const llvm::Twine &what, Attribute &out) {
    std::vector<int64_t> ints;
    std::vector<double> floats;
    bool anyFloat = false;
    for (const YAML::Node &item : b.node) {
      Bound e{item, nullptr, b.fallback};
      const std::string text = item.IsScalar() ? item.Scalar() : std::string();
      if (isPlainScalar(item) && isIntText(text)) {
        int64_t i = 0;
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
        if (ec != std::errc() || ptr != text.data() + text.size())
          return r_.error(e, what + ": integer " + text + " does not fit in 64 bits");
        ints.push_back(i);
        floats.push_back(static_cast<double>(i));
      } else if (isPlainScalar(item) && isFloatText(text)) {
        double d = 0;
        if (!parseFloat(e, what, text, d))
          return false;
        anyFloat = true;
        floats.push_back(d);
      } else {
        return r_.error(e, what + ": elements of a list must be numbers, got " +
                               Reader::describe(item));
      }
    }
    out = anyFloat ? Attribute(std::move(floats)) : Attribute(std::move(ints));
    return true;
  }

  //===--------------------------------------------------------------------===//
  // After the last node: forward references, updates, outputs, the verifier
  //===--------------------------------------------------------------------===//

  Value *resolve(const std::string &name, const Location &loc) {
    Value *v = g_->lookup(name);
    if (!v)
      r_.error(loc, "use of undefined value '" + name + "'");
    return v;
  }

  bool resolvePending() {
    bool ok = true;
    for (const PendingOperand &p : pendingOperands_) {
      if (Value *v = resolve(p.name, p.loc))
        p.node->setOperand(p.index, v);
      else
        ok = false;
    }
    llvm::SmallPtrSet<const Value *, 8> updated;
    for (const PendingUpdate &u : pendingUpdates_) {
      Value *state = resolve(u.state, u.stateLoc);
      Value *value = resolve(u.value, u.valueLoc);
      if (state && !state->isState()) {
        r_.error(u.stateLoc, "update target '" + u.state + "' is not a state tensor");
        state = nullptr;
      }
      if (state && !updated.insert(state).second) {
        r_.error(u.stateLoc, "state '" + u.state + "' is updated more than once");
        state = nullptr;
      }
      if (!state || !value) {
        ok = false;
        continue;
      }
      g_->addStateUpdate(state, value);
    }
    for (const auto &[name, loc] : pendingOutputs_) {
      if (Value *v = resolve(name, loc))
        g_->addOutput(v);
      else
        ok = false;
    }
    return ok;
  }

  /// The verifier, with each node's location swapped for its place in this
  /// file while it runs: a wrong type or a cycle is reported where the
  /// reader can fix it, not at the model file the node came from.
  bool verify() {
    for (auto &[node, loc] : yamlLocs_) {
      Location written = node->loc();
      node->setLoc(std::move(loc));
      loc = std::move(written);
    }
    bool ok = verifyGraph(*g_, r_.diag());
    for (auto &[node, loc] : yamlLocs_)
      node->setLoc(std::move(loc));
    return ok;
  }

  struct PendingOperand {
    Node *node;
    unsigned index;
    std::string name;
    Location loc;
  };
  struct PendingUpdate {
    std::string state, value;
    Location stateLoc, valueLoc;
  };

  Reader &r_;
  const LoadOptions &opts_;
  const OpRegistry &registry_;
  std::unique_ptr<Graph> g_;
  llvm::StringMap<Location> definedAt_;
  llvm::StringMap<std::shared_ptr<const std::string>> fileNames_;
  std::vector<std::pair<Node *, Location>> yamlLocs_;
  std::vector<PendingOperand> pendingOperands_;
  std::vector<PendingUpdate> pendingUpdates_;
  std::vector<std::pair<std::string, Location>> pendingOutputs_;
};

} // namespace

bool isGraphYaml(const YAML::Node &root) {
  if (!root.IsMap())
    return false;
  for (auto it = root.begin(); it != root.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == "graph")
      return true;
  return false;
}

std::unique_ptr<Graph> readGraphYaml(const YAML::Node &root, Reader &r, const LoadOptions &opts,
                                     const OpRegistry &registry) {
  return GraphYamlImporter(r, opts, registry).run(root);
}

} // namespace ampc::yamlfe
