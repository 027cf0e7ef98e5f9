//===- Policy.cpp - Opt level plus overrides, checked by the passes' rules ===//
//
// A Policy holds the level and overrides as the user spelled them; every
// query resolves them through the same code the passes use (resolvePolicy
// on "amp.*" meta keys), so the API can never disagree with the compiler.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"
#include "PolicyInternal.h"

#include "kernels/cpu/OneDnn.h"
#include "passes/PrecisionPolicy.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace ampc::api {

static std::string withoutPrefix(std::string_view property) {
  std::string p(property);
  if (p.rfind("amp.", 0) == 0)
    p.erase(0, 4);
  return p;
}

bool writePolicyMeta(const std::string &level, const Policy::Overrides &overrides, AttrMap &meta,
                     DiagnosticEngine &diag) {
  for (llvm::StringRef p : policyPropertyNames())
    meta.erase(("amp." + p).str());
  if (!setPolicyOverride(meta, "opt_level", level, diag))
    return false;
  for (const auto &[property, value] : overrides)
    if (!setPolicyOverride(meta, property, value, diag))
      return false;
  return true;
}

/// The policy's meta keys, resolved; the diagnostics in `status`.
static std::optional<PrecisionPolicy> resolve(const std::string &level,
                                              const Policy::Overrides &overrides, Status &status) {
  AttrMap meta;
  DiagnosticEngine diag;
  std::optional<PrecisionPolicy> p;
  if (writePolicyMeta(level, overrides, meta, diag))
    p = resolvePolicy(meta, diag);
  status = toStatus(diag);
  return p;
}

Result<Policy> Policy::fromLevel(std::string_view level, const Overrides &overrides) {
  Policy p;
  p.level_ = std::string(level);
  for (const auto &[property, value] : overrides)
    if (Status s = p.set(property, value); !s)
      return s;
  Status status;
  if (!resolve(p.level_, p.overrides_, status))
    return status;
  return p;
}

Status Policy::set(std::string_view property, std::string_view value) {
  std::string name = withoutPrefix(property);
  if (name == "opt_level") {
    Policy trial = *this;
    trial.level_ = std::string(value);
    Status status;
    if (!resolve(trial.level_, trial.overrides_, status))
      return status;
    *this = std::move(trial);
    return status;
  }
  Overrides trial = overrides_;
  auto it =
      std::find_if(trial.begin(), trial.end(), [&](const auto &o) { return o.first == name; });
  if (it != trial.end())
    it->second = std::string(value);
  else
    trial.emplace_back(name, std::string(value));
  Status status;
  if (!resolve(level_, trial, status))
    return status;
  overrides_ = std::move(trial);
  return status;
}

std::string Policy::str() const {
  Status status;
  std::optional<PrecisionPolicy> p = resolve(level_, overrides_, status);
  if (!p)
    return "";
  std::string s;
  llvm::raw_string_ostream os(s);
  printPolicy(*p, os);
  return os.str();
}

std::string Policy::summary() const {
  if (str().empty())
    return "";
  auto value = [&](std::string_view property) {
    std::string v = get(property);
    size_t mark = v.find("  (override)");
    return mark == std::string::npos ? v : v.substr(0, mark);
  };
  std::string half = value("half_type"), cast = value("cast_model_type");
  std::vector<std::string> parts;
  if (cast == "half")
    parts.push_back(half + " model");
  else if (value("per_op_casting") == "true")
    parts.push_back("per-op " + half + " casts");
  else
    parts.push_back("fp32 model");
  if (cast == "half" && value("keep_batchnorm_fp32") == "true")
    parts.push_back("fp32 batchnorm");
  if (value("master_weights") == "true")
    parts.push_back("fp32 master weights");
  std::string scale = value("loss_scale");
  if (scale == "dynamic") {
    std::string init = value("loss_scale.init");
    if (init.size() > 2 && init.compare(init.size() - 2, 2, ".0") == 0)
      init.resize(init.size() - 2);
    parts.push_back("dynamic loss scale " + init);
  } else if (!scale.empty() && scale != "1.0" && parts.front() != "fp32 model") {
    parts.push_back("static loss scale " + scale);
  }
  std::string s = level_ + ": ";
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i ? ", " : "") + parts[i];
  std::vector<std::string> named; // loss_scale.value is loss_scale's
  for (const auto &[property, v] : overrides_) {
    std::string name = withoutPrefix(property);
    name = name.substr(0, name.find('.'));
    if (std::find(named.begin(), named.end(), name) == named.end())
      named.push_back(name);
  }
  if (!named.empty()) {
    s += " (overridden:";
    for (const std::string &n : named)
      s += " " + n;
    s += ")";
  }
  return s;
}

std::string Policy::get(std::string_view property) const {
  // printPolicy's lines are "name: value[ (override)]", aligned or not.
  std::string name = withoutPrefix(property);
  std::string text = str();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? text.size() : end + 1;
    size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line.compare(first, name.size(), name) != 0 ||
        line.size() <= first + name.size() || line[first + name.size()] != ':')
      continue;
    std::string value = line.substr(first + name.size() + 1);
    value.erase(0, value.find_first_not_of(' '));
    if (size_t o = value.find(" (override)"); o != std::string::npos)
      value.erase(o);
    while (!value.empty() && value.back() == ' ')
      value.pop_back();
    return value;
  }
  return "";
}

std::vector<Diagnostic> Policy::warnings() const {
  Status status;
  std::optional<PrecisionPolicy> p = resolve(level_, overrides_, status);
  if (!p)
    return {};
  DiagnosticEngine diag;
  warnPolicy(*p, diag);
  return toStatus(diag).diagnostics();
}

std::string Policy::deviceNote(std::string_view device) const {
  Status status;
  std::optional<PrecisionPolicy> p = resolve(level_, overrides_, status);
  // CPUs have no f16 arithmetic: it runs exactly, through f32, but slower
  // than bf16.
  if (p && p->mixed() && p->halfType == ampc::DType::F16 && device.rfind("cpu", 0) == 0)
    return "note: f16 on the CPU runs by conversion to f32 (exact, but slower than bf16; "
           "--half-type bf16 is the CPU's fast half type)";
  // Where bf16 arithmetic is no faster than f32 (no AMX; AMD's AVX512-BF16
  // excepted), the cpu backend widens bf16 GEMMs and convolutions: a half
  // level then saves memory, not time, which a user choosing one should know.
  if (p && p->mixed() && p->halfType == ampc::DType::BF16 && device == "cpu" &&
      kernels::cpu::bf16GemmsRunWidened())
    return "note: this CPU's bf16 arithmetic is no faster than f32, so bf16 GEMMs and "
           "convolutions run f32 kernels on exactly widened operands: the half levels save "
           "memory here, not time (AMPC_CPU_BF16_GEMMS=native runs the bf16 kernels)";
  return "";
}

Result<Policy> policyFromMeta(const AttrMap &meta) {
  Policy::Overrides overrides;
  auto level = meta.find("amp.opt_level");
  std::string levelName =
      level != meta.end() && level->second.is(AttrType::String) ? level->second.getString() : "O0";
  for (llvm::StringRef name : policyPropertyNames()) {
    if (name == "opt_level")
      continue;
    auto it = meta.find(("amp." + name).str());
    if (it == meta.end())
      continue;
    const Attribute &a = it->second;
    std::string value;
    switch (a.type()) {
    case AttrType::String:
      value = a.getString();
      break;
    case AttrType::Bool:
      value = a.getBool() ? "true" : "false";
      break;
    case AttrType::Int:
      value = std::to_string(a.getInt());
      break;
    case AttrType::Float:
      value = formatDouble(a.getFloat());
      break;
    case AttrType::Ints:
    case AttrType::Floats:
    case AttrType::DType:
      value = a.str();
      break;
    }
    overrides.emplace_back(name.str(), value);
  }
  return Policy::fromLevel(levelName, overrides);
}

} // namespace ampc::api
