#include "tests/agent/testing/dir_entries.h"

#include <dirent.h>

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

}  // namespace ringside::agent::testing
