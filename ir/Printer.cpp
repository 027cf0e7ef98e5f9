//===- Printer.cpp - Textual IR output -------------------------------------===//
//
// The grammar is documented in docs/textual-ir.md; Parser.cpp reads exactly
// what this file writes. Everything is written straight to the stream in a
// fixed order (sections in declaration order, attributes sorted by AttrMap),
// so the same graph always prints the same bytes.
//
//===----------------------------------------------------------------------===//
#include "ir/Printer.h"

#include "llvm/ADT/StringExtras.h"

namespace ampc {

namespace {

/// Keys of meta and attribute dictionaries print bare when the parser reads
/// them back as one identifier token; anything else prints as a string.
bool isBareKey(llvm::StringRef key) {
  if (key.empty() || !(llvm::isAlpha(key[0]) || key[0] == '_'))
    return false;
  return llvm::all_of(key, [](char c) { return llvm::isAlnum(c) || c == '_' || c == '.'; });
}

class GraphPrinter {
public:
  GraphPrinter(const Graph &g, llvm::raw_ostream &os, const PrintOptions &opts)
      : g_(g), os_(os), opts_(opts) {}

  void print() {
    os_ << "graph @" << g_.name() << " {\n";
    if (!g_.meta().empty()) {
      os_ << "  meta ";
      printDict(g_.meta());
      os_ << '\n';
    }
    for (const Value *in : g_.inputs()) {
      os_ << "  input ";
      printName(in);
      os_ << " : ";
      printType(in->type());
      printLoc(in->loc());
      os_ << '\n';
    }
    for (const Value *s : g_.state())
      printState(*s);
    for (const Node &n : g_.nodes())
      printNode(n);
    for (const StateUpdate &u : g_.stateUpdates()) {
      os_ << "  update ";
      printName(u.state);
      os_ << " = ";
      printName(u.newValue);
      os_ << '\n';
    }
    if (!g_.outputs().empty()) {
      os_ << "  output ";
      printNameList(g_.outputs());
      os_ << '\n';
    }
    os_ << "}\n";
  }

private:
  void printName(const Value *v) {
    // A dangling operand cannot be read back, but printing it helps whoever
    // is debugging the pass that left it (the verifier reports it).
    if (!v) {
      os_ << "%<<null>>";
      return;
    }
    os_ << '%';
    if (llvm::all_of(v->name(),
                     [](char c) { return llvm::isAlnum(c) || c == '_' || c == '.' || c == '-'; }) &&
        !v->name().empty())
      os_ << v->name();
    else
      os_ << '"' << v->name() << '"';
  }

  void printNameList(llvm::ArrayRef<Value *> values) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (i)
        os_ << ", ";
      printName(values[i]);
    }
  }

  void printType(const TensorType &t) {
    os_ << dtypeName(t.dtype()) << '[';
    for (unsigned i = 0; i < t.rank(); ++i) {
      if (i)
        os_ << ',';
      os_ << t.dim(i);
    }
    os_ << ']';
  }

  void printDict(const AttrMap &attrs) {
    os_ << '{';
    bool first = true;
    for (const auto &[key, value] : attrs) {
      if (!first)
        os_ << ", ";
      first = false;
      if (isBareKey(key))
        os_ << key;
      else
        os_ << Attribute(key.str()).str();
      os_ << " = " << value.str();
    }
    os_ << '}';
  }

  void printLoc(const Location &loc) {
    if (!opts_.locations || !loc.known())
      return;
    os_ << " loc(" << Attribute(loc.file()).str() << ':' << loc.line() << ':' << loc.col() << ')';
  }

  void printState(const Value &s) {
    os_ << "  " << stateKindKeyword(s.stateKind()) << ' ';
    printName(&s);
    os_ << " : ";
    printType(s.type());
    if (s.init().kind != InitSpec::Kind::None)
      os_ << " init " << s.init().str();
    if (!s.trainable())
      os_ << " frozen";
    printLoc(s.loc());
    os_ << '\n';
  }

  void printNode(const Node &n) {
    os_ << "  ";
    if (n.numResults() > 0) {
      for (unsigned i = 0; i < n.numResults(); ++i) {
        if (i)
          os_ << ", ";
        printName(n.result(i));
      }
      os_ << " = ";
    }
    os_ << n.opName() << '(';
    printNameList(n.operands());
    os_ << ')';
    if (!n.attrs().empty()) {
      os_ << ' ';
      printDict(n.attrs());
    }
    os_ << " : (";
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      if (i)
        os_ << ", ";
      if (const Value *v = n.operand(i))
        printType(v->type());
      else
        os_ << "<<null>>";
    }
    os_ << ") -> ";
    bool parenthesize = n.numResults() != 1;
    if (parenthesize)
      os_ << '(';
    for (unsigned i = 0; i < n.numResults(); ++i) {
      if (i)
        os_ << ", ";
      printType(n.result(i)->type());
    }
    if (parenthesize)
      os_ << ')';
    if (n.role() != NodeRole::Forward)
      os_ << " role(" << roleName(n.role()) << ')';
    if (n.precisionOverride() != PrecisionOverride::None)
      os_ << " precision(" << precisionOverrideName(n.precisionOverride()) << ')';
    printLoc(n.loc());
    os_ << '\n';
  }

  const Graph &g_;
  llvm::raw_ostream &os_;
  const PrintOptions &opts_;
};

} // namespace

void printGraph(const Graph &g, llvm::raw_ostream &os, const PrintOptions &opts) {
  GraphPrinter(g, os, opts).print();
}

std::string printGraphToString(const Graph &g, const PrintOptions &opts) {
  std::string out;
  llvm::raw_string_ostream os(out);
  printGraph(g, os, opts);
  os.flush();
  return out;
}

} // namespace ampc
