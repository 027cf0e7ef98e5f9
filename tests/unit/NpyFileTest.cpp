//===- NpyFileTest.cpp - .npy reading and writing ---------------------------===//
#include "ir/support/NpyFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

using namespace ampc;

namespace {

class NpyFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ampc-npy-test", dir_));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir_); }

  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> p(dir_);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

  /// Writes a file by hand: magic, version, header (padded to 64 bytes), data.
  std::string writeRaw(llvm::StringRef name, const std::string &dict, const std::string &data,
                       unsigned major = 1, const char *magic = "\x93NUMPY") {
    std::string header = dict;
    size_t prefix = 6 + 2 + (major == 1 ? 2 : 4);
    while ((prefix + header.size() + 1) % 64)
      header += ' ';
    header += '\n';
    std::string bytes(magic, 6);
    bytes += char(major);
    bytes += char(0);
    for (unsigned i = 0; i < (major == 1 ? 2u : 4u); ++i)
      bytes += char((header.size() >> (8 * i)) & 0xff);
    bytes += header;
    bytes += data;
    std::string p = path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  template <typename T>
  void roundTrip(DType dtype, std::vector<T> values, std::vector<int64_t> shape) {
    std::string p = path("a.npy"), err;
    ASSERT_TRUE(writeNpy(p, dtype, shape, values.data(), err)) << err;
    NpyArray a;
    ASSERT_TRUE(readNpy(p, a, err)) << err;
    EXPECT_EQ(a.dtype, dtype);
    EXPECT_FALSE(a.isUint8);
    EXPECT_EQ(std::vector<int64_t>(a.shape.begin(), a.shape.end()), shape);
    ASSERT_EQ(a.data.size(), values.size() * sizeof(T));
    std::vector<T> back(values.size());
    std::memcpy(back.data(), a.data.data(), a.data.size());
    EXPECT_EQ(back, values);
    // The data starts on a 64-byte boundary, as NumPy writes it.
    uint64_t size = 0;
    ASSERT_FALSE(llvm::sys::fs::file_size(p, size));
    EXPECT_EQ((size - a.data.size()) % 64, 0u);
  }

  std::string readError(const std::string &p) {
    NpyArray a;
    std::string err;
    EXPECT_FALSE(readNpy(p, a, err));
    // Every message names the file.
    EXPECT_NE(err.find(p), std::string::npos) << err;
    return err;
  }

  llvm::SmallString<128> dir_;
};

TEST_F(NpyFileTest, RoundTripsEveryDType) {
  roundTrip<float>(DType::F32, {1.5f, -2.0f, 3.25f, 0.0f, 1e-7f, 42.0f}, {2, 3});
  roundTrip<double>(DType::F64, {1.0 / 3.0, -2.5}, {2});
  roundTrip<uint16_t>(DType::F16, {0x3c00, 0xc000, 0x7bff}, {3, 1});
  roundTrip<int64_t>(DType::I64, {-1, int64_t(1) << 40, 7}, {3});
  roundTrip<int32_t>(DType::I32, {-5, 6, 7, 8}, {2, 2});
  roundTrip<uint8_t>(DType::Bool, {1, 0, 1}, {3});
  roundTrip<float>(DType::F32, {9.0f}, {}); // a scalar
}

TEST_F(NpyFileTest, RoundTripsUint8) {
  std::string p = path("u8.npy"), err;
  std::vector<uint8_t> v = {0, 255, 128, 7};
  ASSERT_TRUE(writeNpyUint8(p, {2, 2}, v.data(), err)) << err;
  NpyArray a;
  ASSERT_TRUE(readNpy(p, a, err)) << err;
  EXPECT_TRUE(a.isUint8);
  EXPECT_EQ(a.elementSize(), 1u);
  ASSERT_EQ(a.data.size(), 4u);
  EXPECT_EQ(uint8_t(a.data[1]), 255);
}

TEST_F(NpyFileTest, HeaderOnlyLeavesDataEmpty) {
  std::string p = path("h.npy"), err;
  std::vector<float> v(12, 1.0f);
  ASSERT_TRUE(writeNpy(p, DType::F32, {3, 4}, v.data(), err)) << err;
  NpyArray a;
  ASSERT_TRUE(readNpyHeader(p, a, err)) << err;
  EXPECT_TRUE(a.data.empty());
  EXPECT_EQ(a.numElements(), 12);
  EXPECT_EQ(a.dtype, DType::F32);
}

TEST_F(NpyFileTest, ReadsVersion2AndNumpySpellings) {
  float v[2] = {1.0f, 2.0f};
  std::string p = writeRaw("v2.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                           std::string(reinterpret_cast<char *>(v), 8), 2);
  NpyArray a;
  std::string err;
  ASSERT_TRUE(readNpy(p, a, err)) << err;
  EXPECT_EQ(a.shape.size(), 1u);
  EXPECT_EQ(a.shape[0], 2);
  // Key order and '|b1' / '<u1' style spellings as NumPy may write them.
  p = writeRaw("b.npy", "{'shape': (1, 2), 'fortran_order': False, 'descr': '|b1'}",
               std::string("\x01\x00", 2));
  ASSERT_TRUE(readNpy(p, a, err)) << err;
  EXPECT_EQ(a.dtype, DType::Bool);
  EXPECT_EQ(a.shape[1], 2);
}

TEST_F(NpyFileTest, RejectsBf16OnWrite) {
  std::string err;
  uint16_t v = 0;
  EXPECT_FALSE(writeNpy(path("bf.npy"), DType::BF16, {1}, &v, err));
  EXPECT_NE(err.find("bf16"), std::string::npos) << err;
}

TEST_F(NpyFileTest, ReportsMissingFile) {
  std::string err = readError(path("nope.npy"));
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

TEST_F(NpyFileTest, ReportsBadMagic) {
  std::string p = writeRaw("m.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                           std::string(4, '\0'), 1, "XNUMPY");
  EXPECT_NE(readError(p).find("bad magic"), std::string::npos);
}

TEST_F(NpyFileTest, ReportsTruncatedData) {
  std::string p = writeRaw("t.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                           std::string(12, '\0'));
  std::string err = readError(p);
  EXPECT_NE(err.find("truncated data: the header announces 16 bytes, the file holds 12"),
            std::string::npos)
      << err;
  // The header-only read catches it too, without reading the data.
  NpyArray a;
  EXPECT_FALSE(readNpyHeader(p, a, err));
}

TEST_F(NpyFileTest, ReportsTrailingBytes) {
  std::string p = writeRaw("x.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }",
                           std::string(8, '\0'));
  EXPECT_NE(readError(p).find("4 bytes after the data"), std::string::npos);
}

TEST_F(NpyFileTest, ReportsTruncatedHeader) {
  std::string p = path("th.npy");
  std::ofstream(p, std::ios::binary) << std::string("\x93NUMPY\x01\x00\x40\x00{'descr'", 17);
  EXPECT_NE(readError(p).find("truncated header"), std::string::npos);
}

TEST_F(NpyFileTest, ReportsFortranOrder) {
  std::string p = writeRaw("f.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                           std::string(16, '\0'));
  EXPECT_NE(readError(p).find("fortran_order"), std::string::npos);
}

TEST_F(NpyFileTest, ReportsBigEndian) {
  std::string p = writeRaw("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                           std::string(4, '\0'));
  EXPECT_NE(readError(p).find("big-endian dtype '>f4'"), std::string::npos);
}

TEST_F(NpyFileTest, ReportsUnsupportedDType) {
  std::string p = writeRaw("c.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                           std::string(8, '\0'));
  EXPECT_NE(readError(p).find("unsupported dtype '<c8'"), std::string::npos);
}

TEST_F(NpyFileTest, ReportsUnsupportedVersion) {
  std::string p = writeRaw("v9.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                           std::string(4, '\0'), 9);
  EXPECT_NE(readError(p).find("unsupported .npy version 9.0"), std::string::npos);
}

TEST_F(NpyFileTest, ReportsMalformedHeader) {
  std::string p = writeRaw("bad.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }",
                           std::string(8, '\0'));
  EXPECT_NE(readError(p).find("malformed 'shape'"), std::string::npos);
  p = writeRaw("nokey.npy", "{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0'));
  EXPECT_NE(readError(p).find("header lacks"), std::string::npos);
}

// A zero dim makes an empty array whatever the others are, but the other
// dims' product must still fit int64: the readers multiply sample dims
// (tests/fuzz/corpus/npy/regress-*).
TEST_F(NpyFileTest, ReportsElementCountOverflowBesideAZeroDim) {
  std::string p = writeRaw(
      "huge.npy",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }", "");
  EXPECT_NE(readError(p).find("shape's element count overflows"), std::string::npos);
  p = writeRaw("ok.npy",
               "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776, 4), }", "");
  NpyArray a;
  std::string err;
  EXPECT_TRUE(readNpy(p, a, err)) << err;
  EXPECT_EQ(a.numElements(), 0);
}

} // namespace
