#include "core/log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ft::log {
namespace {
Level initial_level() {
  const char* e = std::getenv("FT_LOG_LEVEL");
  if (!e) return Level::kInfo;
  if (!std::strcmp(e, "debug")) return Level::kDebug;
  if (!std::strcmp(e, "warn")) return Level::kWarn;
  if (!std::strcmp(e, "error")) return Level::kError;
  if (!std::strcmp(e, "off")) return Level::kOff;
  return Level::kInfo;
}
std::atomic<Level> g_level{initial_level()};
std::mutex g_mu;
}  // namespace

Level level() { return g_level.load(std::memory_order_relaxed); }
void set_level(Level l) { g_level.store(l); }

void write(Level l, const std::string& msg) {
  static const char* const kTag[] = {"debug", "info", "warn", "error", ""};
  std::lock_guard<std::mutex> lk(g_mu);
  std::fprintf(stderr, "[%s] %s\n", kTag[static_cast<int>(l)], msg.c_str());
}

}  // namespace ft::log
