//===- ParamBuilders.cpp ----------------------------------------------------===//
//
// Initialisations follow PyTorch's defaults so a model file trains like the
// PyTorch module it describes: linear and conv2d weights and biases are
// uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)); normalisation scales are ones and
// shifts zeros; embeddings are normal(0, 1); PReLU slopes 0.25.
//
//===----------------------------------------------------------------------===//
#include "frontends/yaml/ParamBuilders.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

namespace ampc::yamlfe {

namespace {

bool fail(std::string &err, const llvm::Twine &msg) {
  err = msg.str();
  return false;
}

InitSpec uniformFanIn(int64_t fanIn) {
  double bound = 1.0 / std::sqrt(static_cast<double>(fanIn));
  return InitSpec{InitSpec::Kind::Uniform, -bound, bound, ""};
}
InitSpec ones() { return InitSpec{InitSpec::Kind::Ones, 0, 0, ""}; }
InitSpec zeros() { return InitSpec{InitSpec::Kind::Zeros, 0, 0, ""}; }

bool requirePositive(const AttrMap &args, const char *name, std::string &err) {
  int64_t v = args.at(name).getInt();
  if (v > 0)
    return true;
  return fail(err, "'" + llvm::Twine(name) + "' must be positive, got " + llvm::Twine(v));
}

bool planLinear(const PlanRequest &req, ParamPlan &plan, std::string &err) {
  const TensorType &x = req.input.type();
  if (!requirePositive(req.args, "out_features", err))
    return false;
  if (x.rank() < 1)
    return fail(err, "input must have at least 1 dim, got " + x.str());
  int64_t in = x.dims().back(), out = req.args.at("out_features").getInt();
  if (in < 1)
    return fail(err, "input has no features: " + x.str());
  plan.params.push_back({"weight", "weight", {out, in}, uniformFanIn(in)});
  if (req.args.at("bias").getBool())
    plan.params.push_back({"bias", "bias", {out}, uniformFanIn(in)});
  return true;
}

bool planConv2d(const PlanRequest &req, ParamPlan &plan, std::string &err) {
  const TensorType &x = req.input.type();
  if (!requirePositive(req.args, "out_channels", err))
    return false;
  if (x.rank() != 4)
    return fail(err, "input must be [N, C, H, W], got " + x.str());
  const std::vector<int64_t> &kernel = req.args.at("kernel").getInts();
  if (kernel.size() != 2 || kernel[0] < 1 || kernel[1] < 1)
    return fail(err, "'kernel' must be a positive int or a list of 2 positive ints");
  int64_t groups = req.opAttrs.at("groups").getInt();
  int64_t in = x.dim(1), out = req.args.at("out_channels").getInt();
  if (groups < 1 || in % groups != 0 || out % groups != 0)
    return fail(err, "groups " + llvm::Twine(groups) + " must divide input channels " +
                         llvm::Twine(in) + " and output channels " + llvm::Twine(out));
  int64_t fanIn = 0, window = 0;
  if (llvm::MulOverflow(kernel[0], kernel[1], window) ||
      llvm::MulOverflow(in / groups, window, fanIn))
    return fail(err, "the kernel " + llvm::Twine(kernel[0]) + "x" + llvm::Twine(kernel[1]) +
                         " over " + llvm::Twine(in / groups) +
                         " input channels has more weights per output than int64 counts");
  plan.params.push_back(
      {"weight", "weight", {out, in / groups, kernel[0], kernel[1]}, uniformFanIn(fanIn)});
  if (req.args.at("bias").getBool())
    plan.params.push_back({"bias", "bias", {out}, uniformFanIn(fanIn)});
  return true;
}

bool planBatchNorm2d(const PlanRequest &req, ParamPlan &plan, std::string &err) {
  const TensorType &x = req.input.type();
  if (x.rank() != 4)
    return fail(err, "input must be [N, C, H, W], got " + x.str());
  int64_t c = x.dim(1);
  plan.params.push_back({"weight", "weight", {c}, ones()});
  plan.params.push_back({"bias", "bias", {c}, zeros()});
  plan.params.push_back({"running_mean", "running_mean", {c}, zeros(), StateKind::Buffer});
  plan.params.push_back({"running_var", "running_var", {c}, ones(), StateKind::Buffer});
  plan.attrs["training"] = Attribute(true);
  plan.extraResultSuffixes = {"running_mean.next", "running_var.next"};
  plan.updates = {{1, "running_mean"}, {2, "running_var"}};
  return true;
}

bool planLayerNorm(const PlanRequest &req, ParamPlan &plan, std::string &err) {
  const TensorType &x = req.input.type();
  int64_t normalized = req.opAttrs.at("normalized_dims").getInt();
  if (normalized < 1 || normalized > int64_t(x.rank()))
    return fail(err, "'normalized_dims' must be between 1 and the input's rank " +
                         llvm::Twine(x.rank()) + ", got " + llvm::Twine(normalized));
  llvm::SmallVector<int64_t, 4> shape(x.dims().take_back(normalized).begin(),
                                      x.dims().take_back(normalized).end());
  plan.params.push_back({"weight", "weight", shape, ones()});
  plan.params.push_back({"bias", "bias", shape, zeros()});
  return true;
}

bool planEmbedding(const PlanRequest &req, ParamPlan &plan, std::string &err) {
  if (!requirePositive(req.args, "num_embeddings", err) ||
      !requirePositive(req.args, "embedding_dim", err))
    return false;
  if (!req.input.isInput() || !isIntegral(req.input.dtype()))
    return fail(err, "input '" + req.input.name() +
                         "' must be an integer graph input (i64 or i32), got " +
                         req.input.type().str());
  int64_t n = req.args.at("num_embeddings").getInt(), d = req.args.at("embedding_dim").getInt();
  plan.params.push_back(
      {"weight", "weight", {n, d}, InitSpec{InitSpec::Kind::Normal, 0.0, 1.0, ""}});
  return true;
}

// nn.PReLU: one slope (num_parameters 1) or one per channel, dim 1 of the
// input; the slope is [C, 1, ..., 1] so that it broadcasts to [N, C, ...]
// at the right (the shape ONNX's PRelu takes), stored as torch's `weight`.
bool planPRelu(const PlanRequest &req, ParamPlan &plan, std::string &err) {
  const TensorType &x = req.input.type();
  if (!requirePositive(req.args, "num_parameters", err))
    return false;
  int64_t c = req.args.at("num_parameters").getInt();
  llvm::SmallVector<int64_t, 4> shape{c};
  if (c != 1) {
    if (x.rank() < 2 || x.dim(1) != c)
      return fail(err, "num_parameters " + llvm::Twine(c) +
                           " must be 1 or the input's channels (dim 1), input " + x.str());
    shape.append(x.rank() - 2, 1);
  }
  double init = req.args.at("init").getNumber();
  plan.params.push_back(
      {"weight", "slope", shape, InitSpec{InitSpec::Kind::Constant, init, 0, "", ""}});
  return true;
}

const std::vector<ParamBuilder> &builders() {
  static const std::vector<ParamBuilder> table = {
      {"linear",
       {{"out_features", AttrType::Int, std::nullopt}, {"bias", AttrType::Bool, true}},
       {},
       planLinear},
      {"conv2d",
       {{"out_channels", AttrType::Int, std::nullopt},
        {"kernel", AttrType::Ints, std::nullopt},
        {"bias", AttrType::Bool, true}},
       {},
       planConv2d},
      {"batchnorm2d", {}, {"training"}, planBatchNorm2d},
      {"layernorm", {}, {}, planLayerNorm},
      {"embedding",
       {{"num_embeddings", AttrType::Int, std::nullopt},
        {"embedding_dim", AttrType::Int, std::nullopt}},
       {},
       planEmbedding},
      {"prelu",
       {{"num_parameters", AttrType::Int, Attribute(int64_t(1))},
        {"init", AttrType::Float, Attribute(0.25)}},
       {},
       planPRelu},
  };
  return table;
}

} // namespace

const ParamBuilder *findParamBuilder(llvm::StringRef kind) {
  for (const ParamBuilder &b : builders())
    if (kind == b.kind)
      return &b;
  return nullptr;
}

} // namespace ampc::yamlfe
