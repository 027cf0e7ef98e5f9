//===- CsvData.cpp - Numeric CSV: feature columns and one label column -------===//
//
// Each row is one sample: the label column feeds the label input and all
// other columns, in order, the flattened feature input. Fields are numbers
// separated by commas (spaces around them are ignored); blank lines are
// skipped; an optional header line is skipped when train.data.header is set.
// An optional label input (createDataSource) may have no column at all.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/DataInternal.h"

#include "ir/Graph.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstring>

namespace ampc::data {
namespace {

/// The label input: the first integer input, else a floating loss target
/// (regression from CSV). The feature input: the first other floating input.
bool pickInputs(llvm::ArrayRef<InputInfo> inputs, int &label, int &features, std::string &err) {
  label = features = -1;
  for (const InputInfo &in : inputs)
    if (!in.isFloating()) {
      label = in.index;
      break;
    }
  if (label < 0)
    for (const InputInfo &in : inputs)
      if (in.role == InputRole::RegressionTarget || in.role == InputRole::BinaryTarget) {
        label = in.index;
        break;
      }
  for (const InputInfo &in : inputs)
    if (in.isFloating() && static_cast<int>(in.index) != label) {
      features = in.index;
      break;
    }
  if (label < 0 || features < 0) {
    err = "csv data needs a floating feature input and a label input (an integer input or a loss "
          "target)";
    return false;
  }
  for (const InputInfo &in : inputs)
    if (static_cast<int>(in.index) != label && static_cast<int>(in.index) != features) {
      err = "csv data feeds one feature input and one label input; " + in.describe() +
            " would get no columns";
      return false;
    }
  if (inputs[label].sampleElements != 1) {
    err = "csv data gives one label per row, but " + inputs[label].describe() + " needs " +
          std::to_string(inputs[label].sampleElements) + " values per sample";
    return false;
  }
  return true;
}

/// Fields of the first data row (blank lines and the header skipped); -1
/// when there is none.
int64_t firstRowFields(llvm::StringRef text, bool header) {
  while (!text.empty()) {
    auto [line, tail] = text.split('\n');
    text = tail;
    if (line.trim().empty())
      continue;
    if (header) {
      header = false;
      continue;
    }
    return static_cast<int64_t>(line.count(',')) + 1;
  }
  return -1;
}

void appendValue(std::vector<char> &bytes, const void *v, size_t size) {
  const char *p = static_cast<const char *>(v);
  bytes.insert(bytes.end(), p, p + size);
}

} // namespace

std::unique_ptr<DataSource> createCsvSource(const Graph &g, llvm::ArrayRef<InputInfo> inputs,
                                            llvm::StringRef modelDir, llvm::StringRef key,
                                            std::string &err) {
  int labelInput, featureInput;
  if (!pickInputs(inputs, labelInput, featureInput, err))
    return nullptr;
  const InputInfo &labelIn = inputs[labelInput], &featureIn = inputs[featureInput];

  std::string path = resolvePath(modelDir, metaString(g, (key + ".path").str(), ""));
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    err = fileError(path, "cannot open: " + buffer.getError().message());
    return nullptr;
  }
  bool header = metaBool(g, (key + ".header").str(), false);
  // An optional label input (predicting) may have no column: the first row
  // says whether the file has one, and every row must agree with it.
  bool hasLabel = !labelIn.optional ||
                  firstRowFields((*buffer)->getBuffer(), header) != featureIn.sampleElements;
  int64_t columns = featureIn.sampleElements + (hasLabel ? 1 : 0);
  int64_t labelColumn = metaInt(g, (key + ".label_column").str(), -1);
  if (labelColumn < 0)
    labelColumn += columns; // -1 is the last column
  if (hasLabel && (labelColumn < 0 || labelColumn >= columns)) {
    err = fileError(path, "label_column " +
                              llvm::Twine(metaInt(g, (key + ".label_column").str(), -1)) +
                              " is outside the " + llvm::Twine(columns) + " columns of a row");
    return nullptr;
  }

  SampleArray features, labels;
  features.path = labels.path = path;
  features.dtype = DType::F64;
  features.sampleElements = featureIn.sampleElements;
  labels.dtype = labelIn.isFloating() ? DType::F64 : DType::I64;
  labels.sampleElements = 1;
  labels.absent = !hasLabel;

  llvm::StringRef rest = (*buffer)->getBuffer();
  bool headerPending = header;
  for (int64_t lineNo = 1; !rest.empty(); ++lineNo) {
    auto [line, tail] = rest.split('\n');
    rest = tail;
    line = line.rtrim("\r");
    if (line.trim().empty())
      continue;
    if (headerPending) {
      headerPending = false;
      continue;
    }
    llvm::SmallVector<llvm::StringRef, 64> fields;
    line.split(fields, ',');
    if (static_cast<int64_t>(fields.size()) != columns) {
      err = fileError(path, "line " + llvm::Twine(lineNo) + ": expected " + llvm::Twine(columns) +
                                " columns (" + llvm::Twine(featureIn.sampleElements) +
                                " values for " + featureIn.describe() +
                                (hasLabel ? " and a label" : ", as the first row") + "), found " +
                                llvm::Twine(fields.size()));
      return nullptr;
    }
    for (size_t col = 0; col < fields.size(); ++col) {
      llvm::StringRef text = fields[col].trim();
      double v;
      if (text.empty() || text.getAsDouble(v)) {
        err = fileError(path, "line " + llvm::Twine(lineNo) + ", column " + llvm::Twine(col + 1) +
                                  ": '" + text + "' is not a number");
        return nullptr;
      }
      if (!hasLabel || static_cast<int64_t>(col) != labelColumn) {
        appendValue(features.bytes, &v, sizeof v);
        continue;
      }
      if (labels.dtype == DType::F64) {
        appendValue(labels.bytes, &v, sizeof v);
        continue;
      }
      if (!(std::trunc(v) == v && std::fabs(v) < 9.0e15)) {
        err = fileError(path, "line " + llvm::Twine(lineNo) + ": label '" + text + "' for " +
                                  labelIn.describe() + " is not an integer");
        return nullptr;
      }
      int64_t label = static_cast<int64_t>(v);
      appendValue(labels.bytes, &label, sizeof label);
    }
    ++features.numSamples;
    features.lines.push_back(lineNo);
    if (hasLabel) {
      ++labels.numSamples;
      labels.lines.push_back(lineNo);
    }
  }

  std::vector<SampleArray> arrays(inputs.size());
  arrays[featureInput] = std::move(features);
  arrays[labelInput] = std::move(labels);
  return createArraySource("csv", inputs, std::move(arrays), err, nonFiniteDataPolicy(g));
}

} // namespace ampc::data
