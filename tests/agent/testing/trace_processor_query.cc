#include "tests/agent/testing/trace_processor_query.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/agent/testing/ringside_cli.h"
#include "tests/testing/paths.h"

namespace ringside::agent::testing {

std::string TraceProcessorPath() {
  const char* env = std::getenv("TRACE_PROCESSOR");
  std::string path = env != nullptr && *env != '\0'
                         ? env
                         : ringside::testing::SourceDir() + "/../shared/bin/trace_processor_shell";
  return access(path.c_str(), X_OK) == 0 ? path : "";
}

std::vector<std::vector<std::string>> Query(const std::string& tp, const std::string& trace,
                                            const std::string& sql) {
  const std::string file = TempPath("query.sql");
  std::ofstream(file) << sql;
  int code = -1;
  const std::string out = RunProgramCapture(tp, {"-q", file, trace}, &code);
  unlink(file.c_str());
  EXPECT_EQ(code, 0) << sql;
  std::vector<std::vector<std::string>> rows;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> row;
    for (absl::string_view v : absl::StrSplit(line, ',')) {
      absl::ConsumePrefix(&v, "\"");
      absl::ConsumeSuffix(&v, "\"");
      row.emplace_back(v);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

int64_t QueryInt(const std::string& tp, const std::string& trace, const std::string& sql) {
  const auto rows = Query(tp, trace, sql);
  int64_t v = -1;
  if (rows.size() != 1 || rows[0].size() != 1 || !absl::SimpleAtoi(rows[0][0], &v)) {
    ADD_FAILURE() << "not one number: " << sql;
  }
  return v;
}

}  // namespace ringside::agent::testing
