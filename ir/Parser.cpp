//===- Parser.cpp - Textual IR input ---------------------------------------===//
//
// A hand-written lexer and recursive-descent parser for the grammar in
// docs/textual-ir.md. One pass over the text builds the graph directly; an
// operand naming a value defined further down (a forward reference, which is
// how a cycle is written) is left empty and filled in once the whole file has
// been read. Every step is linear in the size of the text.
//
// Syntax errors stop the parse at the first one; names used but never defined
// are all reported at the end. Result types are taken as written: the verifier,
// not the parser, compares them with the op's inference.
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"

#include "ir/Builder.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace ampc {

namespace {

struct Pos {
  uint32_t line = 0;
  uint32_t col = 0;
};

enum class Tok {
  Eof,
  Error, ///< the lexer has already reported it
  Ident,
  ValueName, ///< %name; text excludes the '%'
  GraphName, ///< @name; text excludes the '@'
  Int,
  Float,
  String, ///< text is the raw spelling between the quotes, escapes unresolved
  LParen,
  RParen,
  LBrace,
  RBrace,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Equal,
  Arrow,
};

struct Token {
  Tok kind = Tok::Eof;
  llvm::StringRef text;
  Pos pos;
};

bool isNameChar(char c) { return llvm::isAlnum(c) || c == '_' || c == '.' || c == '-'; }
bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_' || c == '.'; }

/// Splits the text into tokens. Copyable, so the parser can peek ahead by
/// lexing from a copy.
class Lexer {
public:
  using ErrorFn = llvm::function_ref<void(Pos, const llvm::Twine &)>;

  explicit Lexer(llvm::StringRef text)
      : cur_(text.begin()), end_(text.end()), lineStart_(text.begin()) {}

  Token next(ErrorFn error) {
    skipSpaceAndComments();
    Token t;
    t.pos = here();
    if (cur_ == end_) {
      t.kind = Tok::Eof;
      return t;
    }
    const char *start = cur_;
    char c = *cur_;
    auto punct = [&](Tok k) {
      ++cur_;
      t.kind = k;
      t.text = llvm::StringRef(start, 1);
      return t;
    };
    switch (c) {
    case '(':
      return punct(Tok::LParen);
    case ')':
      return punct(Tok::RParen);
    case '{':
      return punct(Tok::LBrace);
    case '}':
      return punct(Tok::RBrace);
    case '[':
      return punct(Tok::LBracket);
    case ']':
      return punct(Tok::RBracket);
    case ',':
      return punct(Tok::Comma);
    case ':':
      return punct(Tok::Colon);
    case '=':
      return punct(Tok::Equal);
    case '%':
    case '@': {
      ++cur_;
      // %"a name": a value named in an imported file (onnx::MatMul_110,
      // /conv1/Conv_output_0) keeps its spelling; such names hold no '"' or '\\'.
      if (c == '%' && cur_ != end_ && *cur_ == '"') {
        const char *quoted = ++cur_;
        while (cur_ != end_ && *cur_ != '"' && *cur_ != '\n' && *cur_ != '\\')
          ++cur_;
        if (cur_ == end_ || *cur_ != '"' || cur_ == quoted) {
          error(t.pos, "expected a non-empty quoted name without '\\' after '%\"'");
          t.kind = Tok::Error;
          return t;
        }
        t.kind = Tok::ValueName;
        t.text = llvm::StringRef(quoted, cur_ - quoted);
        ++cur_;
        return t;
      }
      const char *nameStart = cur_;
      while (cur_ != end_ && isNameChar(*cur_))
        ++cur_;
      if (cur_ == nameStart) {
        error(t.pos, llvm::Twine("expected a name after '") + llvm::Twine(c) + "'");
        t.kind = Tok::Error;
        return t;
      }
      t.kind = c == '%' ? Tok::ValueName : Tok::GraphName;
      t.text = llvm::StringRef(nameStart, cur_ - nameStart);
      return t;
    }
    case '"':
      return lexString(t, error);
    default:
      break;
    }
    if (c == '-' && cur_ + 1 != end_ && cur_[1] == '>') {
      cur_ += 2;
      t.kind = Tok::Arrow;
      t.text = llvm::StringRef(start, 2);
      return t;
    }
    if (c == '-' && llvm::StringRef(cur_, end_ - cur_).startswith("-inf") &&
        (cur_ + 4 == end_ || !isIdentChar(cur_[4]))) {
      cur_ += 4;
      t.kind = Tok::Float;
      t.text = llvm::StringRef(start, 4);
      return t;
    }
    if (llvm::isDigit(c) || (c == '-' && cur_ + 1 != end_ && llvm::isDigit(cur_[1])))
      return lexNumber(t, error);
    if (llvm::isAlpha(c) || c == '_') {
      while (cur_ != end_ && isIdentChar(*cur_))
        ++cur_;
      t.kind = Tok::Ident;
      t.text = llvm::StringRef(start, cur_ - start);
      return t;
    }
    if (llvm::isPrint(c))
      error(t.pos, llvm::Twine("unexpected character '") + llvm::Twine(c) + "'");
    else
      error(t.pos, "unexpected byte 0x" + llvm::utohexstr(static_cast<unsigned char>(c)));
    t.kind = Tok::Error;
    return t;
  }

private:
  Pos here() const { return {line_, static_cast<uint32_t>(cur_ - lineStart_) + 1}; }

  void skipSpaceAndComments() {
    while (cur_ != end_) {
      char c = *cur_;
      if (c == '\n') {
        ++cur_;
        ++line_;
        lineStart_ = cur_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++cur_;
      } else if (c == '/' && cur_ + 1 != end_ && cur_[1] == '/') {
        while (cur_ != end_ && *cur_ != '\n')
          ++cur_;
      } else {
        return;
      }
    }
  }

  Token lexNumber(Token &t, ErrorFn error) {
    const char *start = cur_;
    if (*cur_ == '-')
      ++cur_;
    while (cur_ != end_ && llvm::isDigit(*cur_))
      ++cur_;
    bool isFloat = false;
    if (cur_ != end_ && *cur_ == '.') {
      isFloat = true;
      ++cur_;
      if (cur_ == end_ || !llvm::isDigit(*cur_)) {
        error(here(), "expected a digit after '.' in a number");
        t.kind = Tok::Error;
        return t;
      }
      while (cur_ != end_ && llvm::isDigit(*cur_))
        ++cur_;
    }
    if (cur_ != end_ && (*cur_ == 'e' || *cur_ == 'E')) {
      isFloat = true;
      ++cur_;
      if (cur_ != end_ && (*cur_ == '+' || *cur_ == '-'))
        ++cur_;
      if (cur_ == end_ || !llvm::isDigit(*cur_)) {
        error(here(), "expected a digit in the exponent of a number");
        t.kind = Tok::Error;
        return t;
      }
      while (cur_ != end_ && llvm::isDigit(*cur_))
        ++cur_;
    }
    t.kind = isFloat ? Tok::Float : Tok::Int;
    t.text = llvm::StringRef(start, cur_ - start);
    return t;
  }

  Token lexString(Token &t, ErrorFn error) {
    ++cur_; // opening quote
    const char *start = cur_;
    while (true) {
      if (cur_ == end_ || *cur_ == '\n') {
        error(t.pos, "unterminated string");
        t.kind = Tok::Error;
        return t;
      }
      char c = *cur_;
      if (c == '"')
        break;
      if (c == '\\') {
        char e = cur_ + 1 != end_ ? cur_[1] : '\0';
        if (e != '"' && e != '\\' && e != 'n' && e != 't') {
          error(here(), "unknown escape sequence in string (use \\\", \\\\, \\n or \\t)");
          t.kind = Tok::Error;
          return t;
        }
        cur_ += 2;
        continue;
      }
      ++cur_;
    }
    t.kind = Tok::String;
    t.text = llvm::StringRef(start, cur_ - start);
    ++cur_; // closing quote
    return t;
  }

  const char *cur_;
  const char *end_;
  const char *lineStart_;
  uint32_t line_ = 1;
};

/// Resolves the escapes of a string token (the lexer has validated them).
std::string unescape(llvm::StringRef raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = raw[++i];
    out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
  }
  return out;
}

class IRParser {
public:
  IRParser(llvm::StringRef text, llvm::StringRef bufferName, DiagnosticEngine &diag,
           const OpRegistry &registry, bool fileLocations = false)
      : lex_(text), diag_(diag), registry_(registry),
        bufferFile_(std::make_shared<const std::string>(bufferName.str())),
        fileLocations_(fileLocations) {}

  /// The whole text is one initialiser, as InitSpec::str() writes it.
  std::optional<InitSpec> parseInitOnly() {
    advance();
    InitSpec init;
    if (!parseInitSpec(init))
      return std::nullopt;
    if (tok_.kind != Tok::Eof) {
      expected("the end of the initializer");
      return std::nullopt;
    }
    return init;
  }

  std::unique_ptr<Graph> parse() {
    unsigned errorsBefore = diag_.numErrors();
    graph_ = std::make_unique<Graph>();
    graph_->setLoc(locAt({1, 1}));
    advance();
    if (!parseGraphBody() || !resolveForwardReferences() || diag_.numErrors() != errorsBefore)
      return nullptr;
    return std::move(graph_);
  }

private:
  //===--------------------------------------------------------------------===//
  // Tokens and errors
  //===--------------------------------------------------------------------===//

  void advance() {
    tok_ = lex_.next([this](Pos p, const llvm::Twine &msg) { error(p, msg); });
  }

  Token peek() {
    Lexer copy = lex_;
    return copy.next([](Pos, const llvm::Twine &) {});
  }

  Location locAt(Pos p) const { return Location(bufferFile_, p.line, p.col); }

  bool error(Pos p, const llvm::Twine &msg) {
    diag_.error(locAt(p), msg);
    return false;
  }

  static std::string describe(const Token &t) {
    switch (t.kind) {
    case Tok::Eof:
      return "end of file";
    case Tok::ValueName:
      return "'%" + t.text.str() + "'";
    case Tok::GraphName:
      return "'@" + t.text.str() + "'";
    case Tok::String:
      return "string \"" + t.text.str() + "\"";
    case Tok::Error:
    case Tok::Ident:
    case Tok::Int:
    case Tok::Float:
    case Tok::LParen:
    case Tok::RParen:
    case Tok::LBrace:
    case Tok::RBrace:
    case Tok::LBracket:
    case Tok::RBracket:
    case Tok::Comma:
    case Tok::Colon:
    case Tok::Equal:
    case Tok::Arrow:
      break;
    }
    return "'" + t.text.str() + "'";
  }

  /// "expected <what>, got <token>" at the current token; silent when the
  /// lexer already reported a bad token here.
  bool expected(const llvm::Twine &what) {
    if (tok_.kind == Tok::Error)
      return false;
    return error(tok_.pos, "expected " + what + ", got " + describe(tok_));
  }

  bool consume(Tok kind, const llvm::Twine &what) {
    if (tok_.kind != kind)
      return expected(what);
    advance();
    return true;
  }

  bool isKeyword(llvm::StringRef kw) const { return tok_.kind == Tok::Ident && tok_.text == kw; }

  //===--------------------------------------------------------------------===//
  // Graph structure
  //===--------------------------------------------------------------------===//

  bool parseGraphBody() {
    if (!isKeyword("graph"))
      return expected("'graph'");
    advance();
    if (tok_.kind != Tok::GraphName)
      return expected("a graph name like @main");
    graph_->setName(tok_.text.str());
    advance();
    if (!consume(Tok::LBrace, "'{' after the graph name"))
      return false;
    while (tok_.kind != Tok::RBrace) {
      if (!parseStatement())
        return false;
    }
    advance();
    if (tok_.kind != Tok::Eof)
      return expected("end of file after the graph's closing '}'");
    return true;
  }

  bool parseStatement() {
    if (tok_.kind == Tok::ValueName)
      return parseNode();
    if (tok_.kind != Tok::Ident)
      return expected("a declaration, a node, 'update', 'output' or '}'");
    // A node without results starts with its op name, followed by '('.
    if (peek().kind == Tok::LParen)
      return parseNode();
    llvm::StringRef kw = tok_.text;
    if (kw == "meta")
      return parseMeta();
    if (kw == "input")
      return parseInput();
    if (std::optional<StateKind> kind = parseStateKind(kw))
      return parseState(*kind);
    if (kw == "update")
      return parseUpdate();
    if (kw == "output")
      return parseOutput();
    return expected("a declaration, a node, 'update', 'output' or '}'");
  }

  /// Records a new value name; reports a redefinition.
  bool defineName(const Token &nameTok) {
    auto [it, inserted] = definedAt_.try_emplace(nameTok.text, nameTok.pos);
    if (inserted)
      return true;
    return error(nameTok.pos, "redefinition of value %" + nameTok.text + " (first defined at " +
                                  llvm::Twine(it->second.line) + ":" + llvm::Twine(it->second.col) +
                                  ")");
  }

  bool parseMeta() {
    Pos metaPos = tok_.pos;
    advance();
    if (sawMeta_)
      return error(metaPos, "duplicate meta block");
    sawMeta_ = true;
    if (tok_.kind != Tok::LBrace)
      return expected("'{' after 'meta'");
    llvm::SmallVector<std::pair<std::string, Pos>, 8> keyPositions;
    if (!parseDict(graph_->meta(), keyPositions))
      return false;
    for (const auto &[key, pos] : keyPositions)
      graph_->setMetaLocation(key, locAt(pos));
    return true;
  }

  bool parseInput() {
    Pos stmtPos = tok_.pos;
    advance();
    if (tok_.kind != Tok::ValueName)
      return expected("a value name after 'input'");
    Token name = tok_;
    if (!defineName(name))
      return false;
    advance();
    TensorType type;
    if (!consume(Tok::Colon, "':' before the input's type") || !parseType(type))
      return false;
    Location loc = locAt(stmtPos);
    if (isKeyword("loc") && peek().kind == Tok::LParen && !parseLoc(loc))
      return false;
    graph_->addInput(name.text, std::move(type), std::move(loc));
    return true;
  }

  bool parseState(StateKind kind) {
    Pos stmtPos = tok_.pos;
    llvm::StringRef keyword = tok_.text;
    advance();
    if (tok_.kind != Tok::ValueName)
      return expected("a value name after '" + keyword + "'");
    Token name = tok_;
    if (!defineName(name))
      return false;
    advance();
    TensorType type;
    if (!consume(Tok::Colon, "':' before the type of %" + name.text) || !parseType(type))
      return false;
    InitSpec init;
    bool sawInit = false, frozen = false, sawLoc = false;
    Location loc = locAt(stmtPos);
    while (tok_.kind == Tok::Ident) {
      Pos p = tok_.pos;
      if (tok_.text == "init") {
        if (sawInit)
          return error(p, "duplicate 'init'");
        sawInit = true;
        advance();
        if (!parseInitSpec(init))
          return false;
      } else if (tok_.text == "frozen") {
        if (frozen)
          return error(p, "duplicate 'frozen'");
        frozen = true;
        advance();
      } else if (tok_.text == "loc" && peek().kind == Tok::LParen) {
        if (sawLoc)
          return error(p, "duplicate loc(...)");
        sawLoc = true;
        if (!parseLoc(loc))
          return false;
      } else {
        break;
      }
    }
    Value *v = graph_->addState(name.text, std::move(type), kind, std::move(init), std::move(loc));
    v->setTrainable(!frozen);
    return true;
  }

  bool parseUpdate() {
    advance();
    if (tok_.kind != Tok::ValueName)
      return expected("the name of a state tensor after 'update'");
    Token target = tok_;
    advance();
    if (!consume(Tok::Equal, "'=' after the updated state tensor"))
      return false;
    if (tok_.kind != Tok::ValueName)
      return expected("the name of the new value after '='");
    pendingUpdates_.push_back({target, tok_});
    advance();
    return true;
  }

  bool parseOutput() {
    advance();
    while (true) {
      if (tok_.kind != Tok::ValueName)
        return expected("a value name in 'output'");
      pendingOutputs_.push_back(tok_);
      advance();
      if (tok_.kind != Tok::Comma)
        return true;
      advance();
    }
  }

  //===--------------------------------------------------------------------===//
  // Nodes
  //===--------------------------------------------------------------------===//

  bool parseNode() {
    Pos stmtPos = tok_.pos;
    llvm::SmallVector<std::string, 2> resultNames;
    if (tok_.kind == Tok::ValueName) {
      while (true) {
        if (tok_.kind != Tok::ValueName)
          return expected("a result name");
        if (!defineName(tok_))
          return false;
        resultNames.push_back(tok_.text.str());
        advance();
        if (tok_.kind != Tok::Comma)
          break;
        advance();
      }
      if (!consume(Tok::Equal, "'=' after the result names"))
        return false;
    }

    if (tok_.kind != Tok::Ident)
      return expected("an op name");
    Token opTok = tok_;
    const OpInfo *op = registry_.lookup(opTok.text);
    if (!op)
      return error(opTok.pos, "unknown op '" + opTok.text + "'");
    advance();

    // Operands; names not yet defined are resolved after the whole file.
    if (!consume(Tok::LParen, "'(' after the op name"))
      return false;
    llvm::SmallVector<Value *, 4> operands;
    llvm::SmallVector<Token, 4> operandToks;
    if (tok_.kind != Tok::RParen) {
      while (true) {
        if (tok_.kind != Tok::ValueName)
          return expected("an operand name like %x");
        operandToks.push_back(tok_);
        operands.push_back(graph_->lookup(tok_.text));
        advance();
        if (tok_.kind != Tok::Comma)
          break;
        advance();
      }
    }
    if (!consume(Tok::RParen, "',' or ')' after the operands"))
      return false;

    AttrMap attrs;
    llvm::SmallVector<std::pair<std::string, Pos>, 8> attrPositions;
    if (tok_.kind == Tok::LBrace && !parseDict(attrs, attrPositions))
      return false;

    // The type signature: operand types (checked against the operands) and
    // result types (taken as written).
    if (!consume(Tok::Colon, "':' before the node's type signature"))
      return false;
    Pos sigPos = tok_.pos;
    llvm::SmallVector<TensorType, 4> operandTypes;
    llvm::SmallVector<Pos, 4> operandTypePos;
    if (!parseTypeList(operandTypes, &operandTypePos))
      return false;
    if (!consume(Tok::Arrow, "'->' after the operand types"))
      return false;
    Pos resultTypesPos = tok_.pos;
    llvm::SmallVector<TensorType, 2> resultTypes;
    if (tok_.kind == Tok::LParen) {
      if (!parseTypeList(resultTypes, nullptr))
        return false;
    } else {
      resultTypes.emplace_back();
      if (!parseType(resultTypes.back()))
        return false;
    }

    // Trailing properties, in any order, each at most once.
    Location loc = locAt(stmtPos);
    NodeRole role = NodeRole::Forward;
    PrecisionOverride precision = PrecisionOverride::None;
    bool sawRole = false, sawPrecision = false, sawLoc = false;
    while (tok_.kind == Tok::Ident && peek().kind == Tok::LParen) {
      Pos p = tok_.pos;
      if (tok_.text == "role") {
        if (sawRole)
          return error(p, "duplicate role(...)");
        sawRole = true;
        if (!parseRoleSuffix(role))
          return false;
      } else if (tok_.text == "precision") {
        if (sawPrecision)
          return error(p, "duplicate precision(...)");
        sawPrecision = true;
        if (!parsePrecisionSuffix(precision))
          return false;
      } else if (tok_.text == "loc") {
        if (sawLoc)
          return error(p, "duplicate loc(...)");
        sawLoc = true;
        if (!parseLoc(loc))
          return false;
      } else {
        break;
      }
    }

    // Check the node against its op's row.
    std::string err;
    if (!checkOperandCount(*op, operands.size(), err))
      return error(opTok.pos, op->name + ": " + err);
    if (!normalizeAttrs(*op, attrs, err)) {
      Pos p = opTok.pos;
      for (const auto &[name, namePos] : attrPositions)
        if (llvm::StringRef(err).contains("'" + name + "'"))
          p = namePos;
      return error(p, op->name + ": " + err);
    }
    if (operandTypes.size() != operands.size())
      return error(sigPos, op->name + " has " + llvm::Twine(operands.size()) +
                               " operand(s), but the signature lists " +
                               llvm::Twine(operandTypes.size()) + " type(s)");
    if (resultTypes.size() != resultNames.size())
      return error(resultTypesPos, op->name + " has " + llvm::Twine(resultNames.size()) +
                                       " result name(s), but the signature lists " +
                                       llvm::Twine(resultTypes.size()) + " result type(s)");
    for (unsigned i = 0; i < operands.size(); ++i)
      if (operands[i] && operands[i]->type() != operandTypes[i])
        return reportOperandTypeMismatch(*op, i, operands[i]->type(), operandTypes[i],
                                         operandTypePos[i]);

    Node *n = graph_->createNode(*op, operands, std::move(attrs), resultTypes, resultNames,
                                 std::move(loc));
    n->setRole(role);
    n->setPrecisionOverride(precision);
    for (unsigned i = 0; i < operands.size(); ++i)
      if (!operands[i])
        pendingOperands_.push_back(
            {n, i, operandToks[i], std::move(operandTypes[i]), operandTypePos[i]});
    return true;
  }

  bool reportOperandTypeMismatch(const OpInfo &op, unsigned index, const TensorType &actual,
                                 const TensorType &written, Pos p) {
    return error(p, "operand " + llvm::Twine(index) + " of " + op.name + " is " + actual.str() +
                        ", but the signature says " + written.str());
  }

  bool parseRoleSuffix(NodeRole &role) {
    advance(); // role
    if (!consume(Tok::LParen, "'(' after 'role'"))
      return false;
    if (tok_.kind != Tok::Ident)
      return expected("a role name");
    std::optional<NodeRole> r = parseRole(tok_.text);
    if (!r)
      return error(tok_.pos, "unknown role '" + tok_.text +
                                 "' (expected forward, loss, backward, optimizer or loss_scale)");
    role = *r;
    advance();
    return consume(Tok::RParen, "')' after the role");
  }

  bool parsePrecisionSuffix(PrecisionOverride &precision) {
    advance(); // precision
    if (!consume(Tok::LParen, "'(' after 'precision'"))
      return false;
    if (tok_.kind != Tok::Ident)
      return expected("fp32 or half");
    bool known = false;
    for (PrecisionOverride p :
         {PrecisionOverride::None, PrecisionOverride::Fp32, PrecisionOverride::Half})
      if (precisionOverrideName(p) == tok_.text) {
        precision = p;
        known = true;
      }
    if (!known)
      return error(tok_.pos, "unknown precision '" + tok_.text + "' (expected fp32 or half)");
    advance();
    return consume(Tok::RParen, "')' after the precision");
  }

  /// loc("file":line:col)
  bool parseLoc(Location &loc) {
    advance(); // loc
    if (!consume(Tok::LParen, "'(' after 'loc'"))
      return false;
    if (tok_.kind != Tok::String)
      return expected("a quoted file name in loc(...)");
    std::string file = unescape(tok_.text);
    advance();
    uint32_t line = 0, col = 0;
    if (!consume(Tok::Colon, "':' after the file name in loc(...)") ||
        !parseLocNumber(line, "line") ||
        !consume(Tok::Colon, "':' after the line number in loc(...)") ||
        !parseLocNumber(col, "column") || !consume(Tok::RParen, "')' to close loc(...)"))
      return false;
    // Share one copy of each file name between all the locations that use it.
    auto &shared = fileNames_[file];
    if (!shared)
      shared = std::make_shared<const std::string>(std::move(file));
    if (!fileLocations_)
      loc = Location(shared, line, col);
    return true;
  }

  bool parseLocNumber(uint32_t &out, llvm::StringRef what) {
    if (tok_.kind != Tok::Int)
      return expected("a " + what + " number");
    uint32_t v = 0;
    auto [ptr, ec] = std::from_chars(tok_.text.begin(), tok_.text.end(), v);
    if (ec != std::errc() || ptr != tok_.text.end())
      return error(tok_.pos, what + " number " + tok_.text + " is out of range");
    out = v;
    advance();
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Types
  //===--------------------------------------------------------------------===//

  /// dtype[d0,d1,...]
  bool parseType(TensorType &type) {
    if (tok_.kind != Tok::Ident)
      return expected("a tensor type like f32[2,3]");
    std::optional<DType> dtype = parseDType(tok_.text);
    if (!dtype)
      return error(tok_.pos, "unknown dtype '" + tok_.text +
                                 "' (expected f32, f16, bf16, f64, i64, i32 or bool)");
    advance();
    if (!consume(Tok::LBracket, "'[' after the dtype (a scalar is written f32[])"))
      return false;
    llvm::SmallVector<int64_t, 4> dims;
    if (tok_.kind != Tok::RBracket) {
      while (true) {
        if (tok_.kind != Tok::Int)
          return expected("a dimension");
        int64_t d = 0;
        if (!parseInt(tok_, d))
          return false;
        if (d < 0)
          return error(tok_.pos, "dimension " + tok_.text + " is negative");
        dims.push_back(d);
        advance();
        if (tok_.kind != Tok::Comma)
          break;
        advance();
      }
    }
    if (!consume(Tok::RBracket, "',' or ']' in the shape"))
      return false;
    type = TensorType(*dtype, dims);
    return true;
  }

  /// (t0, t1, ...)
  bool parseTypeList(llvm::SmallVectorImpl<TensorType> &types,
                     llvm::SmallVectorImpl<Pos> *positions) {
    if (!consume(Tok::LParen, "'(' before a list of types"))
      return false;
    if (tok_.kind != Tok::RParen) {
      while (true) {
        if (positions)
          positions->push_back(tok_.pos);
        types.emplace_back();
        if (!parseType(types.back()))
          return false;
        if (tok_.kind != Tok::Comma)
          break;
        advance();
      }
    }
    return consume(Tok::RParen, "',' or ')' in the list of types");
  }

  //===--------------------------------------------------------------------===//
  // Attributes and numbers
  //===--------------------------------------------------------------------===//

  bool parseInt(const Token &t, int64_t &out) {
    auto [ptr, ec] = std::from_chars(t.text.begin(), t.text.end(), out);
    if (ec != std::errc() || ptr != t.text.end())
      return error(t.pos, "integer " + t.text + " does not fit in 64 bits");
    return true;
  }

  bool parseFloat(const Token &t, double &out) {
    auto [ptr, ec] = std::from_chars(t.text.begin(), t.text.end(), out);
    if (ec != std::errc() || ptr != t.text.end())
      return error(t.pos, "number " + t.text + " is out of range for a 64-bit float");
    return true;
  }

  static bool isFloatWord(const Token &t) {
    return t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan");
  }

  /// A number where a float is wanted: 1, 1.5, 1e-05, inf, -inf, nan.
  bool parseNumber(double &out) {
    if (tok_.kind == Tok::Int) {
      int64_t i = 0;
      if (!parseInt(tok_, i))
        return false;
      out = static_cast<double>(i);
    } else if (tok_.kind == Tok::Float || isFloatWord(tok_)) {
      if (!parseFloat(tok_, out))
        return false;
    } else {
      return expected("a number");
    }
    advance();
    return true;
  }

  /// {key = value, ...}; keys are identifiers or strings.
  bool parseDict(AttrMap &dict, llvm::SmallVectorImpl<std::pair<std::string, Pos>> &positions) {
    advance(); // {
    if (tok_.kind != Tok::RBrace) {
      while (true) {
        std::string key;
        Pos keyPos = tok_.pos;
        if (tok_.kind == Tok::Ident)
          key = tok_.text.str();
        else if (tok_.kind == Tok::String)
          key = unescape(tok_.text);
        else
          return expected("an attribute name");
        advance();
        if (!consume(Tok::Equal, "'=' after the attribute name"))
          return false;
        Attribute value;
        if (!parseAttrValue(value))
          return false;
        if (!dict.emplace(key, std::move(value)).second)
          return error(keyPos, "duplicate attribute '" + key + "'");
        positions.push_back({std::move(key), keyPos});
        if (tok_.kind != Tok::Comma)
          break;
        advance();
      }
    }
    return consume(Tok::RBrace, "',' or '}' in the attribute list");
  }

  bool parseAttrValue(Attribute &out) {
    switch (tok_.kind) {
    case Tok::Int: {
      int64_t i = 0;
      if (!parseInt(tok_, i))
        return false;
      out = Attribute(i);
      advance();
      return true;
    }
    case Tok::Float: {
      double d = 0;
      if (!parseFloat(tok_, d))
        return false;
      out = Attribute(d);
      advance();
      return true;
    }
    case Tok::String:
      out = Attribute(unescape(tok_.text));
      advance();
      return true;
    case Tok::Ident: {
      llvm::StringRef word = tok_.text;
      if (word == "true" || word == "false") {
        out = Attribute(word == "true");
      } else if (isFloatWord(tok_)) {
        double d = 0;
        if (!parseFloat(tok_, d))
          return false;
        out = Attribute(d);
      } else if (std::optional<DType> t = parseDType(word)) {
        out = Attribute(*t);
      } else {
        return error(tok_.pos, "expected an attribute value (a number, true, false, a "
                               "string, a list or a dtype), got '" +
                                   word + "'");
      }
      advance();
      return true;
    }
    case Tok::LBracket:
      return parseNumberList(out);
    case Tok::Eof:
    case Tok::Error:
    case Tok::ValueName:
    case Tok::GraphName:
    case Tok::LParen:
    case Tok::RParen:
    case Tok::LBrace:
    case Tok::RBrace:
    case Tok::RBracket:
    case Tok::Comma:
    case Tok::Colon:
    case Tok::Equal:
    case Tok::Arrow:
      break;
    }
    return expected("an attribute value");
  }

  /// [1, 2] is an int list; a list with any float in it is a float list.
  bool parseNumberList(Attribute &out) {
    advance(); // [
    std::vector<int64_t> ints;
    std::vector<double> floats;
    bool anyFloat = false;
    if (tok_.kind != Tok::RBracket) {
      while (true) {
        if (tok_.kind == Tok::Int) {
          int64_t i = 0;
          if (!parseInt(tok_, i))
            return false;
          ints.push_back(i);
          floats.push_back(static_cast<double>(i));
        } else if (tok_.kind == Tok::Float || isFloatWord(tok_)) {
          double d = 0;
          if (!parseFloat(tok_, d))
            return false;
          anyFloat = true;
          floats.push_back(d);
        } else {
          return expected("a number in the list");
        }
        advance();
        if (tok_.kind != Tok::Comma)
          break;
        advance();
      }
    }
    if (!consume(Tok::RBracket, "',' or ']' in the list"))
      return false;
    out = anyFloat ? Attribute(std::move(floats)) : Attribute(std::move(ints));
    return true;
  }

  /// data(...) holds folded masks and indices; 2^24 elements is 16 times
  /// the largest mask of the zoo's models (a 1024-token causal mask).
  static constexpr int64_t kMaxDataElements = int64_t(1) << 24;

  bool parseInitSpec(InitSpec &init) {
    if (tok_.kind != Tok::Ident)
      return expected("an initializer (zeros, ones, constant, uniform, normal, file or data)");
    Token kindTok = tok_;
    llvm::StringRef k = kindTok.text;
    advance();
    if (k == "none" || k == "zeros" || k == "ones") {
      init.kind = k == "none"    ? InitSpec::Kind::None
                  : k == "zeros" ? InitSpec::Kind::Zeros
                                 : InitSpec::Kind::Ones;
      return true;
    }
    if (k == "constant" || k == "uniform" || k == "normal") {
      init.kind = k == "constant"  ? InitSpec::Kind::Constant
                  : k == "uniform" ? InitSpec::Kind::Uniform
                                   : InitSpec::Kind::Normal;
      if (!consume(Tok::LParen, "'(' after '" + k + "'") || !parseNumber(init.a))
        return false;
      if (init.kind != InitSpec::Kind::Constant &&
          (!consume(Tok::Comma, "',' between the two numbers of " + k + "(...)") ||
           !parseNumber(init.b)))
        return false;
      return consume(Tok::RParen, "')' after the arguments of " + k + "(...)");
    }
    if (k == "file") {
      init.kind = InitSpec::Kind::File;
      if (!consume(Tok::LParen, "'(' after 'file'"))
        return false;
      if (tok_.kind != Tok::String)
        return expected("a quoted path in file(...)");
      init.path = unescape(tok_.text);
      advance();
      // file("model.onnx", "conv1.weight"): one tensor of a container file.
      if (tok_.kind == Tok::Comma) {
        advance();
        if (tok_.kind != Tok::String)
          return expected("a quoted tensor name after the path in file(...)");
        init.key = unescape(tok_.text);
        advance();
      }
      return consume(Tok::RParen, "')' after the path");
    }
    if (k == "data") {
      // data(v, v x run, ...): every element, runs of equal ones shortened.
      init.kind = InitSpec::Kind::Data;
      if (!consume(Tok::LParen, "'(' after 'data'"))
        return false;
      auto values = std::make_shared<std::vector<double>>();
      while (tok_.kind != Tok::RParen) {
        double v = 0;
        if (!parseNumber(v))
          return false;
        int64_t run = 1;
        if (tok_.kind == Tok::Ident && tok_.text == "x") {
          advance();
          Token runTok = tok_;
          if (tok_.kind != Tok::Int || !parseInt(tok_, run))
            return expected("a run length after 'x'");
          // Bounded, so that a hostile file cannot ask for gigabytes.
          if (run < 1 || run > kMaxDataElements - int64_t(values->size()))
            return error(runTok.pos, "run length " + std::to_string(run) + " is out of range");
          advance();
        }
        if (int64_t(values->size()) + run > kMaxDataElements)
          return expected("at most " + std::to_string(kMaxDataElements) + " elements in data(...)");
        values->insert(values->end(), size_t(run), v);
        if (tok_.kind != Tok::Comma)
          break;
        advance();
      }
      init.data = std::move(values);
      return consume(Tok::RParen, "')' after the elements of data(...)");
    }
    return error(kindTok.pos, "unknown initializer '" + k +
                                  "' (expected zeros, ones, constant, uniform, normal, file or "
                                  "data)");
  }

  //===--------------------------------------------------------------------===//
  // Second pass: names used before their definition
  //===--------------------------------------------------------------------===//

  Value *resolve(const Token &name) {
    Value *v = graph_->lookup(name.text);
    if (!v)
      error(name.pos, "use of undefined value %" + name.text);
    return v;
  }

  bool resolveForwardReferences() {
    bool ok = true;
    for (PendingOperand &p : pendingOperands_) {
      Value *v = resolve(p.name);
      if (!v) {
        ok = false;
        continue;
      }
      p.node->setOperand(p.index, v);
      if (v->type() != p.writtenType)
        ok =
            reportOperandTypeMismatch(p.node->op(), p.index, v->type(), p.writtenType, p.typePos) &&
            ok;
    }
    llvm::SmallPtrSet<const Value *, 8> updated;
    for (const auto &[target, newValue] : pendingUpdates_) {
      Value *state = resolve(target);
      Value *value = resolve(newValue);
      if (state && !state->isState()) {
        error(target.pos, "update target %" + target.text + " is not a state tensor");
        state = nullptr;
      }
      // Reported here, at the second update, rather than by the verifier
      // at the updating value's node.
      if (state && !updated.insert(state).second) {
        error(target.pos, "state %" + target.text + " is updated more than once");
        state = nullptr;
      }
      if (!state || !value) {
        ok = false;
        continue;
      }
      graph_->addStateUpdate(state, value);
    }
    for (const Token &name : pendingOutputs_) {
      Value *v = resolve(name);
      if (!v) {
        ok = false;
        continue;
      }
      graph_->addOutput(v);
    }
    return ok;
  }

  struct PendingOperand {
    Node *node;
    unsigned index;
    Token name;
    TensorType writtenType;
    Pos typePos;
  };
  struct PendingUpdate {
    Token target;
    Token newValue;
  };

  Lexer lex_;
  Token tok_;
  DiagnosticEngine &diag_;
  const OpRegistry &registry_;
  std::shared_ptr<const std::string> bufferFile_;
  std::unique_ptr<Graph> graph_;
  llvm::StringMap<Pos> definedAt_;
  llvm::StringMap<std::shared_ptr<const std::string>> fileNames_;
  std::vector<PendingOperand> pendingOperands_;
  std::vector<PendingUpdate> pendingUpdates_;
  std::vector<Token> pendingOutputs_;
  bool sawMeta_ = false;
  /// Every statement located in this text, its loc(...) read but dropped.
  bool fileLocations_ = false;
};

} // namespace

std::optional<InitSpec> parseInitSpec(llvm::StringRef text, std::string &error) {
  DiagnosticEngine diag;
  std::optional<InitSpec> init =
      IRParser(text, "<init>", diag, OpRegistry::builtin()).parseInitOnly();
  if (!init)
    error = diag.diagnostics().empty() ? "invalid initializer" : diag.diagnostics()[0].message;
  return init;
}

std::unique_ptr<Graph> parseGraph(llvm::StringRef text, llvm::StringRef bufferName,
                                  DiagnosticEngine &diag, const OpRegistry &registry,
                                  bool fileLocations) {
  return IRParser(text, bufferName, diag, registry, fileLocations).parse();
}

} // namespace ampc
