#include "hf/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/fp16.h"

namespace ft::hf {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct DtypeInfo {
  const char* name;
  Dtype d;
  int size;
};
constexpr DtypeInfo kDtypes[] = {
    {"BF16", Dtype::kBF16, 2}, {"F16", Dtype::kF16, 2},          {"F32", Dtype::kF32, 4},
    {"F64", Dtype::kF64, 8},   {"U8", Dtype::kU8, 1},            {"I8", Dtype::kI8, 1},
    {"I16", Dtype::kI16, 2},   {"I32", Dtype::kI32, 4},          {"I64", Dtype::kI64, 8},
    {"BOOL", Dtype::kBool, 1}, {"F8_E4M3", Dtype::kF8E4M3, 1},
};

// A safetensors header larger than this is not a checkpoint (the format's own limit is 100 MB).
constexpr uint64_t kMaxHeader = 100ull << 20;

}  // namespace

std::string_view dtype_name(Dtype d) {
  for (const auto& x : kDtypes)
    if (x.d == d) return x.name;
  return "?";
}

int dtype_size(Dtype d) {
  for (const auto& x : kDtypes)
    if (x.d == d) return x.size;
  return 0;
}

bool is_float(Dtype d) {
  return d == Dtype::kBF16 || d == Dtype::kF16 || d == Dtype::kF32 || d == Dtype::kF64;
}

int64_t StTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string StTensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->map_ = MappedFile::open(path);
  f->path_ = path;
  f->base_ = f->map_.data();
  f->size_ = f->map_.size();
  f->parse();
  return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::from_memory(const uint8_t* data, size_t size,
                                                              std::string name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(name);
  f->base_ = data;
  f->size_ = size;
  f->parse();
  return f;
}

SafetensorsFile::~SafetensorsFile() = default;

const StTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse() {
  const std::string& p = path_;
  if (size_ < 8) fail("{}: truncated safetensors file ({} bytes, the header length alone takes 8)", p, size_);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base_[i];
  if (n > size_ - 8)
    fail("{}: truncated safetensors header: it says {} bytes, the file has {} after the length", p, n,
         size_ - 8);
  if (n > kMaxHeader) fail("{}: safetensors header of {} bytes is larger than the {} byte limit", p, n, kMaxHeader);
  const char* hb = reinterpret_cast<const char*>(base_ + 8);
  json h = json::parse(hb, hb + n, nullptr, false);
  if (h.is_discarded()) fail("{}: the safetensors header is not valid JSON", p);
  if (!h.is_object()) fail("{}: the safetensors header is not a JSON object", p);
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = size_ - data_start;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const json& v = it.value();
    if (!v.is_object()) fail("{}: tensor {}: header entry is not an object", p, name);
    StTensor t;
    t.name = name;
    t.file = &path_;
    const auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) fail("{}: tensor {}: missing \"dtype\"", p, name);
    const std::string ds = dt->get<std::string>();
    const DtypeInfo* info = nullptr;
    for (const auto& x : kDtypes)
      if (ds == x.name) info = &x;
    if (!info)
      fail("{}: tensor {}: dtype {} is not supported (BF16, F16, F32, F64, U8, I8, I16, I32, I64, BOOL, "
           "F8_E4M3)",
           p, name, ds);
    t.dtype = info->d;
    const auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) fail("{}: tensor {}: missing \"shape\" array", p, name);
    uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) fail("{}: tensor {}: shape {} has a non-integer or negative dimension", p, name, sh->dump());
      const uint64_t x = d.get<uint64_t>();
      if (x > (1ull << 40) || (x && numel > (1ull << 50) / x))
        fail("{}: tensor {}: shape {} is too large", p, name, sh->dump());
      numel *= x;
      t.shape.push_back(static_cast<int64_t>(x));
    }
    const auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail("{}: tensor {}: \"data_offsets\" must be [begin, end]", p, name);
    const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    if (b > e) fail("{}: tensor {}: data_offsets [{}, {}] end before they begin", p, name, b, e);
    if (e > data_size)
      fail("{}: tensor {}: data_offsets [{}, {}] run past the end of the data ({} bytes)", p, name, b, e,
           data_size);
    const uint64_t expect = numel * static_cast<uint64_t>(info->size);
    if (e - b != expect)
      fail("{}: tensor {}: {} bytes of data, but dtype {} x shape {} needs {}", p, name, e - b, ds, sh->dump(),
           expect);
    t.data = base_ + data_start + b;
    t.nbytes = e - b;
    tensors_.push_back(std::move(t));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& dir) {
  auto c = std::make_unique<Checkpoint>();
  c->dir_ = dir;
  if (!fs::is_directory(dir)) fail("{}: not a directory", dir);
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shards;
  if (fs::exists(index)) {
    std::ifstream in(index);
    std::stringstream ss;
    ss << in.rdbuf();
    const json j = json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail("{}: not valid JSON", index.string());
    const auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object()) fail("{}: missing \"weight_map\" object", index.string());
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string()) fail("{}: weight_map[{}] is not a file name", index.string(), it.key());
      const std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos)
        fail("{}: weight_map[{}] = {} points outside the directory", index.string(), it.key(), shard);
      weight_map[it.key()] = shard;
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    }
    for (const auto& s : shards)
      if (!fs::exists(fs::path(dir) / s))
        fail("{}: shard {} is listed in model.safetensors.index.json but missing", dir, s);
  } else {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") shards.push_back(e.path().filename().string());
    std::sort(shards.begin(), shards.end());
    if (shards.empty()) fail("{}: no model.safetensors (or .safetensors shards with an index) found", dir);
  }
  for (const auto& s : shards) {
    c->files_.push_back(SafetensorsFile::open((fs::path(dir) / s).string()));
    for (const StTensor& t : c->files_.back()->tensors()) {
      if (!c->index_.emplace(t.name, &t).second)
        fail("{}: tensor {} appears in two files ({} and {})", dir, t.name, *c->index_[t.name]->file, *t.file);
    }
  }
  for (const auto& [name, shard] : weight_map) {
    const StTensor* t = c->find(name);
    if (!t) fail("{}: tensor {} is listed in model.safetensors.index.json (shard {}) but not in it", dir, name, shard);
    if (fs::path(*t->file).filename().string() != shard)
      fail("{}: tensor {} is listed in shard {} but found in {}", dir, name, shard, *t->file);
  }
  return c;
}

const StTensor* Checkpoint::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const StTensor& Checkpoint::require(std::string_view name) const {
  const StTensor* t = find(name);
  if (!t) fail("{}: missing tensor {}", dir_, name);
  return *t;
}

std::vector<const StTensor*> Checkpoint::tensors() const {
  std::vector<const StTensor*> v;
  for (const auto& [n, t] : index_) v.push_back(t);
  return v;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, t] : index_) n += t->nbytes;
  return n;
}

float element_f32(const StTensor& t, int64_t i) {
  float v = 0;
  to_f32(t, i, 1, &v);
  return v;
}

void to_f32(const StTensor& t, int64_t first, int64_t n, float* dst) {
  if (first < 0 || n < 0 || first + n > t.numel())
    fail("{}: tensor {}: read of elements [{}, {}) outside its {}", *t.file, t.name, first, first + n, t.numel());
  const uint8_t* p = t.data + first * dtype_size(t.dtype);
  switch (t.dtype) {
    case Dtype::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case Dtype::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    case Dtype::kF32:
      std::memcpy(dst, p, static_cast<size_t>(n) * 4);
      return;
    case Dtype::kF64:
      for (int64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        dst[i] = static_cast<float>(d);
      }
      return;
    default:
      fail("{}: tensor {} has dtype {}, expected a float type (BF16, F16, F32)", *t.file, t.name,
           dtype_name(t.dtype));
  }
}

}  // namespace ft::hf
