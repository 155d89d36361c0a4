#include "hf/safetensors_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ft::hf {

std::vector<uint8_t> safetensors_bytes(const std::vector<StOut>& tensors) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const StOut& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    if (numel * static_cast<uint64_t>(dtype_size(t.dtype)) != t.data.size())
      fail("safetensors writer: tensor {} has {} bytes, expected {}", t.name, t.data.size(),
           numel * static_cast<uint64_t>(dtype_size(t.dtype)));
    h[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                 {"shape", t.shape},
                 {"data_offsets", {off, off + t.data.size()}}};
    off += t.data.size();
  }
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  // One allocation and memcpy (GCC 12 flags vector::insert into a just-sized vector).
  size_t total = 8 + hs.size();
  for (const StOut& t : tensors) total += t.data.size();
  std::vector<uint8_t> out(total);
  const uint64_t n = hs.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, hs.data(), hs.size());
  size_t pos = 8 + hs.size();
  for (const StOut& t : tensors) {
    if (!t.data.empty()) std::memcpy(out.data() + pos, t.data.data(), t.data.size());
    pos += t.data.size();
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<StOut>& tensors) {
  const std::vector<uint8_t> b = safetensors_bytes(tensors);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f || std::fwrite(b.data(), 1, b.size(), f.get()) != b.size()) fail("{}: cannot write", path);
}

}  // namespace ft::hf
