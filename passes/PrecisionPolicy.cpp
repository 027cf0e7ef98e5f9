//===- PrecisionPolicy.cpp --------------------------------------------------===//
#include "passes/PrecisionPolicy.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

namespace ampc {

namespace {

constexpr llvm::StringRef kPrefix = "amp.";

/// Every property in printing order; the meta key is "amp." + name.
constexpr llvm::StringRef kProperties[] = {
    "opt_level",
    "half_type",
    "cast_model_type",
    "per_op_casting",
    "keep_batchnorm_fp32",
    "master_weights",
    "loss_scale",
    "loss_scale.value",
    "loss_scale.init",
    "loss_scale.growth_factor",
    "loss_scale.backoff_factor",
    "loss_scale.growth_interval",
    "loss_scale.min",
    "loss_scale.max",
    "fp32_ops",
    "half_ops",
    "allow_banned",
    "num_losses",
};

bool isDynamicSetting(llvm::StringRef property) {
  return property.startswith("loss_scale.") && property != "loss_scale.value";
}

/// The kind of value a property holds in meta.
enum class PropertyType { String, Bool, Number, Int };

PropertyType propertyType(llvm::StringRef p) {
  if (p == "per_op_casting" || p == "keep_batchnorm_fp32" || p == "master_weights" ||
      p == "allow_banned")
    return PropertyType::Bool;
  if (p == "loss_scale.growth_interval" || p == "num_losses")
    return PropertyType::Int;
  if (p.startswith("loss_scale."))
    return PropertyType::Number;
  return PropertyType::String;
}

std::string describe(const Attribute &a) { return attrTypeName(a.type()).str() + " " + a.str(); }

std::optional<DType> parseHalfType(llvm::StringRef s) {
  std::string lower = s.lower();
  if (lower == "bf16" || lower == "bfloat16")
    return DType::BF16;
  if (lower == "f16" || lower == "fp16" || lower == "float16" || lower == "half")
    return DType::F16;
  return std::nullopt;
}

std::optional<CastModelType> parseCastModelType(llvm::StringRef s) {
  std::string lower = s.lower();
  if (lower == "none" || lower == "f32" || lower == "fp32" || lower == "float32")
    return CastModelType::None;
  if (lower == "half")
    return CastModelType::Half;
  return std::nullopt;
}

std::optional<bool> parseBool(llvm::StringRef s) {
  std::string lower = s.lower();
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on")
    return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off")
    return false;
  return std::nullopt;
}

/// Reads one policy from meta, reporting every bad key (not just the first).
class PolicyReader {
public:
  PolicyReader(const AttrMap &meta, DiagnosticEngine &diag,
               const llvm::StringMap<Location> *locations)
      : meta_(meta), diag_(diag), locations_(locations) {}

  std::optional<PrecisionPolicy> read() {
    unsigned errorsBefore = diag_.numErrors();
    OptLevel level = OptLevel::O0;
    if (const Attribute *a = find("opt_level"))
      if (std::optional<std::string> s = string("opt_level", *a)) {
        if (std::optional<OptLevel> l = parseOptLevel(*s))
          level = *l;
        else
          bad("opt_level", "must be one of O0, O1, O2, O3, got \"" + *s + "\"");
      }
    PrecisionPolicy p = PrecisionPolicy::preset(level);
    for (llvm::StringRef property : kProperties)
      if (find(property))
        p.overridden.insert((kPrefix + property).str());

    if (const Attribute *a = find("half_type"))
      if (std::optional<std::string> s = string("half_type", *a)) {
        if (std::optional<DType> t = parseHalfType(*s))
          p.halfType = *t;
        else
          bad("half_type", "must be bf16 or f16, got \"" + *s + "\"");
      }
    if (const Attribute *a = find("cast_model_type"))
      if (std::optional<std::string> s = string("cast_model_type", *a)) {
        if (std::optional<CastModelType> c = parseCastModelType(*s))
          p.castModelType = *c;
        else
          bad("cast_model_type", "must be none or half, got \"" + *s + "\"");
      }
    readBool("per_op_casting", p.perOpCasting);
    readBool("keep_batchnorm_fp32", p.keepBatchnormFp32);
    readBool("master_weights", p.masterWeights);
    readBool("allow_banned", p.allowBanned);

    if (const Attribute *a = find("loss_scale"))
      if (std::optional<std::string> s = string("loss_scale", *a)) {
        if (*s == "dynamic")
          p.dynamicLossScale = true;
        else if (*s == "static")
          p.dynamicLossScale = false;
        else
          bad("loss_scale", "must be \"dynamic\" or \"static\", got \"" + *s + "\"");
      }
    readPositive("loss_scale.value", p.staticLossScale);
    readPositive("loss_scale.init", p.dynamic.init);
    readPositive("loss_scale.min", p.dynamic.minScale);
    readPositive("loss_scale.max", p.dynamic.maxScale);
    if (readNumber("loss_scale.growth_factor", p.dynamic.growthFactor) &&
        !(p.dynamic.growthFactor >= 1.0))
      bad("loss_scale.growth_factor",
          "must be at least 1, got " + formatDouble(p.dynamic.growthFactor));
    if (readNumber("loss_scale.backoff_factor", p.dynamic.backoffFactor) &&
        !(p.dynamic.backoffFactor > 0.0 && p.dynamic.backoffFactor < 1.0))
      bad("loss_scale.backoff_factor",
          "must be between 0 and 1 (exclusive), got " + formatDouble(p.dynamic.backoffFactor));
    readPositiveInt("loss_scale.growth_interval", p.dynamic.growthInterval);
    if (p.dynamicLossScale && diag_.numErrors() == errorsBefore) {
      if (p.dynamic.minScale > p.dynamic.maxScale)
        bad("loss_scale.min", "(" + formatDouble(p.dynamic.minScale) +
                                  ") must not exceed amp.loss_scale.max (" +
                                  formatDouble(p.dynamic.maxScale) + ")");
      else if (p.dynamic.init < p.dynamic.minScale || p.dynamic.init > p.dynamic.maxScale)
        bad("loss_scale.init", "(" + formatDouble(p.dynamic.init) + ") must be within [" +
                                   formatDouble(p.dynamic.minScale) + ", " +
                                   formatDouble(p.dynamic.maxScale) + "]");
    }

    readPositiveInt("num_losses", p.numLosses);

    readOpList("fp32_ops", p.fp32Ops);
    readOpList("half_ops", p.halfOps);
    for (const std::string &op : p.fp32Ops)
      if (llvm::is_contained(p.halfOps, op))
        diag_.error(where("half_ops"), "op '" + op + "' is in both amp.fp32_ops and amp.half_ops");

    if (diag_.numErrors() != errorsBefore)
      return std::nullopt;
    normalize(p);
    return p;
  }

private:
  const Attribute *find(llvm::StringRef property) const {
    auto it = meta_.find((kPrefix + property).str());
    return it == meta_.end() ? nullptr : &it->second;
  }
  void bad(llvm::StringRef property, const llvm::Twine &msg) {
    diag_.error(where(property), kPrefix + property + " " + msg);
  }
  /// Where amp.<property> was written, if the graph knows.
  Location where(llvm::StringRef property) const {
    if (!locations_)
      return Location();
    auto it = locations_->find((kPrefix + property).str());
    return it == locations_->end() ? Location() : it->second;
  }
  std::optional<std::string> string(llvm::StringRef property, const Attribute &a) {
    if (a.is(AttrType::String))
      return a.getString();
    bad(property, "must be a string, got " + describe(a));
    return std::nullopt;
  }
  void readBool(llvm::StringRef property, bool &out) {
    const Attribute *a = find(property);
    if (!a)
      return;
    if (a->is(AttrType::Bool))
      out = a->getBool();
    else
      bad(property, "must be a bool, got " + describe(*a));
  }
  /// True when the key is present and a number.
  bool readNumber(llvm::StringRef property, double &out) {
    const Attribute *a = find(property);
    if (!a)
      return false;
    if (!a->is(AttrType::Float) && !a->is(AttrType::Int)) {
      bad(property, "must be a number, got " + describe(*a));
      return false;
    }
    out = a->getNumber();
    return true;
  }
  void readPositiveInt(llvm::StringRef property, int64_t &out) {
    const Attribute *a = find(property);
    if (!a)
      return;
    if (!a->is(AttrType::Int))
      bad(property, "must be an int, got " + describe(*a));
    else if (a->getInt() < 1)
      bad(property, "must be at least 1, got " + a->str());
    else
      out = a->getInt();
  }
  void readPositive(llvm::StringRef property, double &out) {
    if (readNumber(property, out) && !(out > 0 && std::isfinite(out)))
      bad(property, "must be a positive finite number, got " + formatDouble(out));
  }
  void readOpList(llvm::StringRef property, std::vector<std::string> &out) {
    const Attribute *a = find(property);
    if (!a)
      return;
    std::optional<std::string> s = string(property, *a);
    if (!s)
      return;
    out = splitOpList(*s);
    for (const std::string &name : out)
      if (!OpRegistry::builtin().lookup(name))
        bad(property, "names an unknown op '" + name + "'");
  }

  /// Properties that cannot act in the resolved combination are switched
  /// off, so the printed policy says what happens (warnPolicy says why when
  /// the user set them).
  void normalize(PrecisionPolicy &p) {
    if (p.castModelType == CastModelType::None) {
      p.masterWeights = false;
      p.keepBatchnormFp32 = false;
    }
  }

  const AttrMap &meta_;
  DiagnosticEngine &diag_;
  const llvm::StringMap<Location> *locations_;
};

std::string joined(llvm::ArrayRef<std::string> names) {
  std::string s;
  for (const std::string &n : names)
    s += (s.empty() ? "" : ",") + n;
  return s;
}

} // namespace

llvm::StringRef optLevelName(OptLevel l) {
  switch (l) {
  case OptLevel::O0:
    return "O0";
  case OptLevel::O1:
    return "O1";
  case OptLevel::O2:
    return "O2";
  case OptLevel::O3:
    return "O3";
  }
  return "?";
}

std::optional<OptLevel> parseOptLevel(llvm::StringRef s) {
  for (OptLevel l : {OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3})
    if (s.equals_insensitive(optLevelName(l)))
      return l;
  return std::nullopt;
}

PrecisionPolicy PrecisionPolicy::preset(OptLevel level) {
  PrecisionPolicy p;
  p.optLevel = level;
  switch (level) {
  case OptLevel::O0: // fp32 training
    break;
  case OptLevel::O1: // casts around ops by category, fp32 weights
    p.perOpCasting = true;
    p.dynamicLossScale = true;
    break;
  case OptLevel::O2: // half model, fp32 batchnorm and master weights
    p.castModelType = CastModelType::Half;
    p.keepBatchnormFp32 = true;
    p.masterWeights = true;
    p.dynamicLossScale = true;
    break;
  case OptLevel::O3: // pure half
    p.castModelType = CastModelType::Half;
    break;
  }
  return p;
}

std::optional<PrecisionCategory> PrecisionPolicy::opOverride(llvm::StringRef opName) const {
  if (llvm::is_contained(fp32Ops, opName))
    return PrecisionCategory::Fp32;
  if (llvm::is_contained(halfOps, opName))
    return PrecisionCategory::Half;
  return std::nullopt;
}

llvm::ArrayRef<llvm::StringRef> policyPropertyNames() { return kProperties; }

std::vector<std::string> splitOpList(llvm::StringRef list) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  list.split(parts, ',', -1, /*KeepEmpty=*/false);
  std::vector<std::string> names;
  for (llvm::StringRef part : parts)
    if (!part.trim().empty())
      names.push_back(part.trim().str());
  return names;
}

std::optional<PrecisionPolicy> resolvePolicy(const AttrMap &meta, DiagnosticEngine &diag) {
  return PolicyReader(meta, diag, nullptr).read();
}

std::optional<PrecisionPolicy> resolvePolicy(const Graph &g, DiagnosticEngine &diag) {
  return PolicyReader(g.meta(), diag, &g.metaLocations()).read();
}

void warnPolicy(const PrecisionPolicy &p, DiagnosticEngine &diag) {
  auto isSet = [&](llvm::StringRef property) {
    return p.overridden.count((kPrefix + property).str()) > 0;
  };
  auto warn = [&](const llvm::Twine &msg) { diag.warning(Location(), msg); };
  bool halfParams = p.castModelType == CastModelType::Half;
  // resolvePolicy switched these off; say why when the user asked for them.
  if (isSet("master_weights") && !halfParams)
    warn("amp.master_weights has no effect: parameters stay fp32 (cast_model_type none), so "
         "they are their own master copies");
  if (isSet("keep_batchnorm_fp32") && !halfParams)
    warn("amp.keep_batchnorm_fp32 has no effect: batchnorm parameters stay fp32 unless "
         "cast_model_type is half");
  if (halfParams && p.perOpCasting && (isSet("per_op_casting") || isSet("cast_model_type")))
    warn("amp.per_op_casting with cast_model_type half: parameters are stored in half and "
         "fp32-category ops read them cast up to fp32 (Apex rejects this combination)");
  if (!p.mixed()) {
    for (llvm::StringRef property : {"half_type", "fp32_ops", "half_ops", "allow_banned"})
      if (isSet(property))
        warn("amp." + property +
             " has no effect: nothing runs in half (per_op_casting false and cast_model_type "
             "none)");
  }
  if (p.dynamicLossScale && isSet("loss_scale.value"))
    warn("amp.loss_scale.value has no effect with a dynamic loss scale");
  if (!p.dynamicLossScale)
    for (llvm::StringRef property : kProperties)
      if (isDynamicSetting(property) && isSet(property))
        warn("amp." + property + " has no effect with a static loss scale");
}

void printPolicy(const PrecisionPolicy &p, llvm::raw_ostream &os) {
  auto line = [&](llvm::StringRef property, const llvm::Twine &value, bool overridden) {
    os << property << ": " << value;
    if (overridden)
      os << "  (override)";
    os << '\n';
  };
  auto isSet = [&](llvm::StringRef property) {
    return p.overridden.count((kPrefix + property).str()) > 0;
  };
  auto flag = [](bool b) { return b ? "true" : "false"; };
  // The level picks the preset; it is not an override of it.
  line("opt_level", optLevelName(p.optLevel), false);
  line("half_type", dtypeName(p.halfType), isSet("half_type"));
  line("cast_model_type", p.castModelType == CastModelType::Half ? "half" : "none",
       isSet("cast_model_type"));
  line("per_op_casting", flag(p.perOpCasting), isSet("per_op_casting"));
  line("keep_batchnorm_fp32", flag(p.keepBatchnormFp32), isSet("keep_batchnorm_fp32"));
  line("master_weights", flag(p.masterWeights), isSet("master_weights"));
  if (!p.dynamicLossScale) {
    line("loss_scale", formatDouble(p.staticLossScale),
         isSet("loss_scale") || isSet("loss_scale.value"));
  } else {
    line("loss_scale", "dynamic", isSet("loss_scale"));
    const DynamicLossScale &d = p.dynamic;
    line("loss_scale.init", formatDouble(d.init), isSet("loss_scale.init"));
    line("loss_scale.growth_factor", formatDouble(d.growthFactor),
         isSet("loss_scale.growth_factor"));
    line("loss_scale.backoff_factor", formatDouble(d.backoffFactor),
         isSet("loss_scale.backoff_factor"));
    line("loss_scale.growth_interval", llvm::Twine(d.growthInterval),
         isSet("loss_scale.growth_interval"));
    line("loss_scale.min", formatDouble(d.minScale), isSet("loss_scale.min"));
    line("loss_scale.max", formatDouble(d.maxScale), isSet("loss_scale.max"));
  }
  line("fp32_ops", p.fp32Ops.empty() ? "(none)" : joined(p.fp32Ops), isSet("fp32_ops"));
  line("half_ops", p.halfOps.empty() ? "(none)" : joined(p.halfOps), isSet("half_ops"));
  line("allow_banned", flag(p.allowBanned), isSet("allow_banned"));
  // Shown only where it matters, so one-loss models print as they always did.
  if (p.numLosses != 1 || isSet("num_losses"))
    line("num_losses", llvm::Twine(p.numLosses), isSet("num_losses"));
}

bool setPolicyOverride(AttrMap &meta, llvm::StringRef property, llvm::StringRef value,
                       DiagnosticEngine &diag) {
  property.consume_front(kPrefix);
  value = value.trim();
  auto fail = [&](const llvm::Twine &msg) {
    diag.error(Location(), "amp." + property + " " + msg);
    return false;
  };
  if (!llvm::is_contained(kProperties, property)) {
    std::string known;
    for (llvm::StringRef p : kProperties)
      known += (known.empty() ? "" : ", ") + p.str();
    diag.error(Location(),
               "unknown precision property '" + property + "' (known properties: " + known + ")");
    return false;
  }
  std::string key = (kPrefix + property).str();

  if (property == "loss_scale") {
    if (value == "dynamic" || value == "static") {
      meta[key] = Attribute(value.str());
      return true;
    }
    double scale;
    if (value.getAsDouble(scale) || !(scale > 0 && std::isfinite(scale)))
      return fail("must be \"dynamic\" or a positive number (a static scale), got \"" + value +
                  "\"");
    meta[key] = Attribute("static");
    meta["amp.loss_scale.value"] = Attribute(scale);
    return true;
  }

  switch (propertyType(property)) {
  case PropertyType::Bool: {
    std::optional<bool> b = parseBool(value);
    if (!b)
      return fail("must be true or false, got \"" + value + "\"");
    meta[key] = Attribute(*b);
    return true;
  }
  case PropertyType::Int: {
    int64_t i;
    if (value.getAsInteger(10, i))
      return fail("must be an integer, got \"" + value + "\"");
    meta[key] = Attribute(i);
    break;
  }
  case PropertyType::Number: {
    double d;
    if (value.getAsDouble(d))
      return fail("must be a number, got \"" + value + "\"");
    meta[key] = Attribute(d);
    break;
  }
  case PropertyType::String:
    if (property == "opt_level") {
      std::optional<OptLevel> l = parseOptLevel(value);
      if (!l)
        return fail("must be one of O0, O1, O2, O3, got \"" + value + "\"");
      meta[key] = Attribute(optLevelName(*l).str());
      return true;
    }
    if (property == "half_type") {
      std::optional<DType> t = parseHalfType(value);
      if (!t)
        return fail("must be bf16 or f16, got \"" + value + "\"");
      meta[key] = Attribute(dtypeName(*t).str());
      return true;
    }
    if (property == "cast_model_type") {
      std::optional<CastModelType> c = parseCastModelType(value);
      if (!c)
        return fail("must be none or half, got \"" + value + "\"");
      meta[key] = Attribute(*c == CastModelType::Half ? "half" : "none");
      return true;
    }
    // fp32_ops / half_ops: checked names, stored normalised.
    std::vector<std::string> names = splitOpList(value);
    for (const std::string &n : names)
      if (!OpRegistry::builtin().lookup(n))
        return fail("names an unknown op '" + n + "'");
    meta[key] = Attribute(joined(names));
    return true;
  }
  // Numbers are range-checked the way resolvePolicy checks the model file's.
  AttrMap probe;
  probe[key] = meta[key];
  probe["amp.loss_scale"] = Attribute("static"); // no cross-checks of min/max/init here
  DiagnosticEngine scratch;
  if (!resolvePolicy(probe, scratch)) {
    for (const Diagnostic &d : scratch.diagnostics())
      diag.add(d.severity, d.loc, d.message);
    meta.erase(key);
    return false;
  }
  return true;
}

} // namespace ampc
