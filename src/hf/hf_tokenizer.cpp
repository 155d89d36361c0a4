#include "hf/hf_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/hf_config.h"

namespace ft::hf {
namespace fs = std::filesystem;
using nlohmann::json;

const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// gguf-py's does_token_look_special for the byte-level vocabularies we convert.
bool looks_special(const std::string& t) {
  if (t.size() >= 4 && t.starts_with("<|") && t.ends_with("|>")) return true;
  for (const char* s : {"<pad>", "<mask>", "<2mass>", "[@BOS@]", "<s>", "</s>", "<unk>"})
    if (t == s) return true;
  return false;
}

// The Split regex of the pre_tokenizer (a Sequence or a single Split), "" if none.
std::string split_regex(const json& pt, const std::string& where) {
  if (!pt.is_object()) return "";
  const std::string type = json_str(pt, "type", where);
  if (type == "Split" && pt.contains("pattern")) return json_str(pt["pattern"], "Regex", where + ".pattern");
  if (type == "Sequence" && pt.contains("pretokenizers") && pt["pretokenizers"].is_array())
    for (const auto& p : pt["pretokenizers"]) {
      const std::string r = split_regex(p, where + ".pretokenizers");
      if (!r.empty()) return r;
    }
  return "";
}

}  // namespace

HfVocab read_vocab(const std::string& dir, const HfConfig& cfg) {
  const std::string path = (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(path)) fail("{}: no tokenizer.json (only byte-level BPE tokenizer.json files are supported)", dir);
  const json j = read_json(path);
  HfVocab v;
  const json model = j.value("model", json::object());
  if (!model.is_object() || json_str(model, "type", path + " model") != "BPE")
    fail("{}: model.type is '{}', expected BPE (byte-level)", path,
         model.is_object() ? json_str(model, "type", path + " model") : std::string("?"));
  if (json_flag(model, "byte_fallback", path + " model", false))
    fail("{}: a byte_fallback BPE (SentencePiece-style) vocabulary is not supported", path);

  // Pre-tokenizer: llama.cpp hashes the HF tokenizer's output on a probe text; we read
  // the regex it would have hashed.
  const std::string re = split_regex(j.value("pre_tokenizer", json::object()), path + " pre_tokenizer");
  if (re == kQwen2Regex)
    v.pre = "qwen2";
  else if (re == kLlama3Regex)
    v.pre = "llama-bpe";
  else
    fail("{}: pre_tokenizer Split regex {} is not supported (the qwen2 or llama-3 regex)", path,
         re.empty() ? std::string("(none)") : json(re).dump());

  const int64_t n_vocab = cfg.n_vocab;
  std::vector<std::string> by_id(static_cast<size_t>(n_vocab));
  std::vector<bool> present(static_cast<size_t>(n_vocab), false);
  v.token_types.assign(static_cast<size_t>(n_vocab), kNormal);
  auto put = [&](const std::string& text, const json& idj, const char* what) {
    if (!idj.is_number_integer()) fail("{}: {} '{}' has a non-integer id", path, what, text);
    const int64_t id = idj.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      fail("{}: {} '{}' has id {}, outside config.json vocab_size {}", path, what, text, id, n_vocab);
    by_id[static_cast<size_t>(id)] = text;
    present[static_cast<size_t>(id)] = true;
    return id;
  };
  const json vocab = model.value("vocab", json::object());
  if (!vocab.is_object() || vocab.empty()) fail("{}: model.vocab is missing or empty", path);
  for (const auto& [text, id] : vocab.items()) put(text, id, "token");
  const json added = j.value("added_tokens", json::array());
  if (!added.is_array()) fail("{}: added_tokens is {}, expected an array", path, added.dump());
  for (const auto& a : added) {
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string())
      fail("{}: an added_tokens entry has no content", path);
    const std::string text = a["content"].get<std::string>();
    const int64_t id = put(text, a.value("id", json()), "added token");
    const bool special = json_flag(a, "special", path + " added token '" + text + "'", false) || looks_special(text);
    v.token_types[static_cast<size_t>(id)] = special ? kControl : kUserDefined;
  }
  for (int64_t i = 0; i < n_vocab; ++i) {
    if (!present[static_cast<size_t>(i)]) {
      by_id[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
      v.token_types[static_cast<size_t>(i)] = kUnused;
    }
  }
  v.tokens = std::move(by_id);

  const json merges = model.value("merges", json::array());
  for (const auto& m : merges) {
    if (m.is_string()) {
      v.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      // transformers >= 4.45 pair form; a space inside a part is written as U+0120 like gguf-py.
      std::string s;
      for (int k = 0; k < 2; ++k) {
        if (k) s += ' ';
        for (char c : m[k].get<std::string>()) s += c == ' ' ? std::string("\xC4\xA0") : std::string(1, c);
      }
      v.merges.push_back(s);
    } else {
      fail("{}: model.merges entry {} is neither \"a b\" nor [\"a\", \"b\"]", path, m.dump());
    }
  }
  if (v.merges.empty()) fail("{}: model.merges is empty", path);

  // Special tokens (gguf-py SpecialVocab): tokenizer_config's <typ>_token matched against the
  // added tokens, add_<typ>_token flags, then config.json's <typ>_token_id for those unset.
  static const char* const kTypes[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  json tc = json::object();
  const fs::path tcp = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(tcp)) tc = read_json(tcp.string());
  auto set_id = [&](const std::string& typ, int64_t id) {
    if (id < 0 || id >= n_vocab) return;
    for (const auto& [t, x] : v.special_ids)
      if (t == typ) return;
    v.special_ids.emplace_back(typ, id);
  };
  // Llama 3: the post-processor template adds <|begin_of_text|> (gguf-py's crude parse).
  if (j.contains("post_processor") && j["post_processor"].is_object()) {
    const json& pp = j["post_processor"];
    json procs = pp.contains("processors") ? pp["processors"] : json::array({pp});
    for (const auto& p : procs) {
      if (!p.is_object() || json_str(p, "type", path + " post_processor") != "TemplateProcessing") continue;
      const json single = p.value("single", json::array());
      if (single.is_array() && single.size() > 1 && single[0].is_object() && single[0].contains("SpecialToken")) {
        const std::string first = json_str(single[0]["SpecialToken"], "id", path + " post_processor.single");
        const json bos = tc.value("bos_token", json());
        const std::string bos_s = bos.is_string() ? bos.get<std::string>()
                                  : json_str(bos, "content", tcp.string() + " bos_token");
        v.add_special.emplace_back("bos", !first.empty() && first == bos_s);
      }
    }
  }
  if (!tc.empty()) {
    for (const char* typ : kTypes) {
      const auto add = tc.find(std::string("add_") + typ + "_token");
      if (add != tc.end() && add->is_boolean()) {
        bool replaced = false;
        for (auto& [t, b] : v.add_special)
          if (t == typ) b = add->get<bool>(), replaced = true;
        if (!replaced) v.add_special.emplace_back(typ, add->get<bool>());
      }
      const auto e = tc.find(std::string(typ) + "_token");
      std::string content;
      if (e != tc.end() && e->is_string()) content = e->get<std::string>();
      else if (e != tc.end() && e->is_object() && e->contains("content") && (*e)["content"].is_string())
        content = (*e)["content"].get<std::string>();
      else continue;
      for (const auto& a : added)
        if (a["content"] == content && a.contains("id") && a["id"].is_number_integer()) {
          set_id(typ, a["id"].get<int64_t>());
          break;
        }
    }
    if (tc.contains("chat_template") && tc["chat_template"].is_string())
      v.chat_template = tc["chat_template"].get<std::string>();
    if (tc.contains("add_prefix_space") && tc["add_prefix_space"].is_boolean() && cfg.arch == "llama")
      v.add_space_prefix = tc["add_prefix_space"].get<bool>();
  }
  if (!v.chat_template) {
    const fs::path jinja = fs::path(dir) / "chat_template.jinja";
    if (fs::exists(jinja)) {
      std::ifstream in(jinja, std::ios::binary);
      v.chat_template = std::string(std::istreambuf_iterator<char>(in), {});
    }
  }
  set_id("bos", cfg.bos_token_id);
  set_id("eos", cfg.eos_token_id);
  set_id("pad", cfg.pad_token_id);
  return v;
}

}  // namespace ft::hf
