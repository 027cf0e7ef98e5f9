//===- NpyFile.cpp ----------------------------------------------------------===//
#include "ir/support/NpyFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

namespace ampc {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
/// Headers are padded so the data starts on a 64-byte boundary.
constexpr size_t kAlignment = 64;

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

bool fail(std::string &err, llvm::StringRef path, const llvm::Twine &msg) {
  err = (path + ": " + msg).str();
  return false;
}

/// The NumPy descr of each supported element type (little-endian).
struct DescrInfo {
  llvm::StringRef descr;
  DType dtype;
  bool isUint8;
};
constexpr DescrInfo kDescrs[] = {
    {"<f4", DType::F32, false}, {"<f8", DType::F64, false}, {"<f2", DType::F16, false},
    {"<i8", DType::I64, false}, {"<i4", DType::I32, false}, {"|b1", DType::Bool, false},
    {"|u1", DType::Bool, true},
};

/// Maps a descr to a dtype. '=' (native, little-endian on every machine we
/// build for) and, for 1-byte types, '<' and '=' are accepted as spellings of
/// the canonical forms.
std::optional<DescrInfo> lookupDescr(llvm::StringRef descr) {
  if (descr.size() < 2)
    return std::nullopt;
  char order = descr[0];
  llvm::StringRef code = descr.drop_front();
  for (const DescrInfo &d : kDescrs) {
    if (d.descr.drop_front() != code)
      continue;
    bool oneByte = d.descr[0] == '|';
    if (order == d.descr[0] || order == '=' || (oneByte && order == '<'))
      return d;
  }
  return std::nullopt;
}

/// A tiny reader for the header's Python dict literal.
class HeaderParser {
public:
  explicit HeaderParser(llvm::StringRef text) : rest_(text) {}

  bool parse(std::string &descr, bool &fortranOrder, llvm::SmallVectorImpl<int64_t> &shape,
             std::string &problem) {
    bool sawDescr = false, sawOrder = false, sawShape = false;
    if (!consume('{'))
      return setProblem(problem, "header is not a dict");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return setProblem(problem, "malformed header key");
      if (!consume(':'))
        return setProblem(problem, "malformed header: expected ':' after '" + key + "'");
      if (key == "descr") {
        if (!parseString(descr))
          return setProblem(problem, "malformed 'descr' in header");
        sawDescr = true;
      } else if (key == "fortran_order") {
        skipSpace();
        if (rest_.consume_front("True"))
          fortranOrder = true;
        else if (rest_.consume_front("False"))
          fortranOrder = false;
        else
          return setProblem(problem, "malformed 'fortran_order' in header");
        sawOrder = true;
      } else if (key == "shape") {
        if (!parseShape(shape))
          return setProblem(problem, "malformed 'shape' in header");
        sawShape = true;
      } else {
        return setProblem(problem, "unexpected header key '" + key + "'");
      }
      skipSpace();
      if (consume(','))
        continue;
      if (consume('}'))
        break;
      return setProblem(problem, "malformed header dict");
    }
    if (!sawDescr || !sawOrder || !sawShape)
      return setProblem(problem, "header lacks 'descr', 'fortran_order' or 'shape'");
    return true;
  }

private:
  static bool setProblem(std::string &problem, const llvm::Twine &msg) {
    problem = msg.str();
    return false;
  }
  void skipSpace() { rest_ = rest_.ltrim(" \t\r\n"); }
  bool consume(char c) {
    skipSpace();
    return rest_.consume_front(llvm::StringRef(&c, 1));
  }
  bool parseString(std::string &out) {
    skipSpace();
    if (rest_.empty() || (rest_[0] != '\'' && rest_[0] != '"'))
      return false;
    char quote = rest_[0];
    size_t end = rest_.find(quote, 1);
    if (end == llvm::StringRef::npos)
      return false;
    out = rest_.slice(1, end).str();
    rest_ = rest_.drop_front(end + 1);
    return true;
  }
  bool parseShape(llvm::SmallVectorImpl<int64_t> &shape) {
    shape.clear();
    if (!consume('('))
      return false;
    while (true) {
      skipSpace();
      if (consume(')'))
        return true;
      size_t digits = 0;
      while (digits < rest_.size() && llvm::isDigit(rest_[digits]))
        ++digits;
      int64_t dim = 0;
      if (digits == 0 || rest_.take_front(digits).getAsInteger(10, dim))
        return false;
      rest_ = rest_.drop_front(digits);
      rest_.consume_front("L"); // Python 2 longs
      shape.push_back(dim);
      skipSpace();
      if (consume(','))
        continue;
      if (consume(')'))
        return true;
      return false;
    }
  }

  llvm::StringRef rest_;
};

bool readLE(const unsigned char *p, unsigned n, uint64_t &out) {
  out = 0;
  for (unsigned i = 0; i < n; ++i)
    out |= uint64_t(p[i]) << (8 * i);
  return true;
}

/// Parses magic, version and header from an open file; leaves the file
/// positioned at the data. `dataOffset` is where the data starts.
bool readHeaderFrom(std::FILE *f, llvm::StringRef path, NpyArray &out, uint64_t &dataOffset,
                    std::string &err) {
  unsigned char prefix[kMagicLen + 2];
  if (std::fread(prefix, 1, sizeof(prefix), f) != sizeof(prefix) ||
      std::memcmp(prefix, kMagic, kMagicLen) != 0)
    return fail(err, path, "not a .npy file (bad magic)");
  unsigned major = prefix[kMagicLen];
  if (major < 1 || major > 3)
    return fail(err, path,
                "unsupported .npy version " + llvm::Twine(major) + "." +
                    llvm::Twine(unsigned(prefix[kMagicLen + 1])));
  unsigned lenBytes = major == 1 ? 2 : 4;
  unsigned char lenBuf[4];
  if (std::fread(lenBuf, 1, lenBytes, f) != lenBytes)
    return fail(err, path, "truncated header");
  uint64_t headerLen = 0;
  readLE(lenBuf, lenBytes, headerLen);
  // No real header is anywhere near this; refuse before allocating.
  if (headerLen > (uint64_t(1) << 20))
    return fail(err, path, "header length " + llvm::Twine(headerLen) + " is implausible");
  std::string header(headerLen, '\0');
  if (headerLen && std::fread(header.data(), 1, headerLen, f) != headerLen)
    return fail(err, path, "truncated header");
  dataOffset = kMagicLen + 2 + lenBytes + headerLen;

  std::string descr, problem;
  bool fortranOrder = false;
  out.shape.clear();
  if (!HeaderParser(header).parse(descr, fortranOrder, out.shape, problem))
    return fail(err, path, problem);
  if (fortranOrder)
    return fail(err, path, "fortran_order arrays are not supported (save a C-order array)");
  if (!descr.empty() && descr[0] == '>')
    return fail(err, path, "big-endian dtype '" + descr + "' is not supported");
  std::optional<DescrInfo> info = lookupDescr(descr);
  if (!info)
    return fail(err, path,
                "unsupported dtype '" + descr + "' (expected <f4, <f8, <f2, <i8, <i4, |u1 or |b1)");
  out.dtype = info->dtype;
  out.isUint8 = info->isUint8;
  return true;
}

/// Size of the data the header announces, or nullopt when the bytes of the
/// shape's nonzero dims do not fit int64. Zero dims are left out of that
/// bound: (0, 2^62, 4) holds no data, yet a reader multiplying its sample
/// dims (2^62 * 4) would overflow.
std::optional<uint64_t> dataBytes(const NpyArray &a) {
  constexpr uint64_t kLimit = uint64_t(INT64_MAX);
  uint64_t n = a.elementSize();
  bool empty = false;
  for (int64_t d : a.shape) {
    if (d < 0)
      return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    if (n > kLimit / uint64_t(d))
      return std::nullopt;
    n *= uint64_t(d);
  }
  return empty ? 0 : n;
}

bool readImpl(llvm::StringRef path, NpyArray &out, bool withData, std::string &err) {
  out = NpyArray();
  FilePtr f(std::fopen(path.str().c_str(), "rb"));
  if (!f)
    return fail(err, path, llvm::Twine("cannot open: ") + std::strerror(errno));
  uint64_t dataOffset = 0;
  if (!readHeaderFrom(f.get(), path, out, dataOffset, err))
    return false;
  std::optional<uint64_t> expected = dataBytes(out);
  if (!expected)
    return fail(err, path, "shape's element count overflows");
  if (std::fseek(f.get(), 0, SEEK_END) != 0)
    return fail(err, path, llvm::Twine("cannot seek: ") + std::strerror(errno));
  long end = std::ftell(f.get());
  if (end < 0)
    return fail(err, path, llvm::Twine("cannot seek: ") + std::strerror(errno));
  uint64_t actual = uint64_t(end) - dataOffset;
  if (actual < *expected)
    return fail(err, path,
                "truncated data: the header announces " + llvm::Twine(*expected) +
                    " bytes, the file holds " + llvm::Twine(actual));
  if (actual > *expected)
    return fail(err, path,
                llvm::Twine(actual - *expected) + " bytes after the data the header announces");
  if (!withData)
    return true;
  if (std::fseek(f.get(), long(dataOffset), SEEK_SET) != 0)
    return fail(err, path, llvm::Twine("cannot seek: ") + std::strerror(errno));
  out.data.resize(*expected);
  if (*expected && std::fread(out.data.data(), 1, *expected, f.get()) != *expected)
    return fail(err, path, "truncated data");
  return true;
}

/// The magic, version, header length and padded header of a file holding
/// `shape` elements of `descr`; false + `err` for a negative dimension.
bool encodePrefix(llvm::StringRef path, llvm::StringRef descr, llvm::ArrayRef<int64_t> shape,
                  std::string &prefix, uint64_t &count, std::string &err) {
  std::string shapeText = "(";
  count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      return fail(err, path, "negative dimension " + llvm::Twine(shape[i]));
    count *= uint64_t(shape[i]);
    shapeText += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size())
      shapeText += shape.size() == 1 ? "," : ", ";
  }
  shapeText += ")";
  std::string header =
      "{'descr': '" + descr.str() + "', 'fortran_order': False, 'shape': " + shapeText + ", }";
  // Pad with spaces and a final newline so the data starts 64-byte aligned.
  bool v2 = false;
  size_t prefixLen = kMagicLen + 2 + 2;
  size_t total = prefixLen + header.size() + 1;
  size_t padded = (total + kAlignment - 1) / kAlignment * kAlignment;
  if (padded - prefixLen > 0xffff) {
    v2 = true;
    prefixLen = kMagicLen + 2 + 4;
    total = prefixLen + header.size() + 1;
    padded = (total + kAlignment - 1) / kAlignment * kAlignment;
  }
  header.append(padded - total, ' ');
  header += '\n';

  prefix.assign(kMagic, kMagicLen);
  prefix += char(v2 ? 2 : 1);
  prefix += char(0);
  uint64_t len = header.size();
  for (unsigned i = 0; i < (v2 ? 4u : 2u); ++i)
    prefix += char((len >> (8 * i)) & 0xff);
  prefix += header;
  return true;
}

bool writeImpl(llvm::StringRef path, llvm::StringRef descr, unsigned elemSize,
               llvm::ArrayRef<int64_t> shape, const void *data, std::string &err) {
  std::string prefix;
  uint64_t count = 0;
  if (!encodePrefix(path, descr, shape, prefix, count, err))
    return false;
  FilePtr f(std::fopen(path.str().c_str(), "wb"));
  if (!f)
    return fail(err, path, llvm::Twine("cannot open for writing: ") + std::strerror(errno));
  uint64_t bytes = count * elemSize;
  if (std::fwrite(prefix.data(), 1, prefix.size(), f.get()) != prefix.size() ||
      (bytes && std::fwrite(data, 1, bytes, f.get()) != bytes))
    return fail(err, path, llvm::Twine("write failed: ") + std::strerror(errno));
  if (std::fclose(f.release()) != 0)
    return fail(err, path, llvm::Twine("write failed: ") + std::strerror(errno));
  return true;
}

} // namespace

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

unsigned NpyArray::elementSize() const { return isUint8 ? 1 : dtypeSize(dtype); }

bool readNpyHeader(llvm::StringRef path, NpyArray &out, std::string &err) {
  return readImpl(path, out, /*withData=*/false, err);
}

bool readNpy(llvm::StringRef path, NpyArray &out, std::string &err) {
  return readImpl(path, out, /*withData=*/true, err);
}

bool writeNpy(llvm::StringRef path, DType dtype, llvm::ArrayRef<int64_t> shape, const void *data,
              std::string &err) {
  for (const DescrInfo &d : kDescrs)
    if (d.dtype == dtype && !d.isUint8)
      return writeImpl(path, d.descr, dtypeSize(dtype), shape, data, err);
  return fail(err, path, "dtype " + dtypeName(dtype) + " has no .npy equivalent");
}

bool encodeNpy(llvm::StringRef name, DType dtype, llvm::ArrayRef<int64_t> shape, const void *data,
               std::string &out, std::string &err) {
  for (const DescrInfo &d : kDescrs)
    if (d.dtype == dtype && !d.isUint8) {
      uint64_t count = 0;
      if (!encodePrefix(name, d.descr, shape, out, count, err))
        return false;
      out.append(static_cast<const char *>(data), count * dtypeSize(dtype));
      return true;
    }
  return fail(err, name, "dtype " + dtypeName(dtype) + " has no .npy equivalent");
}

bool writeNpyUint8(llvm::StringRef path, llvm::ArrayRef<int64_t> shape, const uint8_t *data,
                   std::string &err) {
  return writeImpl(path, "|u1", 1, shape, data, err);
}

} // namespace ampc
