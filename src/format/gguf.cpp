// GGUF parsing and mapping. The checks follow llama.cpp's gguf_init_from_file_impl
// (ggml/src/gguf.cpp) plus its model loader's "tensor data within the file" check;
// layout in shared/spec/gguf-format.md. Metadata getters live in gguf_metadata.cpp.
#include "format/gguf.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "format/gguf_cursor.h"

namespace ft::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxVersion = 3;
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 30;  // llama.cpp GGUF_MAX_ARRAY_ELEMENTS
constexpr int kMaxArrayDepth = 8;     // nested arrays: each level costs a stack frame
constexpr uint64_t kMaxNameLength = 63;  // GGML_MAX_NAME - 1 (the NUL)
constexpr int32_t kNumValueTypes = 13;

// Smallest encoding of one element of type t: bounds the element count of an array
// against the bytes left before anything is allocated.
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
    case ValueType::STRING:
      return 8;
    case ValueType::ARRAY:
      return 12;
  }
  return 1;
}

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

class Parser {
 public:
  Parser(const uint8_t* data, uint64_t size, const std::string& path)
      : c_(data, size, path), path_(path) {}

  ValueType read_value_type(std::string_view where) {
    const int32_t t = c_.read<int32_t>();
    if (t < 0 || t >= kNumValueTypes)
      fail("{}: {} has unknown value type id {} at offset {}, expected 0..12", path_, where, t,
           c_.pos() - 4);
    return static_cast<ValueType>(t);
  }

  void read_value(ValueType type, Value& v, int depth) {
    v.type = type;
    switch (type) {
      case ValueType::UINT8: v.u = c_.read<uint8_t>(); break;
      case ValueType::INT8: v.i = c_.read<int8_t>(); break;
      case ValueType::UINT16: v.u = c_.read<uint16_t>(); break;
      case ValueType::INT16: v.i = c_.read<int16_t>(); break;
      case ValueType::UINT32: v.u = c_.read<uint32_t>(); break;
      case ValueType::INT32: v.i = c_.read<int32_t>(); break;
      case ValueType::UINT64: v.u = c_.read<uint64_t>(); break;
      case ValueType::INT64: v.i = c_.read<int64_t>(); break;
      case ValueType::FLOAT32: v.f = c_.read<float>(); break;
      case ValueType::FLOAT64: v.f = c_.read<double>(); break;
      case ValueType::BOOL: v.b = c_.read<int8_t>() != 0; break;
      case ValueType::STRING: v.str = c_.string(); break;
      case ValueType::ARRAY: read_array(v, depth); break;
    }
  }

  void read_array(Value& v, int depth) {
    v.elem_type = read_value_type(c_.what + " array element type");
    if (v.elem_type == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth)
      fail("{}: {} has arrays nested more than {} deep", path_, c_.what, kMaxArrayDepth);
    const uint64_t n = c_.read<uint64_t>();
    if (n > kMaxArrayElements)
      fail("{}: {} is an array of {} elements, expected at most {} (2^30)", path_, c_.what, n,
           kMaxArrayElements);
    const uint64_t min_bytes = n * min_encoded_size(v.elem_type);  // <= 2^30 * 12: no overflow
    if (min_bytes > c_.remaining())
      fail("{}: truncated file: {} is an array of {} {} elements needing at least {} bytes at offset "
           "{}, file has {}",
           path_, c_.what, n, value_type_name(v.elem_type), min_bytes, c_.pos(), c_.size());
    v.arr.resize(static_cast<size_t>(n));
    for (auto& e : v.arr) read_value(v.elem_type, e, depth + 1);
  }

  void parse_header(uint32_t& version, int64_t& n_tensors, int64_t& n_kv) {
    c_.what = "header";
    const uint32_t magic = c_.read<uint32_t>();
    if (magic != kMagic) {
      std::string m;
      for (int k = 0; k < 4; ++k) {
        const unsigned char ch = static_cast<unsigned char>(magic >> (8 * k));
        m += (ch >= 0x20 && ch < 0x7f) ? fmt::format("{}", static_cast<char>(ch))
                                       : fmt::format("\\x{:02x}", ch);
      }
      fail("{}: not a GGUF file: magic is '{}', expected 'GGUF'", path_, m);
    }
    version = c_.read<uint32_t>();
    if (version == 0) fail("{}: bad GGUF version 0, expected 2 or 3", path_);
    // An opposite-endian v3 file reads as 0x03000000: low 16 bits zero (llama.cpp's test).
    if ((version & 0xFFFF) == 0)
      fail("{}: big-endian GGUF files are not supported (version field reads 0x{:08x})", path_,
           version);
    if (version == 1) fail("{}: GGUFv1 is no longer supported, expected version 2 or 3", path_);
    if (version > kMaxVersion)
      fail("{}: GGUF version {} is not supported, expected 2 or 3", path_, version);
    n_tensors = c_.read<int64_t>();
    n_kv = c_.read<int64_t>();
    if (n_tensors < 0) fail("{}: tensor count is {}, expected >= 0", path_, n_tensors);
    if (n_kv < 0) fail("{}: metadata key count is {}, expected >= 0", path_, n_kv);
    // Cheap plausibility bounds before reserving anything: a KV record is at least 13 bytes
    // (key length 8, type 4, value 1), a tensor info at least 24 (name length 8, n_dims 4,
    // type 4, offset 8).
    const uint64_t left = c_.remaining();
    if (static_cast<uint64_t>(n_kv) > left / 13)
      fail("{}: truncated file: header says {} metadata keys, which need at least {} bytes at "
           "offset {}, file has {}",
           path_, n_kv, saturating_mul(static_cast<uint64_t>(n_kv), 13),
           c_.pos(), c_.size());
    if (static_cast<uint64_t>(n_tensors) > left / 24)
      fail("{}: truncated file: header says {} tensors, which need at least {} bytes at offset "
           "{}, file has {}",
           path_, n_tensors,
           saturating_mul(static_cast<uint64_t>(n_tensors), 24),
           c_.pos(), c_.size());
  }

  void parse_kv(int64_t n_kv, std::vector<std::pair<std::string, Value>>& kv) {
    kv.reserve(static_cast<size_t>(n_kv));
    for (int64_t i = 0; i < n_kv; ++i) {
      c_.what = fmt::format("metadata key #{}", i);
      const std::string_view key = c_.string();
      if (key.empty()) fail("{}: metadata key #{} is empty, expected a name", path_, i);
      c_.what = fmt::format("metadata key '{}'", display_name(key));
      kv.emplace_back(std::string(key), Value{});
      const ValueType t = read_value_type(c_.what);
      read_value(t, kv.back().second, 0);
    }
  }

  TensorInfo parse_tensor_info(int64_t i) {
    TensorInfo t;
    c_.what = fmt::format("tensor info #{}", i);
    const uint64_t name_len = c_.read<uint64_t>();
    if (name_len > kMaxNameLength)
      fail("{}: tensor #{} name is {} bytes long, expected at most {}", path_, i, name_len,
           kMaxNameLength);
    t.name = c_.bytes(name_len);
    const std::string name = display_name(t.name);
    // ggml keeps names as C strings: llama.cpp would silently cut "a\0b" to "a".
    if (t.name.find('\0') != std::string::npos)
      fail("{}: tensor #{} name '{}' contains a NUL byte", path_, i, name);
    c_.what = fmt::format("tensor '{}'", name);

    const uint32_t n_dims = c_.read<uint32_t>();
    if (n_dims > 4) fail("{}: tensor '{}' has {} dimensions, expected at most 4", path_, name, n_dims);
    t.n_dims = static_cast<int>(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.ne[d] = c_.read<int64_t>();
      if (t.ne[d] < 0)
        fail("{}: tensor '{}' dimension {} is {}, expected >= 0", path_, name, d, t.ne[d]);
    }

    const int32_t type_id = c_.read<int32_t>();
    const auto tr = ggml_type_traits(type_id);
    if (!tr) {
      if (type_id >= 0 && type_id < kGgmlTypeCount)
        fail("{}: tensor '{}' has ggml type id {}, which was removed from ggml", path_, name,
             type_id);
      fail("{}: tensor '{}' has unknown ggml type id {}, expected 0..{}", path_, name, type_id,
           kGgmlTypeCount - 1);
    }
    t.type = static_cast<GgmlType>(type_id);
    if (t.ne[0] % tr->block_size != 0)
      fail("{}: tensor '{}' of type {} has {} elements per row, expected a multiple of the block "
           "size {}",
           path_, name, tr->name, t.ne[0], tr->block_size);

    int64_t n_el = 1;
    uint64_t nbytes = static_cast<uint64_t>(tr->type_size);
    bool overflow = false;
    for (int d = 0; d < 4; ++d) overflow |= __builtin_mul_overflow(n_el, t.ne[d], &n_el);
    const int64_t dims[4] = {t.ne[0] / tr->block_size, t.ne[1], t.ne[2], t.ne[3]};
    for (int64_t d : dims) overflow |= __builtin_mul_overflow(nbytes, static_cast<uint64_t>(d), &nbytes);
    // Byte sizes are handled as int64 elsewhere (row_bytes), and PAD must not wrap. Unlike
    // llama.cpp we also refuse overflowing shapes that contain a zero dim ([2^40, 2^40, 0]):
    // TensorInfo::n_elements() would overflow on them.
    if (overflow || nbytes > static_cast<uint64_t>(INT64_MAX))
      fail("{}: tensor '{}' with shape {} and type {} is too large (element count or byte size "
           "overflows 64 bits)",
           path_, name, t.shape_string(), tr->name);
    t.nbytes = nbytes;
    t.offset = c_.read<uint64_t>();
    return t;
  }

  uint64_t pos() const { return c_.pos(); }
  uint64_t size() const { return c_.size(); }

 private:
  Cursor c_;
  const std::string& path_;
};

uint64_t pad(uint64_t x, uint64_t align) { return (x + align - 1) & ~(align - 1); }

template <class Vec>
std::vector<std::pair<std::string_view, size_t>> sorted_index(const Vec& v, auto name_of) {
  std::vector<std::pair<std::string_view, size_t>> idx;
  idx.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) idx.emplace_back(name_of(v[i]), i);
  std::stable_sort(idx.begin(), idx.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return idx;
}

// First adjacent pair of equal names in a sorted index, as (earlier, later) positions.
std::optional<std::pair<size_t, size_t>> find_duplicate(
    const std::vector<std::pair<std::string_view, size_t>>& idx) {
  for (size_t k = 1; k < idx.size(); ++k)
    if (idx[k].first == idx[k - 1].first) return std::make_pair(idx[k - 1].second, idx[k].second);
  return std::nullopt;
}

}  // namespace

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f(new File());
  f->map_ = MappedFile::open(path);
  f->path_ = path;
  f->base_ = f->map_.data();
  f->size_ = f->map_.size();
  f->parse();
  return f;
}

std::unique_ptr<File> File::from_memory(const uint8_t* data, size_t size, std::string name) {
  std::unique_ptr<File> f(new File());
  f->path_ = std::move(name);
  f->base_ = data;
  f->size_ = size;
  f->parse();
  return f;
}

std::unique_ptr<File> File::from_image(MappedFile image, const std::vector<const uint8_t*>& external,
                                       std::shared_ptr<const void> owner) {
  std::unique_ptr<File> f(new File());
  f->path_ = image.path();
  f->map_ = std::move(image);
  f->owner_ = std::move(owner);
  f->base_ = f->map_.data();
  f->size_ = f->map_.size();
  f->parse();
  if (!external.empty()) {
    if (external.size() != f->tensors_.size())
      fail("{}: internal: {} external tensor pointers for {} tensors", f->path_, external.size(),
           f->tensors_.size());
    for (size_t i = 0; i < external.size(); ++i)
      if (external[i]) f->tensors_[i].data = external[i];
  }
  return f;
}

File::~File() = default;

void File::parse() {
  Parser p(base_, size_, path_);
  int64_t n_tensors = 0, n_kv = 0;
  p.parse_header(version_, n_tensors, n_kv);
  p.parse_kv(n_kv, kv_);

  kv_index_ = sorted_index(kv_, [](const auto& kv) { return std::string_view(kv.first); });
  if (auto d = find_duplicate(kv_index_))
    fail("{}: duplicate metadata key '{}' (keys #{} and #{})", path_,
         display_name(kv_[d->second].first),
         std::min(d->first, d->second), std::max(d->first, d->second));

  alignment_ = 32;
  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::UINT32)
      fail("{}: metadata key 'general.alignment' has type {}, expected uint32", path_,
           value_type_name(a->type));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      fail("{}: general.alignment is {}, expected a non-zero power of two", path_, a->u);
    alignment_ = static_cast<uint32_t>(a->u);
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (int64_t i = 0; i < n_tensors; ++i) tensors_.push_back(p.parse_tensor_info(i));
  tensor_index_ = sorted_index(tensors_, [](const TensorInfo& t) { return std::string_view(t.name); });
  if (auto d = find_duplicate(tensor_index_))
    fail("{}: duplicate tensor name '{}' (tensors #{} and #{})", path_,
         display_name(tensors_[d->second].name),
         std::min(d->first, d->second), std::max(d->first, d->second));

  // llama.cpp pads to the alignment only when there are tensors.
  data_offset_ = n_tensors > 0 ? pad(p.pos(), alignment_) : p.pos();
  if (data_offset_ > size_)
    fail("{}: truncated file: tensor data should start at offset {} (end of tensor infos {} "
         "padded to {}), file has {}",
         path_, data_offset_, p.pos(), alignment_, size_);

  uint64_t expected = 0;
  for (auto& t : tensors_) {
    if (t.offset != expected)
      fail("{}: tensor '{}' has offset {}, expected {}", path_, display_name(t.name), t.offset,
           expected);
    const uint64_t room = size_ - data_offset_;
    if (t.offset > room || t.nbytes > room - t.offset)
      fail("{}: truncated file: tensor '{}' data needs {} bytes at offset {}, file has {}", path_,
           display_name(t.name), t.nbytes, data_offset_ + t.offset, size_);
    t.data = base_ + data_offset_ + t.offset;
    // nbytes <= INT64_MAX and it fits in the file, so this cannot wrap.
    expected += pad(t.nbytes, alignment_);
  }
}

const Value* File::find(std::string_view key) const {
  auto it = std::lower_bound(kv_index_.begin(), kv_index_.end(), key,
                             [](const auto& e, std::string_view k) { return e.first < k; });
  if (it == kv_index_.end() || it->first != key) return nullptr;
  return &kv_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = std::lower_bound(tensor_index_.begin(), tensor_index_.end(), name,
                             [](const auto& e, std::string_view k) { return e.first < k; });
  if (it == tensor_index_.end() || it->first != name) return nullptr;
  return &tensors_[it->second];
}

}  // namespace ft::gguf
