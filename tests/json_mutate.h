// Structural mutations of a JSON document for robustness tests of what reads JSON a user or a client wrote (request
// bodies, config.json, tokenizer.json): a node replaced by an edge value of another type, removed, wrapped in an array
// or an object, an array element repeated or an object given an extra field. Deterministic for a given generator.
#pragma once

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

namespace ft::test {

// Each JSON type, with the edges of the ranges readers check (64-bit ends, a number past int32, -0.0, a denormal,
// long / NUL-holding / multi-byte strings); `extra` adds values that mean something to the reader under test.
inline nlohmann::ordered_json json_edge_value(std::mt19937& rng, const std::vector<nlohmann::ordered_json>& extra = {}) {
  using oj = nlohmann::ordered_json;
  static const std::vector<oj> kValues = {
      nullptr, true, false, 0, -1, 1, 2, 65, 100000, 2147483647LL, -2147483648LL, 9007199254740993LL,
      -9223372036854775807LL - 1, 18446744073709551615ULL, 0.5, -0.0, 1e308, -1e308, 1e-320, "", "x",
      std::string(3000, 'a'), std::string("a\0b", 3), "\xf0\x9f\x99\x82", oj::array(), oj::object(), oj::array({1, 2, 3}),
      oj::array({"a", "b"}), oj::array({oj::object()}), oj::object({{"type", "text"}, {"text", "hi"}})};
  const size_t n = kValues.size() + extra.size();
  const size_t i = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  return i < kValues.size() ? kValues[i] : extra[i - kValues.size()];
}

// Every node's pointer but the root's.
inline void json_pointers(const nlohmann::ordered_json& j, const nlohmann::ordered_json::json_pointer& at,
                          std::vector<nlohmann::ordered_json::json_pointer>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const auto p = at / it.key();
      out.push_back(p);
      json_pointers(*it, p, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      const auto p = at / i;
      out.push_back(p);
      json_pointers(j[i], p, out);
    }
  }
}

// One mutation of `doc` at a node drawn uniformly from all of its nodes.
inline void json_mutate(nlohmann::ordered_json& doc, std::mt19937& rng,
                        const std::vector<nlohmann::ordered_json>& extra = {}) {
  using oj = nlohmann::ordered_json;
  std::vector<oj::json_pointer> ps;
  json_pointers(doc, oj::json_pointer(), ps);
  if (ps.empty()) {
    doc = oj::object({{"x", json_edge_value(rng, extra)}});
    return;
  }
  const oj::json_pointer p = ps[std::uniform_int_distribution<size_t>(0, ps.size() - 1)(rng)];
  oj& node = doc[p];
  switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
    case 0:
    case 1: node = json_edge_value(rng, extra); break;
    case 2: {  // removed
      oj& parent = doc[p.parent_pointer()];
      if (parent.is_object())
        parent.erase(p.back());
      else
        parent.erase(static_cast<size_t>(std::stoul(p.back())));
      break;
    }
    case 3: node = oj::array({node}); break;
    case 4: node = oj::object({{"value", node}}); break;
    default: {  // an array element repeated, or a field added to an object
      if (node.is_array() && !node.empty()) {
        const oj e = node[std::uniform_int_distribution<size_t>(0, node.size() - 1)(rng)];
        for (int i = 0; i < 3; ++i) node.push_back(e);
      } else if (node.is_object()) {
        node["extra"] = json_edge_value(rng, extra);
      } else {
        node = json_edge_value(rng, extra);
      }
    }
  }
}

}  // namespace ft::test
