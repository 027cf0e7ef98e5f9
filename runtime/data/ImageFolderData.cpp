//===- ImageFolderData.cpp - A folder of JPEG and PNG files per class -------===//
//
// train.data: {image_folder: {path: train/, size: [224, 224], ...}} is
// torchvision's ImageFolder: every subfolder of `path` is a class, labelled
// by the sorted folder names (0, 1, ...), and holds its images at any depth.
// Files are listed as ImageFolder lists them (classes sorted, then each
// class's folders walked in sorted order, files sorted within each), those
// with an image extension only (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff
// .webp, any case), so sample i is ImageFolder's sample i. ampc decodes JPEG
// and PNG: a file of another format, or one whose bytes are not an image,
// is found when the folder is opened (its first bytes are read) and is an
// error naming it, or left out and counted (bad_files: skip).
//
// A folder with images and no class subfolders serves them unlabelled, for
// `ampc predict --data folder/`.
//
// A sample is decoded when it is loaded (on the prefetcher's or the step's
// threads, several at once) and transformed: a training draw by
// RandomResizedCrop to `size` and a seeded horizontal flip (as configured),
// an evaluation draw, and a training one without random_resized_crop, by
// Resize of the shorter side to `resize` and CenterCrop to `size`; then
// ToTensor and Normalize into the [B, 3, H, W] input. The random parameters
// of sample i in epoch e come from (seed, e, i) alone.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataInternal.h"
#include "runtime/data/ImageResize.h"
#include "runtime/data/ImageTransforms.h"

#include "ir/Graph.h"
#include "kernels/common/Random.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdio>

namespace ampc::data {
namespace {

constexpr uint64_t kAugmentStreamBase = 0x696d616765000000ull; // + epoch
/// Random draws a sample may use in one epoch (RandomResizedCrop's ten
/// tries of four, and the flip).
constexpr uint64_t kDrawsPerSample = 64;

/// torchvision's IMG_EXTENSIONS.
bool hasImageExtension(llvm::StringRef name) {
  std::string lower = name.lower();
  for (const char *ext :
       {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"})
    if (llvm::StringRef(lower).endswith(ext))
      return true;
  return false;
}

/// Whether the file starts like a JPEG or a PNG; else why not.
bool looksDecodable(const std::string &path, std::string &why) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    why = "cannot open it";
    return false;
  }
  unsigned char head[8] = {};
  size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if ((n >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) ||
      (n == 8 && std::equal(head, head + 8, png)))
    return true;
  why = n == 0 ? "is empty" : "is not a JPEG or PNG image (ampc decodes JPEG and PNG files)";
  return false;
}

struct ImageFile {
  std::string path;     ///< opened
  std::string relative; ///< under the folder, named in predictions
  int64_t label = 0;
};

struct Transform {
  int64_t height = 0, width = 0; ///< the sample's size
  int channels = 3;              ///< 1: converted to grayscale after decoding
  int64_t resize = 0;            ///< evaluation: the shorter side before the centre crop
  bool randomCrop = false;
  std::array<double, 2> scale{0.08, 1.0}, ratio{3.0 / 4.0, 4.0 / 3.0};
  bool hflip = false;
  std::array<float, 3> mean{0, 0, 0}, stdev{1, 1, 1};
  uint64_t seed = 0;
};

class ImageFolderSource final : public DataSource {
public:
  ImageFolderSource(std::vector<ImageFile> files, bool labelled, Transform t, int image, int label,
                    int64_t skipped, std::string firstSkipped)
      : files_(std::move(files)), labelled_(labelled), t_(t), image_(image), label_(label),
        skipped_(skipped), firstSkipped_(std::move(firstSkipped)) {}

  llvm::StringRef kind() const override { return "image_folder"; }
  int64_t numSamples() const override { return static_cast<int64_t>(files_.size()); }
  bool concurrentLoads() const override { return true; }
  bool groupedByClass() const override { return labelled_; }
  int64_t skippedSamples() const override { return skipped_; }
  std::string firstSkipped() const override { return firstSkipped_; }
  std::string sampleName(int64_t index) const override {
    return index >= 0 && index < numSamples() ? files_[index].relative : "";
  }

  bool loadSample(int64_t index, llvm::MutableArrayRef<HostTensor> batch, int64_t row,
                  std::string &err) override {
    return loadDrawnSample(index, kEvaluationDraw, batch, row, err);
  }

  bool loadDrawnSample(int64_t index, int64_t epoch, llvm::MutableArrayRef<HostTensor> batch,
                       int64_t row, std::string &err) override {
    if (!checkSampleIndex(index, numSamples(), err))
      return false;
    const ImageFile &file = files_[index];
    RgbImage decoded;
    if (!decodeImageFile(file.path, decoded, err)) {
      err = fileError(file.path, err);
      return false;
    }
    if (t_.channels == 1)
      toGrayscale(decoded);
    bool training = epoch != kEvaluationDraw;
    uint64_t stream = kAugmentStreamBase + static_cast<uint64_t>(training ? epoch : 0);
    auto uniform = [&](int k) {
      return kernels::uniform01Double(t_.seed, stream,
                                      static_cast<uint64_t>(index) * kDrawsPerSample +
                                          static_cast<uint64_t>(k));
    };
    RgbImage sample;
    if (training && t_.randomCrop) {
      CropBox box =
          randomResizedCropBox(decoded.width, decoded.height, t_.scale, t_.ratio, uniform);
      sample = resizeBilinear(crop(decoded, box.left, box.top, box.width, box.height), t_.width,
                              t_.height);
    } else {
      auto [w, h] = resizedForShorterSide(decoded.width, decoded.height, t_.resize);
      RgbImage resized = w == decoded.width && h == decoded.height ? std::move(decoded)
                                                                   : resizeBilinear(decoded, w, h);
      sample =
          cropPadded(resized, centerCropBox(resized.width, resized.height, t_.height, t_.width));
    }
    bool flip = training && t_.hflip && uniform(int(kDrawsPerSample) - 1) < 0.5;
    HostTensor &out = batch[image_];
    int64_t n = out.rowElements();
    if (out.dtype() == DType::F32) {
      toNormalizedChw(sample, flip, t_.mean, t_.stdev, static_cast<float *>(out.rowData(row)),
                      t_.channels);
    } else {
      std::vector<float> values(static_cast<size_t>(n));
      toNormalizedChw(sample, flip, t_.mean, t_.stdev, values.data(), t_.channels);
      for (int64_t i = 0; i < n; ++i)
        out.setFromDouble(row * n + i, values[i]);
    }
    if (label_ >= 0) {
      HostTensor &labels = batch[label_];
      if (labels.dtype() == DType::I64)
        labels.values<int64_t>()[row] = file.label;
      else
        labels.values<int32_t>()[row] = static_cast<int32_t>(file.label);
    }
    return true;
  }

private:
  std::vector<ImageFile> files_;
  bool labelled_;
  Transform t_;
  int image_, label_; // graph input positions; label_ -1: none fed
  int64_t skipped_;
  std::string firstSkipped_;
};

/// The entries of `dir`, sorted by name: subfolders and files (following
/// links, as os.walk(followlinks=True) and os.scandir's is_dir do).
bool listDirectory(const std::string &dir, std::vector<std::string> &folders,
                   std::vector<std::string> &files, std::string &err) {
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec, /*follow_symlinks=*/true), end;
       it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    llvm::sys::fs::file_status status;
    if (llvm::sys::fs::status(it->path(), status, /*follow=*/true))
      continue; // a dangling link: neither a folder nor a file
    if (llvm::sys::fs::is_directory(status))
      folders.push_back(name.str());
    else if (llvm::sys::fs::is_regular_file(status))
      files.push_back(name.str());
  }
  if (ec) {
    err = fileError(dir, "cannot list the folder: " + ec.message());
    return false;
  }
  std::sort(folders.begin(), folders.end());
  std::sort(files.begin(), files.end());
  return true;
}

std::string joinPath(llvm::StringRef a, llvm::StringRef b) {
  if (a.empty())
    return b.str();
  llvm::SmallString<256> p(a);
  llvm::sys::path::append(p, b);
  return std::string(p);
}

/// os.walk(root) in sorted(...) order: (folder, its files) pairs sorted by
/// the folder's path, each folder's files by name. `relative` is the folder
/// under the image folder, for names.
bool walkSorted(const std::string &root, const std::string &relative,
                std::vector<std::pair<std::string, std::vector<std::string>>> &out,
                std::string &err, int depth = 0) {
  if (depth > 64) {
    err = fileError(root, "folders nest more than 64 deep (a link loop?)");
    return false;
  }
  std::vector<std::string> folders, files;
  if (!listDirectory(root, folders, files, err))
    return false;
  out.emplace_back(relative, std::move(files));
  for (const std::string &f : folders)
    if (!walkSorted(joinPath(root, f), joinPath(relative, f), out, err, depth + 1))
      return false;
  return true;
}

bool readTransform(const Graph &g, const std::string &prefix, const InputInfo &image, Transform &t,
                   std::string &err) {
  llvm::ArrayRef<int64_t> dims = image.value->type().dims();
  if (dims.size() != 4 || (dims[1] != 3 && dims[1] != 1)) {
    err = "image_folder data feeds RGB images [B, 3, H, W] or grayscale ones [B, 1, H, W]; " +
          image.describe() + " is neither";
    return false;
  }
  t.channels = static_cast<int>(dims[1]);
  t.height = dims[2];
  t.width = dims[3];
  if (const Attribute *a = findMeta(g, prefix + "size", AttrType::Ints)) {
    const std::vector<int64_t> &hw = a->getInts();
    if (hw.size() != 2 || hw[0] != t.height || hw[1] != t.width) {
      err = "image_folder data has size [" + std::to_string(hw.empty() ? 0 : hw[0]) + ", " +
            std::to_string(hw.size() < 2 ? 0 : hw[1]) + "] but " + image.describe() + " takes [" +
            std::to_string(t.height) + ", " + std::to_string(t.width) + "] images";
      return false;
    }
  }
  // torchvision's ImageNet recipe resizes to 256 for a 224 crop: 224 / 0.875.
  t.resize =
      metaInt(g, prefix + "resize",
              static_cast<int64_t>(std::nearbyint(double(std::max(t.height, t.width)) / 0.875)));
  std::string crop = prefix + "augment.random_resized_crop.";
  if (const Attribute *s = findMeta(g, crop + "scale", AttrType::Floats)) {
    t.randomCrop = true;
    t.scale = {s->getFloats()[0], s->getFloats()[1]};
    if (const Attribute *r = findMeta(g, crop + "ratio", AttrType::Floats))
      t.ratio = {r->getFloats()[0], r->getFloats()[1]};
  }
  t.hflip = metaBool(g, prefix + "augment.hflip", false);
  if (const Attribute *m = findMeta(g, prefix + "normalize.mean", AttrType::Floats))
    for (int c = 0; c < 3; ++c)
      t.mean[c] = static_cast<float>(m->getFloats()[c]);
  if (const Attribute *s = findMeta(g, prefix + "normalize.std", AttrType::Floats))
    for (int c = 0; c < 3; ++c)
      t.stdev[c] = static_cast<float>(s->getFloats()[c]);
  if (t.channels == 1)
    for (const auto *values : {&t.mean, &t.stdev})
      if ((*values)[1] != (*values)[0] || (*values)[2] != (*values)[0]) {
        err = "image_folder data feeds grayscale images to " + image.describe() +
              ", one channel, but normalize gives three different " +
              (values == &t.mean ? "means" : "standard deviations") + "; give one value";
        return false;
      }
  t.seed = static_cast<uint64_t>(metaInt(g, prefix + "seed", metaInt(g, "train.seed", 0)));
  return true;
}

} // namespace

std::unique_ptr<DataSource> createImageFolderSource(const Graph &g,
                                                    llvm::ArrayRef<InputInfo> inputs,
                                                    llvm::StringRef modelDir, llvm::StringRef key,
                                                    std::string &err) {
  std::string prefix = key.str() + ".";
  const InputInfo *image = nullptr, *label = nullptr;
  for (const InputInfo &in : inputs) {
    const InputInfo *&slot = in.role == InputRole::ClassTarget ? label : image;
    if ((in.role != InputRole::ClassTarget && in.role != InputRole::Feature) || slot) {
      err = "image_folder data feeds an image input and its cross_entropy class label; " +
            in.describe() + " is " + (slot ? "a second such input" : "neither");
      return nullptr;
    }
    slot = &in;
  }
  if (!image) {
    err = "image_folder data found no floating input for the images";
    return nullptr;
  }
  if (label && label->dtype() != DType::I64 && label->dtype() != DType::I32) {
    err = "image_folder data needs an i64 or i32 label; " + label->describe() + " is " +
          dtypeName(label->dtype()).str();
    return nullptr;
  }
  Transform t;
  if (!readTransform(g, prefix, *image, t, err))
    return nullptr;
  std::string root = resolvePath(modelDir, metaString(g, prefix + "path", ""));
  if (!llvm::sys::fs::is_directory(root)) {
    err = fileError(root, llvm::sys::fs::exists(root) ? "is not a folder" : "no such folder");
    return nullptr;
  }
  std::vector<std::string> classes, topFiles;
  if (!listDirectory(root, classes, topFiles, err))
    return nullptr;
  bool labelled = !classes.empty();
  std::vector<ImageFile> files;
  int64_t skipped = 0;
  std::string firstSkipped;
  bool skipBad = metaString(g, prefix + "bad_files", "error") == "skip";
  auto add = [&](const std::string &relative, int64_t labelId) {
    if (!hasImageExtension(relative))
      return true; // not an image by its name: ImageFolder ignores it too
    std::string path = joinPath(root, relative), why;
    if (looksDecodable(path, why)) {
      files.push_back({path, relative, labelId});
      return true;
    }
    if (!skipBad) {
      err = fileError(path, why + "; remove it, or set 'bad_files: skip' to leave such files out");
      return false;
    }
    if (!skipped++)
      firstSkipped = "'" + path + "' " + why;
    return true;
  };
  if (labelled) {
    if (label && static_cast<int64_t>(classes.size()) > label->classes) {
      err = fileError(root, "has " + llvm::Twine(classes.size()) + " class folders but " +
                                label->describe() + " is the target of " +
                                llvm::Twine(label->classes) + " classes");
      return nullptr;
    }
    for (size_t c = 0; c < classes.size(); ++c) {
      std::vector<std::pair<std::string, std::vector<std::string>>> walked;
      if (!walkSorted(joinPath(root, classes[c]), classes[c], walked, err))
        return nullptr;
      // sorted(os.walk(...)): by the folder's path (the walk above went
      // depth first, which differs where a name sorts before '/').
      std::sort(walked.begin(), walked.end(),
                [](const auto &a, const auto &b) { return a.first < b.first; });
      size_t before = files.size();
      int64_t skippedBefore = skipped;
      for (const auto &[folder, names] : walked)
        for (const std::string &name : names)
          if (!add(joinPath(folder, name), static_cast<int64_t>(c)))
            return nullptr;
      if (files.size() == before && skipped == skippedBefore) {
        err = fileError(joinPath(root, classes[c]),
                        "class '" + classes[c] +
                            "' has no image files (.jpg, .jpeg, .png, ...); ImageFolder "
                            "refuses an empty class too");
        return nullptr;
      }
    }
  } else {
    // Unlabelled: only for a run that reads no labels (predicting).
    if (label && !label->optional) {
      err = fileError(root, "has no class folders (one subfolder per class, as torchvision's "
                            "ImageFolder); a folder of images alone can only be predicted");
      return nullptr;
    }
    for (const std::string &name : topFiles)
      if (!add(name, 0))
        return nullptr;
  }
  if (files.empty()) {
    err =
        fileError(root, skipped ? "every image file was left out (the first: " + firstSkipped + ")"
                                : std::string("holds no image files"));
    return nullptr;
  }
  int imageIndex = static_cast<int>(image->index);
  int labelIndex = label && labelled ? static_cast<int>(label->index) : -1;
  return std::make_unique<ImageFolderSource>(std::move(files), labelled, t, imageIndex, labelIndex,
                                             skipped, std::move(firstSkipped));
}

} // namespace ampc::data
