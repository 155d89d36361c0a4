// MappedFile: a file's bytes as mapped, errors that name the file, an anonymous mapping that
// is written, sealed read-only and moved without double unmapping.
#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/proc_mem.h"

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

// drop_pages gives back the pages of a range already copied elsewhere: the process's resident
// bytes fall by about the range, the bytes still read the same (faulted in again), and it
// refuses what it must not touch: anonymous memory (dropping would zero it) and ranges
// outside the mapping.
TEST(MappedFile, DropPagesGivesBackResidentPagesAndKeepsTheBytes) {
  const std::string p = tmp_path("drop.bin");
  constexpr size_t kBytes = size_t{16} << 20;
  {
    std::string data(kBytes, '\0');
    for (size_t i = 0; i < kBytes; ++i) data[i] = static_cast<char>((i * 131) >> 7);
    std::ofstream(p, std::ios::binary) << data;
  }
  const ft::MappedFile m = ft::MappedFile::open(p);
  ASSERT_EQ(m.size(), kBytes);
  uint64_t sum = 0;
  for (size_t i = 0; i < kBytes; i += 64) sum += m.data()[i];
  const ft::ProcMem before = ft::read_proc_mem();
  ASSERT_TRUE(before.ok);
  EXPECT_EQ(m.drop_pages(m.data() + kBytes, 4096), 0u);  // outside
  EXPECT_EQ(m.drop_pages(m.data() - 4096, 8192), 0u);     // starts before the mapping
  const uint64_t dropped = m.drop_pages(m.data(), kBytes);
  EXPECT_EQ(dropped, kBytes);  // the mapping starts on a page and the size is whole pages
  const ft::ProcMem after = ft::read_proc_mem();
  EXPECT_GE(before.rss - after.rss, static_cast<int64_t>(kBytes / 2))
      << "before: " << ft::describe(before) << "; after: " << ft::describe(after);
  uint64_t again = 0;
  for (size_t i = 0; i < kBytes; i += 64) again += m.data()[i];
  EXPECT_EQ(again, sum);

  ft::MappedFile a = ft::MappedFile::anonymous(1 << 16, "anon");
  a.mutable_data()[100] = 7;
  a.seal();
  EXPECT_EQ(a.drop_pages(a.data(), 1 << 16), 0u);
  EXPECT_EQ(a.data()[100], 7);
}

TEST(ProcMem, ParsesTheStatusFields) {
  const ft::ProcMem m = ft::parse_proc_status(
      "Name:\tft\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t   512 kB\nRssFile:\t   256 kB\n"
      "RssShmem:\t   256 kB\nThreads:\t4\n");
  ASSERT_TRUE(m.ok);
  EXPECT_EQ(m.rss, 1024 * 1024);
  EXPECT_EQ(m.peak, 2048 * 1024);
  EXPECT_EQ(m.anon, 512 * 1024);
  EXPECT_EQ(m.file, 256 * 1024);
  EXPECT_EQ(m.shmem, 256 * 1024);
  EXPECT_EQ(ft::describe(m), "resident 1 MiB (anon 0, file 0, shmem 0; peak 2)");
  EXPECT_FALSE(ft::parse_proc_status("Name:\tft\n").ok);
  EXPECT_EQ(ft::describe(ft::parse_proc_status("")), "");
}
