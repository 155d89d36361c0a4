// llama-server's native endpoints: POST /completion, /tokenize, /detokenize. Field names
// and defaults follow llama.cpp's tools/server/README.md so its clients (and the seed's
// token-id comparison) work unchanged.
#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/api_generation.h"
#include "serve/api_handlers.h"
#include "serve/api_params.h"
#include "serve/api_prompt.h"
#include "serve/server_http.h"
#include "tokenizer/tokenizer.h"

namespace ft::serve {

using nlohmann::json;

namespace {

json timings_json(const JobStats& s, int64_t n_gen) {
  const double pms = s.prompt_s * 1e3, dms = s.decode_s * 1e3;
  const int64_t n_eval = s.n_prompt - s.n_cached;
  // The first token comes with the prompt's pass; the decode time covers the rest.
  const int64_t n_dec = std::max<int64_t>(0, n_gen - 1);
  return {{"cache_n", s.n_cached},
          {"prompt_n", n_eval},
          {"prompt_ms", pms},
          {"prompt_per_token_ms", n_eval ? pms / static_cast<double>(n_eval) : 0.0},
          {"prompt_per_second", pms > 0 ? 1e3 * static_cast<double>(n_eval) / pms : 0.0},
          {"predicted_n", n_gen},
          {"predicted_ms", dms},
          {"predicted_per_token_ms", n_dec ? dms / static_cast<double>(n_dec) : 0.0},
          {"predicted_per_second", dms > 0 ? 1e3 * static_cast<double>(n_dec) / dms : 0.0}};
}

json probs_json(const Tokenizer* tok, const Piece& p) {
  auto piece = [&](int32_t id) { return tok ? tok->token_to_piece(id, true) : std::string(); };
  json top = json::array();
  for (const auto& t : p.top) top.push_back({{"id", t.id}, {"token", piece(t.id)}, {"logprob", t.logprob}});
  return {{"id", p.token}, {"token", piece(p.token)}, {"logprob", p.logprob}, {"top_logprobs", top}};
}

}  // namespace

void handle_completion(const ServerContext& c, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  GenRequest r;
  r.prompt = read_prompt(c, body, "prompt");
  r.max_tokens = get_int(body, "n_predict", -1, INT32_MAX).value_or(-1);
  read_sampling(body, r);
  r.cache_prompt = get_bool(body, "cache_prompt").value_or(true);
  r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  const int64_t n_probs = get_int(body, "n_probs", 0, 100).value_or(0);
  r.logprobs = n_probs > 0;
  r.n_top_logprobs = static_cast<int>(n_probs);
  const bool stream = get_bool(body, "stream").value_or(false);
  const bool return_tokens = get_bool(body, "return_tokens").value_or(false);
  const std::vector<std::string> stops = get_stops(body, "stop");

  json settings = {{"n_predict", r.max_tokens},        {"temperature", r.sampling.temperature},
                   {"top_k", r.sampling.top_k},        {"top_p", r.sampling.top_p},
                   {"min_p", r.sampling.min_p},        {"repeat_penalty", r.sampling.repeat_penalty},
                   {"seed", r.sampling.seed},          {"stop", stops},
                   {"n_probs", n_probs},               {"ignore_eos", r.ignore_eos},
                   {"cache_prompt", r.cache_prompt}};
  const std::string prompt_text = c.tok && c.tok->can_encode() ? c.tok->decode(r.prompt, true) : "";
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());

  auto gen = std::make_shared<Generation>(c.sched->submit(std::move(r)), c.tok, stops);
  auto final_json = [=, model = c.model_id](const Generation& g) {
    const JobStats s = g.stats();
    json j = {{"index", 0},
              {"content", g.text()},
              {"tokens", return_tokens ? json(g.tokens()) : json::array()},
              {"id_slot", 0},
              {"stop", true},
              {"model", model},
              {"tokens_predicted", g.n_generated()},
              {"tokens_evaluated", n_prompt},
              {"generation_settings", settings},
              {"prompt", prompt_text},
              {"has_new_line", g.text().find('\n') != std::string::npos},
              {"truncated", false},
              {"stop_type", stop_kind_name(g.stop_kind())},
              {"stopping_word", g.stop_word()},
              {"tokens_cached", n_prompt + std::max<int64_t>(0, g.n_generated() - 1)},
              {"timings", timings_json(s, g.n_generated())}};
    return j;
  };

  if (!stream) {
    Piece p;
    json probs = json::array();
    while (gen->next(p))
      if (!p.done && n_probs > 0) probs.push_back(probs_json(c.tok, p));
    json j = final_json(*gen);
    if (n_probs > 0) j["completion_probabilities"] = probs;
    return send_json(res, 200, j);
  }
  const Tokenizer* tok = c.tok;
  send_sse(
      res,
      [=](const SseWrite& write) {
        Piece p;
        while (gen->next(p)) {
          if (p.done) {
            json j = final_json(*gen);
            j["content"] = p.text;  // the last held-back text; the full text went in pieces
            write(sse_data(j));
            return;
          }
          json j = {{"index", 0},
                    {"content", p.text},
                    {"tokens", json::array({p.token})},
                    {"stop", false},
                    {"id_slot", 0},
                    {"tokens_predicted", gen->n_generated()},
                    {"tokens_evaluated", n_prompt}};
          if (n_probs > 0) j["completion_probabilities"] = json::array({probs_json(tok, p)});
          if (!write(sse_data(j))) return gen->cancel();
        }
      },
      [gen] { gen->cancel(); });
}

void handle_tokenize(const ServerContext& c, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const auto content = get_string(body, "content");
  if (!content) bad_param("content", "'content' is required (the text to tokenize)");
  const bool add_special = get_bool(body, "add_special").value_or(false);
  const bool parse_special = get_bool(body, "parse_special").value_or(true);
  const bool with_pieces = get_bool(body, "with_pieces").value_or(false);
  const Tokenizer& tok = c.need_tok("content");
  const std::vector<int32_t> ids = tok.encode(*content, add_special, parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces)
      tokens.push_back({{"id", id}, {"piece", tok.token_to_piece(id, true)}});
    else
      tokens.push_back(id);
  }
  send_json(res, 200, {{"tokens", tokens}});
}

void handle_detokenize(const ServerContext& c, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) bad_param("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  for (const auto& v : *it) {
    if (!v.is_number_integer()) bad_param("tokens", "'tokens' must be an array of token ids");
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id >= c.sched->n_vocab())
      bad_param("tokens", "token id {} is out of range [0, {})", id, c.sched->n_vocab());
    ids.push_back(static_cast<int32_t>(id));
  }
  const Tokenizer& tok = c.need_tok("tokens");
  send_json(res, 200, {{"content", tok.decode(ids, true)}});
}

}  // namespace ft::serve
