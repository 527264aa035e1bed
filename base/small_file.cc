#include "base/small_file.h"

#include <fstream>
#include <sstream>

namespace ringside::base {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string ReadSmallFileOrEmpty(const std::string& path) {
  return ReadSmallFile(path).value_or("");
}

}  // namespace ringside::base
