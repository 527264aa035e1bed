#ifndef RINGSIDE_TESTS_TESTING_PATHS_H_
#define RINGSIDE_TESTS_TESTING_PATHS_H_

#include <string>

namespace ringside::testing {

// Where the build put this test binary's siblings (build/ringside,
// build/storm), the source tree, and where `make deps` installed the npm tools
// (the Makefile's TOOLS_DIR). Only paths.cc is compiled with these absolute
// paths, so that every other object is the same in any clone and a compiler
// cache shared by clones in other folders hits for it.
const std::string& BuildDir();
const std::string& SourceDir();
const std::string& ToolsDir();

// BuildDir() + "/ringside".
const std::string& RingsideBinary();

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_PATHS_H_
