//===- Utf8.h - Text made safe for formats that demand UTF-8 ----------------===//
#ifndef AMPC_IR_SUPPORT_UTF8_H
#define AMPC_IR_SUPPORT_UTF8_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace ampc {

/// `s` with every byte that does not start a well-formed UTF-8 sequence
/// replaced by U+FFFD. Names reach the graph from model files (an ONNX file
/// may hold any bytes), and Graphviz, JSON and HTML each reject or
/// misread invalid UTF-8.
std::string validUtf8(llvm::StringRef s);

} // namespace ampc

#endif
