//===- OnnxFile.cpp - Reading and checking ONNX model files ----------------===//
#include "frontends/onnx/OnnxFile.h"

#include "ir/HalfConversion.h"
#include "ir/support/TensorFile.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/version_converter/convert.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

namespace ampc::onnxfe {

namespace {

Location fileLoc(llvm::StringRef path) { return Location::inFile(path.str(), 0, 0); }

std::string dirOf(llvm::StringRef path) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? "." : dir.str();
}

} // namespace

int64_t defaultOpset(const onnx::ModelProto &model) {
  for (const onnx::OperatorSetIdProto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      return o.version();
  return 0;
}

namespace {
void setDefaultOpset(onnx::ModelProto &model, int64_t opset) {
  for (onnx::OperatorSetIdProto &o : *model.mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      o.set_version(opset);
}

/// "op 'X' changed in opset N" for the first node whose definition at
/// opset `from` is not the one at `to`; empty when none changed.
std::string firstOpChangedSince(const onnx::ModelProto &model, int64_t from, int64_t to) {
  for (const onnx::NodeProto &n : model.graph().node()) {
    const onnx::OpSchema *then = onnx::OpSchemaRegistry::Schema(n.op_type(), int(from), "");
    const onnx::OpSchema *now = onnx::OpSchemaRegistry::Schema(n.op_type(), int(to), "");
    if (!then || !now)
      return "op '" + n.op_type() + "' has no definition at opset " +
             std::to_string(then ? to : from);
    if (then->since_version() != now->since_version())
      return "op '" + n.op_type() + "' changed in opset " + std::to_string(now->since_version());
  }
  return {};
}
} // namespace

std::optional<DType> dtypeOfOnnx(int32_t t) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return DType::F32;
  case onnx::TensorProto::FLOAT16:
    return DType::F16;
  case onnx::TensorProto::BFLOAT16:
    return DType::BF16;
  case onnx::TensorProto::DOUBLE:
    return DType::F64;
  case onnx::TensorProto::INT64:
    return DType::I64;
  case onnx::TensorProto::INT32:
    return DType::I32;
  case onnx::TensorProto::BOOL:
    return DType::Bool;
  default:
    return std::nullopt;
  }
}

std::string onnxTypeName(int32_t t) {
  if (onnx::TensorProto::DataType_IsValid(t))
    return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t));
  return "type " + std::to_string(t);
}

/// ONNX 1.12's version converter turns Upsample (opsets 7 to 9) and
/// Resize-10 into Resize nodes without a coordinate_transformation_mode or
/// nearest_mode, whose opset-11 defaults (half_pixel, round_prefer_floor)
/// are not what those ops did: before opset 11 an output position o read
/// o / scale (asymmetric), rounded down for nearest. Every Resize of a file
/// converted from there came from one of them.
static void keepPreOpset11ResizeSemantics(onnx::GraphProto &g) {
  for (onnx::NodeProto &n : *g.mutable_node()) {
    if (n.op_type() != "Resize")
      continue;
    bool hasCoords = false, hasNearest = false;
    for (const onnx::AttributeProto &a : n.attribute()) {
      hasCoords |= a.name() == "coordinate_transformation_mode";
      hasNearest |= a.name() == "nearest_mode";
    }
    auto add = [&](const char *name, const char *value) {
      onnx::AttributeProto &a = *n.add_attribute();
      a.set_name(name);
      a.set_type(onnx::AttributeProto::STRING);
      a.set_s(value);
    };
    if (!hasCoords)
      add("coordinate_transformation_mode", "asymmetric");
    if (!hasNearest)
      add("nearest_mode", "floor");
  }
}

namespace {
bool hasExternalData(const onnx::ModelProto &model) {
  for (const onnx::TensorProto &t : model.graph().initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL)
      return true;
  return false;
}
} // namespace

bool readOnnxModel(llvm::StringRef path, onnx::ModelProto &model, DiagnosticEngine &diag) {
  Location loc = fileLoc(path);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf) {
    diag.error({}, "cannot open model file '" + path + "': " + buf.getError().message());
    return false;
  }
  llvm::StringRef bytes = (*buf)->getBuffer();
  // protobuf refuses messages over 2 GiB; ONNX keeps bigger models' weights
  // in external data files.
  if (bytes.size() >= (size_t(1) << 31)) {
    diag.error(loc, "the file is " + llvm::Twine(bytes.size()) +
                        " bytes; an ONNX model over 2 GiB must keep its weights in external "
                        "data files");
    return false;
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  // Nested messages (subgraphs) deeper than this are not a model we can run.
  in.SetRecursionLimit(64);
  if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    diag.error(loc, "not a valid ONNX model: the protobuf message cannot be parsed (truncated "
                    "or not an ONNX file)");
    return false;
  }
  if (!model.has_graph()) {
    diag.error(loc, "not a valid ONNX model: it has no graph");
    return false;
  }
  int64_t opset = defaultOpset(model);
  if (opset == 0) {
    diag.error(loc, "the model imports no opset of the default ONNX domain");
    return false;
  }
  if (opset > kMaxOpset) {
    diag.error(loc, "opset " + llvm::Twine(opset) + " is newer than ampc supports (opsets " +
                        llvm::Twine(kMinOpset) + " to " + llvm::Twine(kMaxOpset) +
                        "); export with opset_version=" + llvm::Twine(kMaxOpset));
    return false;
  }
  // The checker first: the version converter trusts its input (ONNX 1.12's converter dereferences
  // nulls in malformed graphs).
  try {
    // By path, so that the checker looks for external data beside the file
    // rather than in the working directory (it reads the file again).
    if (hasExternalData(model))
      onnx::checker::check_model(path.str());
    else
      onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    std::string what = e.what();
    // One line: the checker's messages break lines and may end in a context block.
    std::string flat;
    for (char c : what) {
      if (c == '\n' || c == '\r')
        c = ' ';
      if (c == ' ' && (flat.empty() || flat.back() == ' '))
        continue;
      flat += c;
    }
    while (!flat.empty() && flat.back() == ' ')
      flat.pop_back();
    what = flat;
    diag.error(loc, "the ONNX checker rejects the model: " + what);
    return false;
  }
  // What ONNX 1.12's checker lets through but its converter and shape
  // inference crash on (found by fuzzing): outputs nothing produces,
  // subgraphs, and nodes of other domains (ampc maps none of them anyway).
  {
    llvm::StringSet<> defined;
    for (const onnx::ValueInfoProto &in : model.graph().input())
      defined.insert(in.name());
    for (const onnx::TensorProto &t : model.graph().initializer())
      defined.insert(t.name());
    for (const onnx::NodeProto &n : model.graph().node()) {
      std::string label = "node '" + (n.name().empty() ? n.op_type() : n.name()) + "'";
      if (!n.domain().empty() && n.domain() != "ai.onnx") {
        diag.error(loc, label + " (op " + n.op_type() + ") is in domain '" + n.domain() +
                            "'; ampc imports ops of the default ONNX domain only");
        return false;
      }
      for (const onnx::AttributeProto &a : n.attribute())
        if (a.has_g() || a.graphs_size() > 0) {
          diag.error(loc, label + " (op " + n.op_type() +
                              ") has a subgraph; ampc does not import control flow");
          return false;
        }
      for (const std::string &o : n.output())
        defined.insert(o);
    }
    for (const onnx::ValueInfoProto &o : model.graph().output())
      if (!defined.count(o.name())) {
        diag.error(loc, "graph output '" + o.name() +
                            "' is produced by no node, input or "
                            "initializer");
        return false;
      }
  }
  if (opset < kOldestConvertibleOpset) {
    // The converter has no adapters below opset 7, but a model whose ops all
    // kept their definition up to it is a model of opset 7 as it stands.
    std::string changed = firstOpChangedSince(model, opset, kOldestConvertibleOpset);
    if (!changed.empty()) {
      diag.error(loc, "opset " + llvm::Twine(opset) + " is too old (ampc supports opsets " +
                          llvm::Twine(kMinOpset) + " to " + llvm::Twine(kMaxOpset) +
                          ", converting from " + llvm::Twine(kOldestConvertibleOpset) +
                          "): " + changed);
      return false;
    }
    setDefaultOpset(model, kOldestConvertibleOpset);
  }
  if (opset < kMinOpset) {
    try {
      model = onnx::version_conversion::ConvertVersion(model, static_cast<int>(kMinOpset));
    } catch (const std::exception &e) {
      diag.error(loc, "cannot convert opset " + llvm::Twine(opset) + " to " +
                          llvm::Twine(kMinOpset) + ": " + e.what());
      return false;
    }
    if (opset < 11)
      keepPreOpset11ResizeSemantics(*model.mutable_graph());
  }
  // ONNX's shape inference is not run: every shape is inferred again, and
  // checked, by the registry as the nodes lower (with the node named in
  // the error), and ONNX 1.12's inference dereferences nulls on malformed
  // Conv/pool nodes that pass the checker (found by fuzz-onnx).
  return true;
}

namespace {

template <typename Field> void copyElements(const Field &field, DType t, NpyArray &out) {
  unsigned size = dtypeSize(t);
  out.data.resize(size_t(field.size()) * size);
  for (int i = 0; i < field.size(); ++i) {
    switch (t) {
    case DType::F32: {
      float v = static_cast<float>(field.Get(i));
      std::memcpy(&out.data[i * size], &v, size);
      break;
    }
    case DType::F64: {
      double v = static_cast<double>(field.Get(i));
      std::memcpy(&out.data[i * size], &v, size);
      break;
    }
    case DType::I64: {
      int64_t v = static_cast<int64_t>(field.Get(i));
      std::memcpy(&out.data[i * size], &v, size);
      break;
    }
    case DType::I32: {
      int32_t v = static_cast<int32_t>(field.Get(i));
      std::memcpy(&out.data[i * size], &v, size);
      break;
    }
    case DType::F16:
    case DType::BF16: {
      // Stored as the 16 bits in an int32 field.
      uint16_t v = static_cast<uint16_t>(field.Get(i));
      std::memcpy(&out.data[i * size], &v, size);
      break;
    }
    case DType::Bool: {
      out.data[i] = field.Get(i) ? 1 : 0;
      break;
    }
    }
  }
}

bool readExternal(const onnx::TensorProto &t, llvm::StringRef baseDir, NpyArray &out,
                  std::string &err) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &e : t.external_data()) {
    if (e.key() == "location")
      location = e.value();
    else if (e.key() == "offset")
      offset = std::atoll(e.value().c_str());
    else if (e.key() == "length")
      length = std::atoll(e.value().c_str());
  }
  if (location.empty()) {
    err = "tensor '" + t.name() + "' has external data without a location";
    return false;
  }
  if (llvm::sys::path::is_absolute(location) || llvm::StringRef(location).contains("..")) {
    err = "tensor '" + t.name() + "': external data location '" + location +
          "' must be a relative path inside the model's folder";
    return false;
  }
  llvm::SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  int64_t want = int64_t(out.data.size());
  if (length >= 0 && length != want) {
    err = "tensor '" + t.name() + "': external data length " + std::to_string(length) +
          " does not match its shape and type (" + std::to_string(want) + " bytes)";
    return false;
  }
  std::ifstream f(std::string(path), std::ios::binary);
  if (!f) {
    err =
        "tensor '" + t.name() + "': cannot open its external data file '" + std::string(path) + "'";
    return false;
  }
  f.seekg(offset);
  f.read(out.data.data(), want);
  if (f.gcount() != want) {
    err = "tensor '" + t.name() + "': external data file '" + std::string(path) + "' ends before " +
          std::to_string(offset + want) + " bytes";
    return false;
  }
  return true;
}

} // namespace

bool tensorToArray(const onnx::TensorProto &t, llvm::StringRef baseDir, NpyArray &out,
                   std::string &err) {
  std::optional<DType> dtype = dtypeOfOnnx(t.data_type());
  if (!dtype) {
    err = "tensor '" + t.name() + "' has data type " + onnxTypeName(t.data_type()) +
          ", which ampc does not support";
    return false;
  }
  out.dtype = *dtype;
  out.isUint8 = false;
  out.shape.clear();
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t(1) << 40) / d)) {
      err = "tensor '" + t.name() + "' has an invalid or too large shape";
      return false;
    }
    out.shape.push_back(d);
    n *= d;
  }
  size_t bytes = size_t(n) * dtypeSize(*dtype);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    out.data.assign(bytes, 0);
    return readExternal(t, baseDir, out, err);
  }
  int64_t have = -1;
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes) {
      err = "tensor '" + t.name() + "' holds " + std::to_string(t.raw_data().size()) +
            " bytes of data, its shape and type need " + std::to_string(bytes);
      return false;
    }
    out.data.assign(t.raw_data().begin(), t.raw_data().end());
    return true;
  }
  switch (*dtype) {
  case DType::F32:
    copyElements(t.float_data(), *dtype, out);
    have = t.float_data_size();
    break;
  case DType::F64:
    copyElements(t.double_data(), *dtype, out);
    have = t.double_data_size();
    break;
  case DType::I64:
    copyElements(t.int64_data(), *dtype, out);
    have = t.int64_data_size();
    break;
  case DType::I32:
  case DType::F16:
  case DType::BF16:
  case DType::Bool:
    copyElements(t.int32_data(), *dtype, out);
    have = t.int32_data_size();
    break;
  }
  if (have != n) {
    err = "tensor '" + t.name() + "' holds " + std::to_string(have) +
          " elements, its shape needs " + std::to_string(n);
    return false;
  }
  return true;
}

double arrayElement(const NpyArray &a, int64_t i) {
  const char *p = a.data.data() + i * a.elementSize();
  switch (a.dtype) {
  case DType::F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case DType::F64: {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return a.dtype == DType::F16 ? halfBitsToFloat(h) : bf16BitsToFloat(h);
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return double(v);
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::Bool:
    return *p ? 1 : 0;
  }
  return 0;
}

namespace {

/// The last model the tensor reader parsed: a state tensor per initializer
/// would otherwise parse the whole file once each.
struct ParsedModelCache {
  std::mutex mutex;
  std::string path;
  llvm::sys::TimePoint<> modified;
  uint64_t size = 0;
  std::shared_ptr<const onnx::ModelProto> model;
};

std::shared_ptr<const onnx::ModelProto> parsedModel(llvm::StringRef path, std::string &err) {
  static ParsedModelCache cache;
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st)) {
    err = "cannot open '" + path.str() + "': " + ec.message();
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.model && cache.path == path && cache.modified == st.getLastModificationTime() &&
      cache.size == st.getSize())
    return cache.model;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf =
      llvm::MemoryBuffer::getFile(path, false, false);
  if (!buf) {
    err = "cannot open '" + path.str() + "': " + buf.getError().message();
    return nullptr;
  }
  auto model = std::make_shared<onnx::ModelProto>();
  llvm::StringRef bytes = (*buf)->getBuffer();
  if (bytes.size() >= (size_t(1) << 31) ||
      !model->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    err = "'" + path.str() + "' is not a valid ONNX model";
    return nullptr;
  }
  cache.path = path.str();
  cache.modified = st.getLastModificationTime();
  cache.size = st.getSize();
  cache.model = model;
  return model;
}

bool readOnnxTensor(llvm::StringRef path, llvm::StringRef name, NpyArray &out, std::string &err) {
  std::shared_ptr<const onnx::ModelProto> model = parsedModel(path, err);
  if (!model)
    return false;
  std::string baseDir = dirOf(path);
  for (const onnx::TensorProto &t : model->graph().initializer())
    if (t.name() == name)
      return tensorToArray(t, baseDir, out, err);
  for (const onnx::NodeProto &n : model->graph().node())
    if (n.op_type() == "Constant" && n.output_size() == 1 && n.output(0) == name)
      for (const onnx::AttributeProto &a : n.attribute())
        if (a.name() == "value" && a.has_t())
          return tensorToArray(a.t(), baseDir, out, err);
  err = "'" + path.str() + "' has no initializer or constant named '" + name.str() + "'";
  return false;
}

} // namespace

void registerOnnxTensorReader() { registerTensorFileReader("onnx", readOnnxTensor); }

} // namespace ampc::onnxfe
