// The endpoint handlers, one file per API family:
//   api_llama.cpp      llama-server's /completion, /tokenize, /detokenize
//   api_openai.cpp     /v1/completions, /v1/chat/completions
//   api_anthropic.cpp  /v1/messages, /v1/messages/count_tokens
// Each throws ApiError for what the client got wrong; Server renders it in the family's
// error format and counts the request.
#pragma once

#include <httplib.h>

#include "serve/server_context.h"

namespace ft::serve {

void handle_completion(const ServerContext& c, const httplib::Request& req, httplib::Response& res);
void handle_tokenize(const ServerContext& c, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(const ServerContext& c, const httplib::Request& req, httplib::Response& res);

void handle_v1_completions(const ServerContext& c, const httplib::Request& req, httplib::Response& res);
void handle_chat_completions(const ServerContext& c, const httplib::Request& req, httplib::Response& res);

void handle_messages(const ServerContext& c, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(const ServerContext& c, const httplib::Request& req, httplib::Response& res);

}  // namespace ft::serve
