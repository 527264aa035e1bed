#include "tests/agent/testing/dir_entries.h"

#include <dirent.h>

#include <fstream>

#include "agent/output/trace_sidecar.h"

namespace ringside::agent::testing {

std::set<std::string> ListDir(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.insert(name);
    }
    closedir(d);
  }
  return out;
}

std::set<std::string> ListTraces(const std::string& dir) {
  std::set<std::string> out;
  for (const std::string& name : ListDir(dir)) {
    if (!IsSidecarOrItsTemporary(name)) out.insert(name);
  }
  return out;
}

bool WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

}  // namespace ringside::agent::testing
