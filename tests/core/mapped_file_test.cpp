// MappedFile: a file's bytes as mapped, errors that name the file, an anonymous mapping that
// is written, sealed read-only and moved without double unmapping.
#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace fs = std::filesystem;

namespace {

std::string tmp_path(const std::string& name) {
  const auto d = fs::path(FT_BINARY_DIR) / "test-tmp" / "core" / std::to_string(::getpid());
  fs::create_directories(d);
  return (d / name).string();
}

std::string error_of(const std::string& path) {
  try {
    ft::MappedFile::open(path);
  } catch (const ft::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(MappedFile, MapsTheFileBytes) {
  const std::string p = tmp_path("bytes.bin");
  const std::string text = "mapped file contents\n";
  std::ofstream(p, std::ios::binary) << text;
  const ft::MappedFile m = ft::MappedFile::open(p);
  ASSERT_EQ(m.size(), text.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data()), m.size()), text);
  EXPECT_EQ(m.path(), p);
  EXPECT_THROW(const_cast<ft::MappedFile&>(m).mutable_data(), ft::Error);
}

TEST(MappedFile, EmptyFileHasNoBytes) {
  const std::string p = tmp_path("empty.bin");
  std::ofstream(p, std::ios::binary).close();
  const ft::MappedFile m = ft::MappedFile::open(p);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.data(), nullptr);
}

TEST(MappedFile, ErrorsNameTheFile) {
  const std::string missing = tmp_path("no-such-file.gguf");
  const std::string e1 = error_of(missing);
  EXPECT_NE(e1.find(missing + ": cannot open: "), std::string::npos) << e1;
  const std::string dir = tmp_path("a-directory");
  fs::create_directories(dir);
  EXPECT_EQ(error_of(dir), dir + ": not a regular file");
}

TEST(MappedFile, AnonymousIsZeroWritableThenSealedAndMovable) {
  ft::MappedFile m = ft::MappedFile::anonymous(3 * 4096 + 5, "in-memory model");
  ASSERT_EQ(m.size(), 3u * 4096 + 5);
  for (uint64_t i = 0; i < m.size(); i += 4096) EXPECT_EQ(m.data()[i], 0);
  m.mutable_data()[4096] = 42;
  m.seal();
  EXPECT_THROW(m.mutable_data(), ft::Error);
  const uint8_t* p = m.data();
  ft::MappedFile moved = std::move(m);
  EXPECT_EQ(m.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(moved.data()[4096], 42);
  EXPECT_EQ(moved.path(), "in-memory model");
  ft::MappedFile other = ft::MappedFile::anonymous(10, "other");
  other = std::move(moved);  // unmaps "other", takes the sealed mapping
  EXPECT_EQ(other.data()[4096], 42);
}
