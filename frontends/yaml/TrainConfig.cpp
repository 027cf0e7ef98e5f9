//===- TrainConfig.cpp - `optimizer:` and `train:` into graph meta ----------===//
//
// The optimizer and the training loop are not ops at import time: the
// lowering passes and the runtime read them from Graph::meta. Here every key
// is validated and every default filled in, so later layers never guess.
// Keys are flattened: optimizer = "adam", optimizer.lr = 1.0e-3, ...
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/Lowering.h"
#include "frontends/yaml/ModelLoader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/GlobPattern.h"

#include <cmath>
#include <limits>

namespace ampc::yamlfe {

namespace {

/// One numeric or boolean setting with its default and allowed range.
struct Setting {
  Setting(const char *name, AttrType type, std::optional<Attribute> defaultValue, double min = 0,
          bool minExclusive = false, double maxExclusive = std::numeric_limits<double>::infinity())
      : name(name), type(type), defaultValue(std::move(defaultValue)), min(min),
        minExclusive(minExclusive), maxExclusive(maxExclusive) {}

  const char *name;
  AttrType type;
  /// nullopt: required.
  std::optional<Attribute> defaultValue;
  /// For numbers: the smallest allowed value and whether it is excluded.
  double min;
  bool minExclusive;
  /// For numbers: the largest allowed value, excluded (infinity: none).
  double maxExclusive;
};

const MapEntry *findEntry(const MapEntries &entries, llvm::StringRef key) {
  for (const MapEntry &e : entries)
    if (e.key == key)
      return &e;
  return nullptr;
}

bool checkRange(Reader &r, const Bound &where, const Setting &s, double v) {
  bool low = s.minExclusive ? v <= s.min : v < s.min;
  bool high = v >= s.maxExclusive;
  if (!low && !high)
    return true;
  auto number = [&](double x) {
    return s.type == AttrType::Int ? std::to_string(int64_t(x)) : formatDouble(x);
  };
  std::string range = (s.minExclusive ? "> " : ">= ") + number(s.min);
  if (std::isfinite(s.maxExclusive))
    range += " and < " + number(s.maxExclusive);
  return r.error(where, "'" + llvm::Twine(s.name) + "' must be " + range + ", got " +
                            Reader::describe(where.node));
}

/// Reads `settings` from `entries` into meta as "<prefix>.<name>".
bool readSettings(Reader &r, const MapEntries &entries, llvm::ArrayRef<Setting> settings,
                  const std::string &prefix, const Location &where, llvm::StringRef context,
                  AttrMap &meta) {
  for (const Setting &s : settings) {
    std::string key = prefix + "." + s.name;
    const MapEntry *e = findEntry(entries, s.name);
    if (!e) {
      if (!s.defaultValue)
        return r.error(where, "missing '" + llvm::Twine(s.name) + "' for " + context);
      meta[key] = *s.defaultValue;
      continue;
    }
    Attribute a;
    if (!r.readAttribute(e->value, s.name, s.type, a))
      return false;
    if (a.is(AttrType::Int) || a.is(AttrType::Float))
      if (!checkRange(r, e->value, s, a.getNumber()))
        return false;
    if (a.is(AttrType::Floats))
      for (double v : a.getFloats())
        if (!checkRange(r, e->value, s, v))
          return false;
    meta[key] = std::move(a);
  }
  return true;
}

std::vector<llvm::StringRef> settingNames(llvm::ArrayRef<Setting> settings) {
  std::vector<llvm::StringRef> names;
  for (const Setting &s : settings)
    names.push_back(s.name);
  return names;
}

/// Which set (parameter group, or one of several optimizers) claimed each
/// parameter, and where in the file.
using ParamOwners = llvm::StringMap<std::pair<int64_t, Location>>;

/// A `params:` list of globs (`llvm::GlobPattern`) matched against `g`'s
/// parameters that `eligible` admits, each match claimed for set `index` in
/// `owner` and passed to `claim`; `written` gets the globs as written. A
/// parameter another set claimed is an error naming both (`sets`: "groups",
/// "optimizers"); so is a glob that matches nothing (`noMatch` completes
/// the message).
bool claimParams(Reader &r, const Bound &params, const Graph &g, int64_t index,
                 llvm::StringRef sets, llvm::function_ref<bool(const Value *)> eligible,
                 ParamOwners &owner, llvm::function_ref<void(const Value *)> claim,
                 const std::string &noMatch, std::string &written) {
  std::vector<Bound> globs;
  if (!r.readStringList(params, "'params'", globs))
    return false;
  for (const Bound &b : globs) {
    std::string text;
    if (!r.readString(b, "a parameter glob", text))
      return false;
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(text);
    if (!glob)
      return r.error(b, "bad parameter glob '" + text + "': " + llvm::toString(glob.takeError()));
    int64_t matches = 0;
    for (const Value *p : g.state(StateKind::Parameter)) {
      if (!glob->match(p->name()) || !eligible(p))
        continue;
      ++matches;
      auto [it, fresh] = owner.try_emplace(p->name(), index, r.loc(b));
      if (!fresh && it->second.first != index)
        return r.error(b, "parameter '" + p->name() + "' is in two " + sets + ": " +
                              llvm::Twine(it->second.first) + " (" + it->second.second.str() +
                              ") and " + llvm::Twine(index));
      claim(p);
    }
    if (matches == 0)
      return r.error(b, "parameter glob '" + text + "' matches no " + noMatch);
    written += (written.empty() ? "" : ", ") + text;
  }
  return true;
}

/// `groups: [{params: [GLOB, ...], <setting>: value, ...}, ...]`, PyTorch's
/// parameter groups: each group's globs are matched against the names of
/// `g`'s parameters (ONNX initializer names included), and its settings
/// override the optimizer's for the parameters it matches. Into meta as
/// optimizer.groups (the count), optimizer.groups.<i>.params (the globs as
/// written, for reports), optimizer.groups.<i>.<setting> for each setting
/// the group gives, and optimizer.group_of.<parameter> = i for each
/// parameter a group holds (the others take the optimizer's settings).
bool readParamGroups(Reader &r, const MapEntry &groups, llvm::ArrayRef<Setting> settings,
                     llvm::StringRef optimizer, const Graph &g, AttrMap &meta,
                     const std::string &metaPrefix,
                     llvm::function_ref<bool(const Value *)> eligible) {
  Bound list;
  if (!r.resolve(groups.value, list))
    return false;
  if (!list.node.IsSequence() || list.node.size() == 0)
    return r.error(list, "'groups' must be a list of parameter groups ({params: [...], ...}), "
                         "got " +
                             Reader::describe(list.node));
  std::vector<llvm::StringRef> known = settingNames(settings);
  known.insert(known.begin(), "params");
  ParamOwners owner;
  int64_t index = 0;
  for (const YAML::Node &item : list.node) {
    Bound group;
    MapEntries fields;
    if (!r.resolve(Bound{item, list.env, list.fallback}, group) ||
        !r.readMap(group, "parameter group " + llvm::Twine(index), fields) ||
        !r.checkKnownKeys(fields, known, "setting", " for a parameter group of " + optimizer))
      return false;
    const MapEntry *params = findEntry(fields, "params");
    if (!params)
      return r.error(group, "parameter group " + llvm::Twine(index) +
                                " has no 'params' (the globs of the parameters it holds)");
    std::string prefix = metaPrefix + ".groups." + std::to_string(index);
    std::string example;
    if (!g.state(StateKind::Parameter).empty())
      example = " (its first is '" + g.state(StateKind::Parameter).front()->name().str() + "')";
    std::string written;
    if (!claimParams(
            r, params->value, g, index, "groups", eligible, owner,
            [&](const Value *p) {
              meta[metaPrefix + ".group_of." + p->name().str()] = Attribute(index);
            },
            "parameter of the model" + example, written))
      return false;
    // The group's own settings: only those it gives (the others are the
    // optimizer's).
    MapEntries given;
    for (const MapEntry &f : fields)
      if (f.key != "params")
        given.push_back(f);
    std::vector<Setting> optional;
    for (const Setting &s : settings)
      if (findEntry(given, s.name))
        optional.push_back(s);
    if (!readSettings(r, given, optional, prefix, r.loc(group), "a parameter group", meta))
      return false;
    if (const MapEntry *b = findEntry(given, "betas"))
      if (meta[prefix + ".betas"].getFloats().size() != 2)
        return r.error(b->value, "'betas' must be a list of 2 numbers");
    meta[prefix + ".params"] = Attribute(written);
    ++index;
  }
  meta[metaPrefix + ".groups"] = Attribute(index);
  return true;
}

/// One optimizer `{<kind>: {settings..., groups: [...]}}` into meta under
/// `prefix` ("optimizer", or "optimizers.<i>" for one of several): its
/// kind at `prefix`, each setting at `prefix.<setting>`. Its groups match
/// only the parameters `eligible` admits (the ones it holds).
bool readOneOptimizer(Reader &r, const MapEntry &opt, const Graph &g, AttrMap &meta,
                      const std::string &prefix, llvm::function_ref<bool(const Value *)> eligible) {
  const std::vector<Setting> sgd = {
      {"lr", AttrType::Float, std::nullopt, 0, true},
      {"momentum", AttrType::Float, 0.0},
      {"dampening", AttrType::Float, 0.0},
      {"nesterov", AttrType::Bool, false},
      {"weight_decay", AttrType::Float, 0.0},
  };
  auto adamLike = [](double weightDecay) {
    return std::vector<Setting>{
        {"lr", AttrType::Float, 1e-3, 0, true},
        {"betas", AttrType::Floats, std::vector<double>{0.9, 0.999}, 0, false, 1.0},
        {"eps", AttrType::Float, 1e-8, 0, true},
        {"weight_decay", AttrType::Float, weightDecay},
    };
  };
  std::vector<Setting> settings;
  if (opt.key == "sgd")
    settings = sgd;
  else if (opt.key == "adam")
    settings = adamLike(0.0);
  else if (opt.key == "adamw")
    settings = adamLike(0.01);
  else if (opt.key == "lamb")
    settings = {
        // Apex FusedLAMB's arguments and defaults.
        {"lr", AttrType::Float, 1e-3, 0, true},
        {"betas", AttrType::Floats, std::vector<double>{0.9, 0.999}, 0, false, 1.0},
        {"eps", AttrType::Float, 1e-6, 0, true},
        {"weight_decay", AttrType::Float, 0.01},
        {"adam_w_mode", AttrType::Bool, true},
        {"grad_averaging", AttrType::Bool, true},
        {"bias_correction", AttrType::Bool, true},
        {"max_grad_norm", AttrType::Float, 1.0, 0, true},
        {"use_nvlamb", AttrType::Bool, false},
    };
  else
    return r.error(opt.keyNode,
                   "unknown optimizer '" + opt.key + "'; expected sgd, adam, adamw or lamb");

  MapEntries args;
  std::vector<llvm::StringRef> known = settingNames(settings);
  known.push_back("groups");
  if (!r.readMap(opt.value, "the arguments of " + opt.key, args) ||
      !r.checkKnownKeys(args, known, "argument", " for " + opt.key))
    return false;
  meta[prefix] = Attribute(opt.key);
  if (!readSettings(r, args, settings, prefix, r.loc(opt.keyNode), opt.key, meta))
    return false;
  if (const MapEntry *groups = findEntry(args, "groups"))
    if (!readParamGroups(r, *groups, settings, opt.key, g, meta, prefix, eligible))
      return false;
  if (const MapEntry *b = findEntry(args, "betas"))
    if (meta[prefix + ".betas"].getFloats().size() != 2)
      return r.error(b->value, "'betas' must be a list of 2 numbers");
  if (opt.key == "sgd" && meta[prefix + ".nesterov"].getBool() &&
      (meta[prefix + ".momentum"].getFloat() <= 0 || meta[prefix + ".dampening"].getFloat() != 0))
    return r.error(findEntry(args, "nesterov")->value,
                   "nesterov momentum needs momentum > 0 and dampening 0");
  return true;
}

/// `schedule: [NAME, ...]`: which of several optimizers steps on each
/// optimizer step, repeating (a GAN's [discriminator, generator]; an
/// optimizer may appear more than once, every one at least once). Into meta
/// as optimizers.period (the length) and optimizers.<i>.turns (the slots
/// where optimizer i steps), and train.schedule (the names, for reports).
bool readOptimizerSchedule(Reader &r, const MapEntry &schedule, AttrMap &meta) {
  auto count = meta.find("optimizers");
  if (count == meta.end())
    return r.error(schedule.keyNode, "'schedule' needs several optimizers (a list under "
                                     "'optimizer:', each with a 'name')");
  int64_t optimizers = count->second.getInt();
  std::vector<Bound> items;
  if (!r.readStringList(schedule.value, "'schedule'", items))
    return false;
  if (items.empty() || items.size() > 64)
    return r.error(schedule.value, "'schedule' must name 1 to 64 optimizer steps, got " +
                                       llvm::Twine(items.size()));
  std::vector<std::vector<int64_t>> turns(static_cast<size_t>(optimizers));
  std::string written;
  for (size_t slot = 0; slot < items.size(); ++slot) {
    std::string name;
    if (!r.readString(items[slot], "an optimizer name", name))
      return false;
    int64_t found = -1;
    std::vector<llvm::StringRef> names;
    for (int64_t i = 0; i < optimizers; ++i) {
      const std::string &n = meta["optimizers." + std::to_string(i) + ".name"].getString();
      names.push_back(n);
      if (n == name)
        found = i;
    }
    if (found < 0) {
      std::string hint = Reader::closest(name, names);
      return r.error(items[slot], "'schedule' names no optimizer '" + name + "'" +
                                      (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
    turns[size_t(found)].push_back(int64_t(slot));
    written += (written.empty() ? "" : ",") + name;
  }
  for (int64_t i = 0; i < optimizers; ++i) {
    std::string prefix = "optimizers." + std::to_string(i);
    if (turns[size_t(i)].empty())
      return r.error(schedule.value, "optimizer '" + meta[prefix + ".name"].getString() +
                                         "' never steps: 'schedule' does not name it");
    meta[prefix + ".turns"] = Attribute(turns[size_t(i)]);
  }
  meta["optimizers.period"] = Attribute(int64_t(items.size()));
  meta["train.schedule"] = Attribute(written);
  return true;
}

/// The number of terms of the model's loss: 0 without one, 1 for one loss,
/// N for a list (its terms %loss.0 ... %loss.<N-1>).
int64_t lossTermCount(const Graph &g) {
  if (!g.lookup("loss"))
    return 0;
  int64_t n = 0;
  while (g.lookup("loss." + std::to_string(n)))
    ++n;
  return std::max<int64_t>(n, 1);
}

/// Several optimizers, a list of
///   {name: NAME, params: [GLOB, ...], loss: K, <kind>: {settings...}}
/// over disjoint sets of parameters, each stepping on loss term K (0 when
/// the model has one loss); into meta as passes/OptimizerSets.h describes.
/// Every trainable parameter must be in exactly one; meta `optimizer` lists
/// the kinds (adam,sgd), as meta `loss` lists a list's losses.
bool readOptimizerList(Reader &r, const Bound &list, const Graph &g, AttrMap &meta) {
  if (list.node.size() == 0)
    return r.error(list, "'optimizer' must be one optimizer or a non-empty list of them");
  int64_t terms = lossTermCount(g);
  ParamOwners owner;
  llvm::StringMap<int64_t> byName;
  std::string kinds;
  int64_t index = 0;
  for (const YAML::Node &node : list.node) {
    std::string what = "optimizer " + std::to_string(index);
    Bound item;
    MapEntries fields;
    if (!r.resolve(Bound{node, list.env, list.fallback}, item) ||
        !r.readMap(item, "'" + what + "'", fields))
      return false;
    const MapEntry *kind = nullptr, *name = nullptr, *params = nullptr, *loss = nullptr;
    for (const MapEntry &f : fields) {
      const MapEntry **slot = f.key == "name"     ? &name
                              : f.key == "params" ? &params
                              : f.key == "loss"   ? &loss
                                                  : &kind;
      if (slot == &kind && kind)
        return r.error(f.keyNode, what + " has two optimizers '" + kind->key + "' and '" + f.key +
                                      "'; give one with its 'name', 'params' and 'loss'");
      *slot = &f;
    }
    if (!kind)
      return r.error(item, what + " names no optimizer; expected sgd, adam, adamw or lamb");
    if (!name)
      return r.error(item, what + " has no 'name' (train.schedule and the logs use it)");
    if (!params)
      return r.error(item, what + " has no 'params' (the globs of the parameters it updates)");
    std::string prefix = "optimizers." + std::to_string(index);
    std::string optName;
    if (!r.readString(name->value, "'name'", optName))
      return false;
    if (optName.empty() ||
        !llvm::all_of(optName, [](char c) { return llvm::isAlnum(c) || c == '_' || c == '-'; }))
      return r.error(name->value, "optimizer name '" + optName +
                                      "' must be letters, digits, '_' and '-' (it names values)");
    if (!byName.try_emplace(optName, index).second)
      return r.error(name->value, "two optimizers are named '" + optName + "'");
    int64_t term = 0;
    if (loss) {
      if (!r.readInt(loss->value, "'loss'", term))
        return false;
      if (term < 0 || term >= terms)
        return r.error(loss->value, "'loss' of " + what + " is " + llvm::Twine(term) +
                                        ", but the model's loss has " + llvm::Twine(terms) +
                                        " term(s) (0-based, in the order of 'loss:')");
    } else if (terms > 1) {
      return r.error(item, what + " has no 'loss': give the index of the loss term it steps "
                                  "on (0-based, in the order of 'loss:')");
    }
    // Its parameters, by glob (as a parameter group's).
    std::string written;
    if (!claimParams(
            r, params->value, g, index, "optimizers", [](const Value *p) { return p->trainable(); },
            owner,
            [&](const Value *p) { meta["optimizer.of." + p->name().str()] = Attribute(index); },
            "trainable parameter", written))
      return false;
    auto holds = [&, index](const Value *p) {
      auto it = owner.find(p->name());
      return it != owner.end() && it->second.first == index;
    };
    if (!readOneOptimizer(r, *kind, g, meta, prefix, holds))
      return false;
    meta[prefix + ".name"] = Attribute(optName);
    meta[prefix + ".params"] = Attribute(written);
    meta[prefix + ".loss"] = Attribute(term);
    meta[prefix + ".turns"] = Attribute(std::vector<int64_t>{0});
    kinds += (kinds.empty() ? "" : ",") + kind->key;
    ++index;
  }
  for (const Value *p : g.state(StateKind::Parameter))
    if (p->trainable() && !owner.count(p->name()))
      return r.error(list, "parameter '" + p->name() +
                               "' is in no optimizer; add it to one's 'params' or freeze it "
                               "(trainable: false)");
  meta["optimizers"] = Attribute(index);
  meta["optimizers.period"] = Attribute(int64_t(1));
  meta["optimizer"] = Attribute(kinds);
  return true;
}

} // namespace

bool readOptimizer(Reader &r, const Bound &node, const Graph &g, AttrMap &meta) {
  Bound resolved;
  if (!r.resolve(node, resolved))
    return false;
  if (resolved.node.IsSequence())
    return readOptimizerList(r, resolved, g, meta);
  MapEntry opt;
  if (!r.readOneKeyMap(node, "'optimizer'", opt))
    return false;
  return readOneOptimizer(r, opt, g, meta, "optimizer", [](const Value *) { return true; });
}

/// Whether idx data may go without its labels file: the input it feeds
/// (the first integer input) is optional.
static bool idxLabelsOptional(const Graph &g, llvm::ArrayRef<std::string> optional) {
  for (const Value *in : g.inputs())
    if (!isFloating(in->dtype()))
      return llvm::is_contained(optional, in->name());
  return false;
}

/// A required path argument into meta as "<key>.<name>".
static bool readPath(Reader &r, const MapEntries &args, llvm::StringRef name,
                     const std::string &key, const Location &where, llvm::StringRef context,
                     AttrMap &meta) {
  const MapEntry *e = findEntry(args, name);
  if (!e)
    return r.error(where, "missing '" + name + "' for " + context);
  std::string path;
  if (!r.readString(e->value, "'" + name + "'", path))
    return false;
  if (path.empty())
    return r.error(e->value, "'" + name + "' is empty");
  meta[key + "." + name.str()] = Attribute(path);
  return true;
}

/// `{one: value}` choices: the argument `name`, which must be one of
/// `choices`, into meta (the first choice when absent).
static bool readChoice(Reader &r, const MapEntries &args, llvm::StringRef name,
                       llvm::ArrayRef<llvm::StringRef> choices, const std::string &key,
                       AttrMap &meta) {
  std::string value = choices.front().str();
  if (const MapEntry *e = findEntry(args, name)) {
    if (!r.readString(e->value, "'" + name + "'", value))
      return false;
    if (!llvm::is_contained(choices, value)) {
      std::string list;
      for (llvm::StringRef c : choices)
        list += (list.empty() ? "" : ", ") + c.str();
      return r.error(e->value, "'" + name + "' must be one of " + list + ", got '" + value + "'");
    }
  }
  meta[key + "." + name.str()] = Attribute(value);
  return true;
}

/// `tokens: {path, dtype: uint16, context, seed, positions}` (runtime/data/TokenData.cpp).
/// Without `context` the token input's length is the context; without
/// `seed` the windows follow train.seed.
static bool readTokenData(Reader &r, const MapEntries &args, const std::string &key,
                          const Location &where, AttrMap &meta) {
  if (!r.checkKnownKeys(args, {"path", "dtype", "context", "seed", "positions"}, "argument",
                        " for tokens data") ||
      !readPath(r, args, "path", key, where, "tokens data", meta) ||
      !readChoice(r, args, "dtype", {"uint16", "uint32", "int32", "int64"}, key, meta))
    return false;
  if (const MapEntry *e = findEntry(args, "positions")) {
    std::string name;
    if (!r.readString(e->value, "'positions'", name))
      return false;
    meta[key + ".positions"] = Attribute(name);
  }
  for (const Setting &s : {Setting{"context", AttrType::Int, std::nullopt, 0, true},
                           Setting{"seed", AttrType::Int, std::nullopt, -1e18}})
    if (findEntry(args, s.name) && !readSettings(r, args, {s}, key, where, "tokens data", meta))
      return false;
  return true;
}

/// A list of `n` numbers (or one, alone or in a list, repeated) under
/// `name`, each within the setting's range.
static bool readNumberList(Reader &r, const MapEntry &e, size_t n, const Setting &s,
                           std::vector<double> &out) {
  if (e.value.node.IsScalar()) {
    double v;
    if (!r.readFloat(e.value, "'" + e.key + "'", v))
      return false;
    out.assign(n, v);
  } else if (!r.readFloatList(e.value, "'" + e.key + "'", out)) {
    return false;
  }
  if (out.size() == 1)
    out.assign(n, out[0]);
  if (out.size() != n)
    return r.error(e.value, "'" + e.key + "' must be one number or a list of " + llvm::Twine(n) +
                                " numbers");
  for (double v : out)
    if (!checkRange(r, e.value, s, v))
      return false;
  return true;
}

/// `image_folder: {path, size, resize, augment: {random_resized_crop: {scale,
/// ratio}, hflip}, normalize: {mean, std}, bad_files, seed}`
/// (runtime/data/ImageFolderData.cpp, docs/data.md).
static bool readImageFolderData(Reader &r, const MapEntries &args, const std::string &key,
                                const Location &where, AttrMap &meta) {
  const char *context = "image_folder data";
  if (!r.checkKnownKeys(args,
                        {"path", "size", "resize", "augment", "normalize", "bad_files", "seed"},
                        "argument", " for image_folder data") ||
      !readPath(r, args, "path", key, where, context, meta) ||
      !readChoice(r, args, "bad_files", {"error", "skip"}, key, meta))
    return false;
  const Setting positive{"size", AttrType::Int, std::nullopt, 0, true};
  if (const MapEntry *e = findEntry(args, "size")) {
    std::vector<double> hw;
    if (!readNumberList(r, *e, 2, positive, hw))
      return false;
    if (hw[0] != std::floor(hw[0]) || hw[1] != std::floor(hw[1]))
      return r.error(e->value, "'size' must be whole pixels [height, width]");
    meta[key + ".size"] = Attribute(std::vector<int64_t>{int64_t(hw[0]), int64_t(hw[1])});
  }
  for (const Setting &s : {Setting{"resize", AttrType::Int, std::nullopt, 0, true},
                           Setting{"seed", AttrType::Int, std::nullopt, -1e18}})
    if (findEntry(args, s.name) && !readSettings(r, args, {s}, key, where, context, meta))
      return false;
  if (const MapEntry *e = findEntry(args, "augment")) {
    MapEntries augment;
    if (!r.readMap(e->value, "'augment'", augment) ||
        !r.checkKnownKeys(augment, {"random_resized_crop", "hflip"}, "augmentation",
                          " (random_resized_crop, hflip)"))
      return false;
    std::string prefix = key + ".augment";
    if (const MapEntry *h = findEntry(augment, "hflip")) {
      bool flip;
      if (!r.readBool(h->value, "'hflip'", flip))
        return false;
      meta[prefix + ".hflip"] = Attribute(flip);
    }
    if (const MapEntry *c = findEntry(augment, "random_resized_crop")) {
      MapEntries crop;
      if (!r.readMap(c->value, "'random_resized_crop'", crop) ||
          !r.checkKnownKeys(crop, {"scale", "ratio"}, "argument", " for random_resized_crop"))
        return false;
      // torchvision's defaults.
      std::vector<double> scale{0.08, 1.0}, ratio{3.0 / 4.0, 4.0 / 3.0};
      const Setting fraction{"scale", AttrType::Float, std::nullopt, 0, true, 1.0 + 1e-12};
      const Setting aspect{"ratio", AttrType::Float, std::nullopt, 0, true};
      if (const MapEntry *sc = findEntry(crop, "scale"))
        if (!readNumberList(r, *sc, 2, fraction, scale))
          return false;
      if (const MapEntry *ra = findEntry(crop, "ratio"))
        if (!readNumberList(r, *ra, 2, aspect, ratio))
          return false;
      if (scale[0] > scale[1] || ratio[0] > ratio[1])
        return r.error(c->value, "random_resized_crop's scale and ratio are [low, high] ranges");
      meta[prefix + ".random_resized_crop.scale"] = Attribute(scale);
      meta[prefix + ".random_resized_crop.ratio"] = Attribute(ratio);
    }
  }
  if (const MapEntry *e = findEntry(args, "normalize")) {
    MapEntries norm;
    if (!r.readMap(e->value, "'normalize'", norm) ||
        !r.checkKnownKeys(norm, {"mean", "std"}, "argument", " for normalize"))
      return false;
    std::vector<double> mean{0, 0, 0}, stdev{1, 1, 1};
    const Setting any{"mean", AttrType::Float, std::nullopt, -1e300};
    const Setting positiveStd{"std", AttrType::Float, std::nullopt, 0, true};
    if (const MapEntry *m = findEntry(norm, "mean"))
      if (!readNumberList(r, *m, 3, any, mean))
        return false;
    if (const MapEntry *sd = findEntry(norm, "std"))
      if (!readNumberList(r, *sd, 3, positiveStd, stdev))
        return false;
    meta[key + ".normalize.mean"] = Attribute(mean);
    meta[key + ".normalize.std"] = Attribute(stdev);
  }
  return true;
}

bool readData(Reader &r, const Bound &node, const Graph &g, AttrMap &meta, const std::string &key,
              llvm::ArrayRef<std::string> optional) {
  MapEntry data;
  if (!r.readOneKeyMap(node, "'data'", data))
    return false;
  MapEntries args;
  if (!r.readMap(data.value, "the arguments of " + data.key, args))
    return false;
  meta[key] = Attribute(data.key);
  Location where = r.loc(data.keyNode);

  if (data.key == "synthetic") {
    const Setting settings[] = {{"seed", AttrType::Int, int64_t(0)},
                                {"size", AttrType::Int, int64_t(1024), 0, true}};
    return r.checkKnownKeys(args, settingNames(settings), "argument", " for synthetic data") &&
           readSettings(r, args, settings, key, where, "synthetic data", meta);
  }
  if (data.key == "idx" || data.key == "csv") {
    // Paths are kept as written (relative to the model file); the data
    // source opens them when training starts, not at import.
    bool idx = data.key == "idx";
    std::vector<llvm::StringRef> known =
        idx ? std::vector<llvm::StringRef>{"images", "labels"}
            : std::vector<llvm::StringRef>{"path", "label_column", "header"};
    if (!r.checkKnownKeys(args, known, "argument", " for " + data.key + " data"))
      return false;
    for (llvm::StringRef pathKey : idx ? llvm::ArrayRef<llvm::StringRef>(known).take_front(2)
                                       : llvm::ArrayRef<llvm::StringRef>(known).take_front(1)) {
      const MapEntry *e = findEntry(args, pathKey);
      if (!e && idx && pathKey == "labels" && idxLabelsOptional(g, optional))
        continue;
      if (!e)
        return r.error(where, "missing '" + pathKey + "' for " + data.key + " data");
      std::string path;
      if (!r.readString(e->value, "'" + pathKey + "'", path))
        return false;
      meta[key + "." + pathKey.str()] = Attribute(path);
    }
    if (idx)
      return true;
    const Setting settings[] = {{"label_column", AttrType::Int, int64_t(-1), -1e18},
                                {"header", AttrType::Bool, false}};
    return readSettings(r, args, settings, key, where, "csv data", meta);
  }
  if (data.key == "npy") {
    if (args.empty())
      return r.error(where, "npy data needs a file for each graph input");
    for (const MapEntry &e : args) {
      const Value *v = g.lookup(e.key);
      if (!v || !v->isInput())
        return r.error(e.keyNode, "'" + e.key + "' is not a graph input");
      std::string path;
      if (!r.readString(e.value, "'" + e.key + "'", path))
        return false;
      meta[key + "." + e.key] = Attribute(path);
    }
    for (const Value *in : g.inputs())
      if (!findEntry(args, in->name()) && !llvm::is_contained(optional, in->name()))
        return r.error(where, "npy data has no file for input '" + in->name() + "'");
    return true;
  }
  if (data.key == "tokens")
    return readTokenData(r, args, key, where, meta);
  if (data.key == "image_folder")
    return readImageFolderData(r, args, key, where, meta);
  return r.error(data.keyNode, "unknown data source '" + data.key +
                                   "'; expected synthetic, idx, npy, csv, tokens or image_folder");
}

namespace {

/// `lr_schedule: {constant|step|cosine: {...}}` into train.lr_schedule and
/// train.lr_schedule.<setting>. Settings count optimizer steps.
bool readSchedule(Reader &r, const Bound &node, AttrMap &meta) {
  MapEntry schedule;
  if (!r.readOneKeyMap(node, "'lr_schedule'", schedule))
    return false;
  const Setting warmup = {"warmup_steps", AttrType::Int, int64_t(0), 0};
  std::vector<Setting> settings;
  if (schedule.key == "constant")
    settings = {warmup};
  else if (schedule.key == "step")
    settings = {warmup,
                {"step_size", AttrType::Int, std::nullopt, 0, true},
                {"gamma", AttrType::Float, 0.1, 0, true}};
  else if (schedule.key == "cosine")
    settings = {warmup, {"min_lr", AttrType::Float, 0.0}};
  else
    return r.error(schedule.keyNode,
                   "unknown lr_schedule '" + schedule.key + "'; expected constant, step or cosine");
  MapEntries args;
  std::vector<llvm::StringRef> known = settingNames(settings);
  if (schedule.key == "cosine")
    known.push_back("total_steps");
  if (!r.readMap(schedule.value, "the arguments of " + schedule.key, args) ||
      !r.checkKnownKeys(args, known, "argument", " for the " + schedule.key + " schedule"))
    return false;
  meta["train.lr_schedule"] = Attribute(schedule.key);
  Location where = r.loc(schedule.keyNode);
  if (!readSettings(r, args, settings, "train.lr_schedule", where,
                    "the " + schedule.key + " schedule", meta))
    return false;
  if (schedule.key != "cosine")
    return true;

  // Cosine decays over the run: its own total_steps, else train.steps (the
  // training loop sets that from epochs when the file gives epochs).
  const MapEntry *total = findEntry(args, "total_steps");
  if (total) {
    const Setting totalSetting = {"total_steps", AttrType::Int, std::nullopt, 0, true};
    if (!readSettings(r, args, llvm::ArrayRef<Setting>(totalSetting), "train.lr_schedule", where,
                      "the cosine schedule", meta))
      return false;
  }
  auto totalIt = meta.find(total ? "train.lr_schedule.total_steps" : "train.steps");
  int64_t warmupSteps = meta["train.lr_schedule.warmup_steps"].getInt();
  if (totalIt != meta.end() && warmupSteps >= totalIt->second.getInt()) {
    const MapEntry *w = findEntry(args, "warmup_steps");
    return r.error(w ? w->value : schedule.value,
                   "'warmup_steps' (" + llvm::Twine(warmupSteps) +
                       ") must be less than the schedule's total of " +
                       llvm::Twine(totalIt->second.getInt()) + " steps");
  }
  auto lr = meta.find("optimizer.lr");
  double minLr = meta["train.lr_schedule.min_lr"].getNumber();
  if (lr != meta.end() && minLr > lr->second.getNumber())
    return r.error(findEntry(args, "min_lr")->value,
                   "'min_lr' (" + formatDouble(minLr) + ") must not exceed the optimizer's lr (" +
                       formatDouble(lr->second.getNumber()) + ")");
  return true;
}

} // namespace

bool readTrain(Reader &r, const Bound &node, const Graph &g, AttrMap &meta) {
  MapEntries args;
  const Setting settings[] = {
      {"steps", AttrType::Int, std::nullopt, 0, true},
      {"epochs", AttrType::Int, std::nullopt, 0, true},
      {"accumulate", AttrType::Int, int64_t(1), 1},
      {"eval_every", AttrType::Int, int64_t(0), 0},
      {"log_every", AttrType::Int, int64_t(10), 0},
      {"seed", AttrType::Int, int64_t(0), -1e18},
      {"shuffle", AttrType::Bool, true},
      {"drop_last", AttrType::Bool, true},
  };
  std::vector<llvm::StringRef> known = settingNames(settings);
  known.push_back("data");
  known.push_back("eval_data");
  known.push_back("forward_training");
  known.push_back("sync_batchnorm");
  known.push_back("lr_schedule");
  known.push_back("clip_grad_norm");
  known.push_back("non_finite_data");
  known.push_back("ema");
  known.push_back("schedule");
  known.push_back("recompute");
  if (!r.readMap(node, "'train'", args) || !r.checkKnownKeys(args, known, "key", " in 'train'"))
    return false;
  const MapEntry *steps = findEntry(args, "steps"), *epochs = findEntry(args, "epochs");
  if (steps && epochs)
    return r.error(epochs->keyNode, "give 'steps' or 'epochs', not both");
  // steps and epochs are optional (the command line may give them); the
  // rest have defaults.
  for (const Setting &s : settings) {
    if (!s.defaultValue && !findEntry(args, s.name))
      continue;
    if (!readSettings(r, args, llvm::ArrayRef<Setting>(s), "train", r.loc(node), "'train'", meta))
      return false;
  }
  if (const MapEntry *clip = findEntry(args, "clip_grad_norm")) {
    const Setting clipSetting = {"clip_grad_norm", AttrType::Float, std::nullopt, 0, true};
    if (!readSettings(r, args, llvm::ArrayRef<Setting>(clipSetting), "train", r.loc(clip->keyNode),
                      "'train'", meta))
      return false;
  }
  // An average of the weights over the optimizer steps (passes/Ema.h).
  if (const MapEntry *ema = findEntry(args, "ema")) {
    MapEntries emaArgs;
    const Setting emaSettings[] = {{"decay", AttrType::Float, std::nullopt, 0, false, 1.0}};
    if (!r.readMap(ema->value, "'ema'", emaArgs) ||
        !r.checkKnownKeys(emaArgs, settingNames(emaSettings), "key", " in 'ema'") ||
        !readSettings(r, emaArgs, emaSettings, "train.ema", r.loc(ema->keyNode), "'ema'", meta))
      return false;
  }
  if (const MapEntry *schedule = findEntry(args, "schedule"))
    if (!readOptimizerSchedule(r, *schedule, meta))
      return false;
  // Cheap forward values recomputed for the backward (passes/Recompute.h);
  // only when given, so that other models' meta stays as it was.
  if (findEntry(args, "recompute") &&
      !readChoice(r, args, "recompute", {"none", "cheap"}, "train", meta))
    return false;
  if (const MapEntry *policy = findEntry(args, "non_finite_data")) {
    std::string value;
    if (!r.readString(policy->value, "'non_finite_data'", value))
      return false;
    if (value != "error" && value != "skip")
      return r.error(policy->value, "'non_finite_data' must be error or skip, got '" + value + "'");
    meta["train.non_finite_data"] = Attribute(value);
  }
  if (const MapEntry *schedule = findEntry(args, "lr_schedule")) {
    if (!readSchedule(r, schedule->value, meta))
      return false;
  } else {
    meta["train.lr_schedule"] = Attribute("constant");
    meta["train.lr_schedule.warmup_steps"] = Attribute(int64_t(0));
  }
  if (const MapEntry *forward = findEntry(args, "forward_training")) {
    const Setting setting = {"forward_training", AttrType::Bool, false};
    if (!readSettings(r, args, llvm::ArrayRef<Setting>(setting), "train", r.loc(forward->keyNode),
                      "'train'", meta))
      return false;
  }
  // Data-parallel training's SyncBatchNorm (passes/SyncBatchNorm.h); only
  // when given, so that other models' meta stays as it was.
  if (const MapEntry *sync = findEntry(args, "sync_batchnorm")) {
    const Setting setting = {"sync_batchnorm", AttrType::Bool, false};
    if (!readSettings(r, args, llvm::ArrayRef<Setting>(setting), "train", r.loc(sync->keyNode),
                      "'train'", meta))
      return false;
  }
  if (const MapEntry *evalData = findEntry(args, "eval_data"))
    if (!readData(r, evalData->value, g, meta, "train.eval_data"))
      return false;
  if (const MapEntry *data = findEntry(args, "data"))
    return readData(r, data->value, g, meta, "train.data");
  meta["train.data"] = Attribute("synthetic");
  meta["train.data.seed"] = Attribute(int64_t(0));
  meta["train.data.size"] = Attribute(int64_t(1024));
  return true;
}

namespace {

/// A name or a list of op names into a comma-separated string, each checked
/// against the op registry.
bool readOpNames(Reader &r, const MapEntry &e, std::vector<std::string> &names) {
  std::vector<Bound> items;
  if (!r.readStringList(e.value, "'" + e.key + "'", items))
    return false;
  std::vector<llvm::StringRef> known;
  for (const OpInfo *op : OpRegistry::builtin().all())
    known.push_back(op->name);
  for (const Bound &item : items) {
    std::string name = item.node.Scalar();
    if (!OpRegistry::builtin().lookup(name)) {
      std::string hint = Reader::closest(name, known);
      return r.error(item, "unknown op '" + name + "' in '" + e.key + "'" +
                               (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
    names.push_back(name);
  }
  return true;
}

/// `loss_scale:` is "dynamic", a number (a static scale), or a map of
/// dynamic-scaling settings (which implies dynamic).
bool readLossScale(Reader &r, const MapEntry &e, AttrMap &meta) {
  if (e.value.node.IsMap()) {
    MapEntries args;
    const Setting settings[] = {
        {"init", AttrType::Float, 65536.0, 0, true},
        {"growth_factor", AttrType::Float, 2.0, 1},
        {"backoff_factor", AttrType::Float, 0.5, 0, true, 1.0},
        {"growth_interval", AttrType::Int, int64_t(2000), 1},
        {"min", AttrType::Float, 1.0, 0, true},
        {"max", AttrType::Float, 16777216.0, 0, true},
    };
    if (!r.readMap(e.value, "'loss_scale'", args) ||
        !r.checkKnownKeys(args, settingNames(settings), "setting", " in 'loss_scale'"))
      return false;
    // Only what the file gives goes into meta: the rest stays the preset's.
    AttrMap given;
    for (const Setting &s : settings)
      if (findEntry(args, s.name) &&
          !readSettings(r, args, llvm::ArrayRef<Setting>(s), "amp.loss_scale", r.loc(e.keyNode),
                        "'loss_scale'", given))
        return false;
    auto number = [&](const char *key, double preset) {
      auto it = given.find(key);
      return it == given.end() ? preset : it->second.getNumber();
    };
    double init = number("amp.loss_scale.init", 65536.0);
    double lo = number("amp.loss_scale.min", 1.0), hi = number("amp.loss_scale.max", 16777216.0);
    if (lo > hi)
      return r.error(e.value, "'min' (" + formatDouble(lo) + ") must not exceed 'max' (" +
                                  formatDouble(hi) + ") in 'loss_scale'");
    if (init < lo || init > hi)
      return r.error(e.value, "'init' (" + formatDouble(init) + ") must be within [" +
                                  formatDouble(lo) + ", " + formatDouble(hi) + "] in 'loss_scale'");
    meta["amp.loss_scale"] = Attribute("dynamic");
    for (auto &[key, value] : given)
      meta[key] = value;
    return true;
  }
  std::string text;
  if (!r.readString(e.value, "'loss_scale'", text))
    return false;
  if (text == "dynamic") {
    meta["amp.loss_scale"] = Attribute("dynamic");
    return true;
  }
  char *end = nullptr;
  double scale = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(scale > 0) || !std::isfinite(scale))
    return r.error(e.value, "'loss_scale' must be dynamic, a positive number (a static scale) "
                            "or a map of dynamic settings, got " +
                                Reader::describe(e.value.node));
  meta["amp.loss_scale"] = Attribute("static");
  meta["amp.loss_scale.value"] = Attribute(scale);
  return true;
}

} // namespace

bool readAmp(Reader &r, const Bound &node, AttrMap &meta) {
  MapEntries args;
  const llvm::StringRef known[] = {
      "opt_level",      "half_type",  "cast_model_type", "per_op_casting", "keep_batchnorm_fp32",
      "master_weights", "loss_scale", "fp32_ops",        "half_ops",       "allow_banned",
      "num_losses"};
  if (!r.readMap(node, "'amp'", args) || !r.checkKnownKeys(args, known, "key", " in 'amp'"))
    return false;
  std::vector<std::string> fp32Ops, halfOps;
  for (const MapEntry &e : args) {
    std::string key = "amp." + e.key;
    if (e.key == "per_op_casting" || e.key == "keep_batchnorm_fp32" || e.key == "master_weights" ||
        e.key == "allow_banned") {
      bool b = false;
      if (!r.readBool(e.value, "'" + e.key + "'", b))
        return false;
      meta[key] = Attribute(b);
      continue;
    }
    if (e.key == "num_losses") {
      int64_t n = 0;
      if (!r.readInt(e.value, "'num_losses'", n))
        return false;
      if (n < 1)
        return r.error(e.value, "'num_losses' must be at least 1, got " + llvm::Twine(n));
      meta[key] = Attribute(n);
      continue;
    }
    if (e.key == "loss_scale") {
      if (!readLossScale(r, e, meta))
        return false;
      continue;
    }
    if (e.key == "fp32_ops" || e.key == "half_ops") {
      std::vector<std::string> &names = e.key == "fp32_ops" ? fp32Ops : halfOps;
      if (!readOpNames(r, e, names))
        return false;
      std::string joined;
      for (const std::string &n : names)
        joined += (joined.empty() ? "" : ",") + n;
      meta[key] = Attribute(joined);
      continue;
    }
    std::string text;
    if (!r.readString(e.value, "'" + e.key + "'", text))
      return false;
    llvm::SmallVector<llvm::StringRef, 4> allowed;
    if (e.key == "opt_level")
      allowed = {"O0", "O1", "O2", "O3"};
    else if (e.key == "half_type")
      allowed = {"bf16", "f16"};
    else
      allowed = {"none", "half"};
    if (!llvm::is_contained(allowed, text)) {
      std::string list;
      for (llvm::StringRef a : allowed)
        list += (list.empty() ? "" : ", ") + a.str();
      return r.error(e.value, "'" + e.key + "' must be one of " + list + ", got " +
                                  Reader::describe(e.value.node));
    }
    meta[key] = Attribute(text);
  }
  for (const std::string &op : fp32Ops)
    if (llvm::is_contained(halfOps, op))
      return r.error(findEntry(args, "half_ops")->value,
                     "op '" + op + "' is in both 'fp32_ops' and 'half_ops'");
  return true;
}

} // namespace ampc::yamlfe

namespace ampc {

bool parseDataSpec(llvm::StringRef text, llvm::StringRef bufferName, const Graph &g,
                   llvm::StringRef key, AttrMap &meta, DiagnosticEngine &diag,
                   llvm::ArrayRef<std::string> optional) {
  yamlfe::Reader r(diag, Location::inFile(bufferName.str(), 1, 1));
  try {
    YAML::Node root = YAML::Load(text.str());
    return yamlfe::readData(r, yamlfe::Bound(root), g, meta, key.str(), optional);
  } catch (const YAML::Exception &e) {
    r.error(r.loc(e.mark), "invalid YAML: " + e.msg);
  }
  return false;
}

} // namespace ampc
