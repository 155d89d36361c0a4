// libFuzzer entry for the GGUF reader: parse arbitrary bytes with File::from_memory and
// touch every metadata value and every tensor byte range. ft::Error is the expected
// outcome for bad input; anything else (crash, sanitizer report, other exception) is a bug.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "format/gguf.h"

namespace {

uint64_t walk(const ft::gguf::Value& v) {
  uint64_t h = static_cast<uint64_t>(v.type) + v.u + static_cast<uint64_t>(v.i) + v.str.size();
  h += v.to_string(4).size();
  for (const auto& e : v.arr) h += walk(e);
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = ft::gguf::File::from_memory(data, size, "fuzz.gguf");
    volatile uint64_t sink = 0;
    for (const auto& [key, v] : f->metadata()) {
      sink = sink + walk(v) + key.size();
      if (f->find(key) == nullptr) __builtin_trap();
      // The typed getters must either answer or throw ft::Error.
      try { sink = sink + f->get_uint(key).value_or(0); } catch (const ft::Error&) {}
      try { sink = sink + static_cast<uint64_t>(f->get_float(key).value_or(0) != 0); } catch (const ft::Error&) {}
      try { sink = sink + f->get_string_array(key).value_or(std::vector<std::string>{}).size(); } catch (const ft::Error&) {}
      try { sink = sink + f->get_int_array(key).value_or(std::vector<int64_t>{}).size(); } catch (const ft::Error&) {}
      try { sink = sink + f->get_float_array(key).value_or(std::vector<float>{}).size(); } catch (const ft::Error&) {}
    }
    for (const auto& t : f->tensors()) {
      if (f->find_tensor(t.name) != &t) __builtin_trap();
      sink = sink + t.shape_string().size() + static_cast<uint64_t>(t.n_elements());
      // Every tensor byte must lie inside the buffer: ASan reports it otherwise.
      if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
    }
    (void)sink;
  } catch (const ft::Error&) {
  }
  return 0;
}
