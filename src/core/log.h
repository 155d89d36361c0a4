// Minimal leveled logging to stderr. FT_LOG_LEVEL=debug|info|warn|error (default info).
#pragma once

#include <fmt/format.h>

#include <cstdio>

namespace ft::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

Level level();
void set_level(Level l);
void write(Level l, const std::string& msg);

template <class... A>
void debug(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void info(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void warn(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void error(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::kError) write(Level::kError, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace ft::log
