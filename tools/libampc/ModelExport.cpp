//===- ModelExport.cpp - The export formats: npy and onnx -----------===//
#include "Internal.h"

#include "ampc/ModelExport.h"

#include "ir/support/AtomicFile.h"
#include "ir/support/NpyFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#if AMPC_HAVE_ONNX
#define AMPC_HAVE_ONNX_EXPORT true
#else
#define AMPC_HAVE_ONNX_EXPORT false
#endif

namespace ampc::api {

namespace {

using Writer = Result<ExportReport> (*)(const Program &, const ExportOptions &);

/// One row per format. A format that is known but not written yet has no
/// writer: it is listed (so `--format onnx` is "not supported yet", not
/// "unknown"), and adding it means giving it a writer here.
struct FormatEntry {
  ExportFormat info;
  Writer write;
};

Result<ExportReport> writeNpyDirectory(const Program &program, const ExportOptions &opts);

const std::vector<FormatEntry> &formatTable() {
  static const std::vector<FormatEntry> table = {
      {{"npy",
        "every parameter and buffer as an fp32 .npy file named by it, and each batchnorm's "
        "num_batches_tracked (int64), in the directory -o names (PyTorch: load_state_dict)",
        /*writesDirectory=*/true, /*available=*/true},
       writeNpyDirectory},
      {{"onnx",
        "the rewritten inference graph (casts, half initializers, eval-mode batchnorm) as one "
        "ONNX model file (-o FILE, opset 17, any batch size)",
        /*writesDirectory=*/false, /*available=*/AMPC_HAVE_ONNX_EXPORT},
       AMPC_HAVE_ONNX_EXPORT ? exportOnnxFile : nullptr},
  };
  return table;
}

std::string formatList(bool availableOnly) {
  std::string s;
  for (const FormatEntry &f : formatTable())
    if (!availableOnly || f.write)
      s += (s.empty() ? "" : ", ") + f.info.name;
  return s;
}

/// The file a weight goes to: `<dir>/<name>.npy`. A name that cannot be a
/// file name of its own is refused rather than written somewhere else.
bool npyFileName(const std::string &dir, const std::string &name, std::string &path,
                 std::string &err) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    err = "cannot export '" + name + "' as a file named after it ('/' or an empty name)";
    return false;
  }
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, name + ".npy");
  path = std::string(p);
  return true;
}

Result<ExportReport> writeNpyDirectory(const Program &program, const ExportOptions &opts) {
  Result<std::vector<Weight>> weights = weightsOf(program);
  if (!weights)
    return weights.status();
  if (std::error_code ec = llvm::sys::fs::create_directories(opts.output))
    return Status::error("cannot create the directory '" + opts.output + "': " + ec.message());
  SpecialOutputs special =
      opts.writeThrough ? SpecialOutputs::WriteThrough : SpecialOutputs::Refuse;
  // Every path first: a symlink or a directory in the way is found before
  // any file is written.
  std::vector<BatchNormCount> counts = batchNormCounts(program);
  std::vector<std::string> paths;
  std::string err;
  for (const Weight &w : *weights) {
    std::string path;
    if (!npyFileName(opts.output, w.name, path, err) || !checkOutputPath(path, err, special))
      return Status::error(err);
    paths.push_back(path);
  }
  for (const BatchNormCount &c : counts) {
    std::string path;
    if (!npyFileName(opts.output, c.name, path, err) || !checkOutputPath(path, err, special))
      return Status::error(err);
    paths.push_back(path);
  }
  ExportReport report;
  size_t params = 0, buffers = 0, masters = 0;
  for (size_t i = 0; i < weights->size(); ++i) {
    const Weight &w = (*weights)[i];
    std::string bytes;
    if (!encodeNpy(paths[i], ampc::DType::F32, w.shape, w.values.data(), bytes, err) ||
        !writeFileAtomically(paths[i], bytes, err, special))
      return Status::error(err);
    report.files.push_back(paths[i]);
    ++(w.kind == StateKind::Buffer ? buffers : params);
    masters += w.fromMaster;
  }
  // PyTorch's num_batches_tracked: an int64 scalar, shape ().
  for (size_t i = 0; i < counts.size(); ++i) {
    const std::string &path = paths[weights->size() + i];
    std::string bytes;
    if (!encodeNpy(path, ampc::DType::I64, {}, &counts[i].value, bytes, err) ||
        !writeFileAtomically(path, bytes, err, special))
      return Status::error(err);
    report.files.push_back(path);
  }
  report.summary = "wrote " + std::to_string(params) + " parameter" + (params == 1 ? "" : "s") +
                   " and " + std::to_string(buffers) + " buffer" + (buffers == 1 ? "" : "s") +
                   " as fp32 .npy files to " + opts.output;
  if (masters)
    report.summary += " (" + std::to_string(masters) + " from their fp32 masters)";
  // Every batchnorm has run the same micro-batches (batchNormCounts).
  if (!counts.empty())
    report.summary += ", and " + std::to_string(counts.size()) +
                      " batchnorm num_batches_tracked (" + std::to_string(counts.front().value) +
                      ", int64)";
  return report;
}

const FormatEntry *findFormat(const std::string &name) {
  for (const FormatEntry &f : formatTable())
    if (f.info.name == name)
      return &f;
  return nullptr;
}

} // namespace

std::vector<ExportFormat> exportFormats() {
  std::vector<ExportFormat> out;
  for (const FormatEntry &f : formatTable())
    out.push_back(f.info);
  return out;
}

Status checkExport(const ExportOptions &opts) {
  const FormatEntry *f = findFormat(opts.format);
  if (!f)
    return Status::error("unknown export format '" + opts.format +
                         "' (formats: " + formatList(false) + ")");
  if (!f->write)
    return Status::error("export format '" + opts.format + "' is not supported yet (this ampc " +
                         "writes: " + formatList(true) + ")");
  if (opts.output.empty())
    return Status::error("export needs an output (-o " +
                         std::string(f->info.writesDirectory ? "DIR" : "FILE") + ")");
  if (!f->info.writesDirectory) {
    std::string err;
    if (!checkOutputPath(opts.output, err,
                         opts.writeThrough ? SpecialOutputs::WriteThrough : SpecialOutputs::Refuse))
      return Status::error(err);
    return {};
  }
  // A directory: an existing one, or one that can be created (its nearest
  // existing ancestor is a writable directory).
  llvm::SmallString<256> dir(opts.output);
  llvm::sys::fs::make_absolute(dir);
  while (!llvm::sys::fs::exists(dir)) {
    std::string parent(llvm::sys::path::parent_path(dir));
    if (parent.empty() || parent == dir)
      break;
    dir = parent;
  }
  if (!llvm::sys::fs::is_directory(dir))
    return Status::error("cannot write into '" + opts.output + "': '" + std::string(dir) +
                         "' is not a directory");
  if (llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write))
    return Status::error("cannot write into '" + opts.output + "': '" + std::string(dir) +
                         "' is not writable");
  return {};
}

Result<ExportReport> exportProgram(const Program &program, const ExportOptions &opts) {
  if (Status s = checkExport(opts); !s)
    return s;
  return findFormat(opts.format)->write(program, opts);
}

} // namespace ampc::api
