//===- FuzzUtil.h - What the fuzz targets share ----------------*- C++ -*-===//
//
// The readers under test take paths and graphs; these helpers give a target a
// scratch directory to write its input into, a fixed model to read data
// against, and a way to drive a data source through every sample it holds.
// A failure here is the harness's, not the code's under test, so it aborts.
//
//===----------------------------------------------------------------------===//
#ifndef AMPC_TESTS_FUZZ_FUZZUTIL_H
#define AMPC_TESTS_FUZZ_FUZZUTIL_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace ampc::fuzz {

/// A directory of this process's own, removed with its contents at exit.
const std::string &scratchDir();

/// Writes `data` to scratchDir()/name, replacing what was there; returns the path.
std::string writeScratchFile(llvm::StringRef name, llvm::StringRef data);

/// Loads one of the targets' fixed model files (relative data paths resolve
/// against scratchDir()).
std::unique_ptr<Graph> loadFixedModel(llvm::StringRef yaml);

/// Splits an input that carries two files: a little-endian u32 length, then
/// that many bytes of the first file (fewer when the input ends), then the
/// second file. An input shorter than the prefix is all first file.
std::pair<llvm::StringRef, llvm::StringRef> splitTwoFiles(const uint8_t *data, size_t size);

/// Prints `msg` to stderr when AMPC_FUZZ_VERBOSE is set: what a reader said
/// about an input, to check that seeds are accepted (or refused as meant).
void verbose(const llvm::Twine &msg);

/// Creates the data source `g`'s meta asks for and, when the files are
/// accepted, loads every sample (up to a bound) and a few batches, so the
/// conversion and range checks run on whatever the files held.
void exerciseDataSource(const Graph &g);

} // namespace ampc::fuzz

#endif
