#include "engine/exec.h"

namespace ft::engine {

std::optional<ActType> act_type_from_name(std::string_view s) {
  if (s == "float32" || s == "f32" || s == "fp32") return ActType::kF32;
  if (s == "bfloat16" || s == "bf16") return ActType::kBF16;
  if (s == "float16" || s == "f16" || s == "fp16") return ActType::kF16;
  return std::nullopt;
}

std::string_view act_type_name(ActType t) {
  switch (t) {
    case ActType::kBF16: return "bfloat16";
    case ActType::kF16: return "float16";
    default: return "float32";
  }
}

}  // namespace ft::engine
