//===- Utf8.cpp -------------------------------------------------------------===//
#include "ir/support/Utf8.h"

#include "llvm/Support/ConvertUTF.h"

namespace ampc {

std::string validUtf8(llvm::StringRef s) {
  std::string out;
  out.reserve(s.size());
  const auto *p = reinterpret_cast<const llvm::UTF8 *>(s.data());
  const llvm::UTF8 *end = p + s.size();
  while (p < end) {
    unsigned n = llvm::getNumBytesForUTF8(*p);
    if (n <= static_cast<unsigned>(end - p) && llvm::isLegalUTF8Sequence(p, p + n)) {
      out.append(reinterpret_cast<const char *>(p), n);
      p += n;
      continue;
    }
    out += "\xEF\xBF\xBD"; // U+FFFD REPLACEMENT CHARACTER
    ++p;
  }
  return out;
}

} // namespace ampc
