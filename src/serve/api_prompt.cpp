#include "serve/api_prompt.h"

#include "serve/api_error.h"
#include "tokenizer/tokenizer.h"

namespace ft::serve {

using nlohmann::json;

namespace {
bool all_ints(const json& a) {
  for (const auto& v : a)
    if (!v.is_number_integer()) return false;
  return true;
}
}  // namespace

std::vector<int32_t> read_prompt(const ServerContext& c, const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) bad_param(key, "'{}' is required", key);
  json p = *it;
  // [[ids]] or ["text"]: one prompt in OpenAI's batch form.
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = json(p[0]);
  if (p.is_string()) {
    const std::string text = p.get<std::string>();
    return c.need_tok(key).encode(text, /*add_special=*/true, /*parse_special=*/true);
  }
  if (p.is_array() && all_ints(p)) {
    std::vector<int32_t> ids;
    for (const auto& v : p) {
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id >= c.sched->n_vocab())
        bad_param(key, "token id {} is out of range [0, {})", id, c.sched->n_vocab());
      ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
  }
  if (p.is_array() && p.size() > 1 && (p[0].is_string() || p[0].is_array()))
    bad_param(key, "'{}' holds {} prompts; this server answers one prompt per request", key, p.size());
  bad_param(key, "'{}' must be a string or an array of token ids", key);
}

}  // namespace ft::serve
