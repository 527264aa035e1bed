#include "tests/testing/paths.h"

namespace ringside::testing {

const std::string& BuildDir() {
  static const std::string* dir = new std::string(RINGSIDE_BUILD_DIR);
  return *dir;
}

const std::string& SourceDir() {
  static const std::string* dir = new std::string(RINGSIDE_SOURCE_DIR);
  return *dir;
}

const std::string& ToolsDir() {
  static const std::string* dir = new std::string(RINGSIDE_TOOLS_DIR);
  return *dir;
}

const std::string& RingsideBinary() {
  static const std::string* bin = new std::string(BuildDir() + "/ringside");
  return *bin;
}

}  // namespace ringside::testing
