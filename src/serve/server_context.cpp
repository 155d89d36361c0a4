#include "serve/server_context.h"

#include "serve/api_error.h"
#include "tokenizer/tokenizer.h"

namespace ft::serve {

const Tokenizer& ServerContext::need_tok(const char* param) const {
  if (!tok || !tok->can_encode())
    throw ApiError(400, "the model has no vocabulary (tokenizer.ggml.model 'none'): send the prompt as token ids",
                   param);
  return *tok;
}

}  // namespace ft::serve
