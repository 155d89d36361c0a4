// GGUF v3 writer. Layout and byte order follow gguf-py's GGUFWriter
// (write_header_to_file / write_kv_data_to_file / write_ti_data_to_file /
// write_tensors_to_file): the padding after the tensor infos is always written,
// even with no tensors, exactly as gguf-py does.
#include "format/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <unistd.h>

#include "core/error.h"

namespace ft::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr size_t kMaxNameLength = 63;

uint64_t pad(uint64_t x, uint64_t align) { return (x + align - 1) & ~(align - 1); }

using Sink = std::function<void(const void*, size_t)>;

template <class T>
void put(const Sink& out, T v) {
  out(&v, sizeof(v));
}

void put_string(const Sink& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out(s.data(), s.size());
}

void check_value(const std::string& key, const Value& v, int depth) {
  if (static_cast<int32_t>(v.type) < 0 || static_cast<int32_t>(v.type) > 12)
    fail("gguf writer: metadata key '{}' has unknown value type {}", key, static_cast<int>(v.type));
  if (!v.is_array()) return;
  if (static_cast<int32_t>(v.elem_type) < 0 || static_cast<int32_t>(v.elem_type) > 12)
    fail("gguf writer: metadata key '{}' has unknown array element type {}", key,
         static_cast<int>(v.elem_type));
  if (depth >= 8) fail("gguf writer: metadata key '{}' has arrays nested too deep", key);
  for (const auto& e : v.arr) {
    if (e.type != v.elem_type)
      fail("gguf writer: metadata key '{}' is an array of {} but has a {} element", key,
           value_type_name(v.elem_type), value_type_name(e.type));
    check_value(key, e, depth + 1);
  }
}

void put_value(const Sink& out, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8: put(out, static_cast<uint8_t>(v.u)); break;
    case ValueType::INT8: put(out, static_cast<int8_t>(v.i)); break;
    case ValueType::UINT16: put(out, static_cast<uint16_t>(v.u)); break;
    case ValueType::INT16: put(out, static_cast<int16_t>(v.i)); break;
    case ValueType::UINT32: put(out, static_cast<uint32_t>(v.u)); break;
    case ValueType::INT32: put(out, static_cast<int32_t>(v.i)); break;
    case ValueType::UINT64: put(out, v.u); break;
    case ValueType::INT64: put(out, v.i); break;
    case ValueType::FLOAT32: put(out, static_cast<float>(v.f)); break;
    case ValueType::FLOAT64: put(out, v.f); break;
    case ValueType::BOOL: put(out, static_cast<uint8_t>(v.b ? 1 : 0)); break;
    case ValueType::STRING: put_string(out, v.str); break;
    case ValueType::ARRAY:
      put(out, static_cast<uint32_t>(v.elem_type));
      put<uint64_t>(out, v.arr.size());
      for (const auto& e : v.arr) put_value(out, e);
      break;
  }
}

Value scalar(ValueType t) {
  Value v;
  v.type = t;
  return v;
}

template <class T, class F>
Value array_of(ValueType elem, const std::vector<T>& xs, F set) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = elem;
  v.arr.reserve(xs.size());
  for (const auto& x : xs) {
    Value e = scalar(elem);
    set(e, x);
    v.arr.push_back(std::move(e));
  }
  return v;
}

uint64_t tensor_nbytes(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) {
  if (name.size() > kMaxNameLength)
    fail("gguf writer: tensor name '{}' is {} bytes long, expected at most {}", name, name.size(),
         kMaxNameLength);
  if (name.find('\0') != std::string::npos)
    fail("gguf writer: tensor name contains a NUL byte");
  if (ne.size() > 4)
    fail("gguf writer: tensor '{}' has {} dimensions, expected at most 4", name, ne.size());
  const auto& tr = traits(type);
  uint64_t nbytes = static_cast<uint64_t>(tr.type_size);
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) fail("gguf writer: tensor '{}' dimension {} is {}, expected >= 0", name, d, ne[d]);
    const int64_t n = d == 0 ? ne[0] / tr.block_size : ne[d];
    if (d == 0 && ne[0] % tr.block_size != 0)
      fail("gguf writer: tensor '{}' of type {} has {} elements per row, expected a multiple of {}",
           name, tr.name, ne[0], tr.block_size);
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(n), &nbytes))
      fail("gguf writer: tensor '{}' is too large", name);
  }
  return nbytes;
}

}  // namespace

Writer::Writer(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail("gguf writer: alignment {} is not a non-zero power of two", alignment);
  // gguf-py's add_custom_alignment records a non-default alignment in the file.
  if (alignment != 32) set_u32("general.alignment", alignment);
}

void Writer::set(const std::string& key, Value v) {
  if (key.empty()) fail("gguf writer: empty metadata key");
  check_value(key, v, 0);
  if (key == "general.alignment") {
    if (v.type != ValueType::UINT32 || v.u == 0 || (v.u & (v.u - 1)) != 0 || v.u > UINT32_MAX)
      fail("gguf writer: general.alignment must be a uint32 power of two");
    alignment_ = static_cast<uint32_t>(v.u);
  }
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  }
  kv_.emplace_back(key, std::move(v));
}

void Writer::set_u32(const std::string& key, uint32_t x) {
  Value v = scalar(ValueType::UINT32);
  v.u = x;
  set(key, std::move(v));
}
void Writer::set_i32(const std::string& key, int32_t x) {
  Value v = scalar(ValueType::INT32);
  v.i = x;
  set(key, std::move(v));
}
void Writer::set_u64(const std::string& key, uint64_t x) {
  Value v = scalar(ValueType::UINT64);
  v.u = x;
  set(key, std::move(v));
}
void Writer::set_f32(const std::string& key, float x) {
  Value v = scalar(ValueType::FLOAT32);
  v.f = x;
  set(key, std::move(v));
}
void Writer::set_bool(const std::string& key, bool x) {
  Value v = scalar(ValueType::BOOL);
  v.b = x;
  set(key, std::move(v));
}
void Writer::set_string(const std::string& key, const std::string& x) {
  Value v = scalar(ValueType::STRING);
  v.str = x;
  set(key, std::move(v));
}
void Writer::set_string_array(const std::string& key, const std::vector<std::string>& xs) {
  set(key, array_of(ValueType::STRING, xs, [](Value& e, const std::string& x) { e.str = x; }));
}
void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& xs) {
  set(key, array_of(ValueType::INT32, xs, [](Value& e, int32_t x) { e.i = x; }));
}
void Writer::set_u32_array(const std::string& key, const std::vector<uint32_t>& xs) {
  set(key, array_of(ValueType::UINT32, xs, [](Value& e, uint32_t x) { e.u = x; }));
}
void Writer::set_f32_array(const std::string& key, const std::vector<float>& xs) {
  set(key, array_of(ValueType::FLOAT32, xs, [](Value& e, float x) { e.f = x; }));
}
void Writer::set_bool_array(const std::string& key, const std::vector<bool>& xs) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = ValueType::BOOL;
  for (bool x : xs) {
    Value e = scalar(ValueType::BOOL);
    e.b = x;
    v.arr.push_back(std::move(e));
  }
  set(key, std::move(v));
}

void Writer::add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                        std::vector<uint8_t> data) {
  const uint64_t nbytes = tensor_nbytes(name, type, ne);
  if (data.size() != nbytes)
    fail("gguf writer: tensor '{}' has {} bytes of data, expected {}", name, data.size(), nbytes);
  for (const auto& t : tensors_)
    if (t.name == name) fail("gguf writer: duplicate tensor name '{}'", name);
  tensors_.push_back(PendingTensor{name, type, ne, nbytes, std::move(data), nullptr});
}

void Writer::add_tensor_stream(const std::string& name, GgmlType type,
                               const std::vector<int64_t>& ne,
                               std::function<void(uint8_t* dst, uint64_t nbytes)> fill) {
  const uint64_t nbytes = tensor_nbytes(name, type, ne);
  for (const auto& t : tensors_)
    if (t.name == name) fail("gguf writer: duplicate tensor name '{}'", name);
  tensors_.push_back(PendingTensor{name, type, ne, nbytes, {}, std::move(fill)});
}

namespace {

void write_all(const Sink& out, uint32_t alignment,
               const std::vector<std::pair<std::string, Value>>& kv, const auto& tensors,
               bool with_data = true) {
  uint64_t pos = 0;
  const Sink counted = [&](const void* p, size_t n) {
    out(p, n);
    pos += n;
  };
  static const uint8_t zeros[256] = {};
  auto put_padding = [&](uint64_t n) {
    for (uint64_t left = pad(n, alignment) - n; left > 0;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(left, sizeof(zeros)));
      counted(zeros, k);
      left -= k;
    }
  };

  counted("GGUF", 4);
  put<uint32_t>(counted, kVersion);
  put<uint64_t>(counted, tensors.size());
  put<uint64_t>(counted, kv.size());
  for (const auto& [key, v] : kv) {
    put_string(counted, key);
    put<uint32_t>(counted, static_cast<uint32_t>(v.type));
    put_value(counted, v);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    put_string(counted, t.name);
    put<uint32_t>(counted, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(counted, static_cast<uint64_t>(d));
    put<uint32_t>(counted, static_cast<uint32_t>(t.type));
    put<uint64_t>(counted, offset);
    offset += pad(t.nbytes, alignment);
  }
  put_padding(pos);
  if (!with_data) return;
  for (const auto& t : tensors) {
    if (t.fill) {
      std::vector<uint8_t> buf(static_cast<size_t>(t.nbytes));
      t.fill(buf.data(), t.nbytes);
      counted(buf.data(), buf.size());
    } else {
      counted(t.data.data(), t.data.size());
    }
    put_padding(t.nbytes);
  }
}

}  // namespace

// Writes PATH.tmp.PID and renames it, so a failed or interrupted write never leaves a
// truncated PATH behind, and two processes writing the same PATH at once (ctest -j running two
// tests that build one parity model) each rename their own whole file.
void Writer::write(const std::string& path) const {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!f) fail("{}: cannot open for writing: {}", tmp, std::strerror(errno));
  try {
    write_all(
        [&](const void* p, size_t n) {
          if (n && std::fwrite(p, 1, n, f.get()) != n)
            fail("{}: write failed: {}", tmp, std::strerror(errno));
        },
        alignment_, kv_, tensors_);
    if (std::fclose(f.release()) != 0) fail("{}: write failed: {}", tmp, std::strerror(errno));
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      fail("{}: cannot rename {} to it: {}", path, tmp, std::strerror(errno));
  } catch (...) {
    f.reset();
    std::remove(tmp.c_str());
    throw;
  }
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out;
  write_all(
      [&](const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
      },
      alignment_, kv_, tensors_);
  return out;
}

Writer::Layout Writer::layout() const {
  Layout l;
  write_all(
      [&](const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        l.head.insert(l.head.end(), b, b + n);
      },
      alignment_, kv_, tensors_, false);
  uint64_t off = l.head.size();
  for (const auto& t : tensors_) {
    l.offsets.push_back(off);
    off += pad(t.nbytes, alignment_);
  }
  l.file_size = off;
  return l;
}

}  // namespace ft::gguf
