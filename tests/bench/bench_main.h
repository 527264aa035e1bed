#ifndef RINGSIDE_TESTS_BENCH_BENCH_MAIN_H_
#define RINGSIDE_TESTS_BENCH_BENCH_MAIN_H_

#include <string>
#include <vector>

#include "benchmark/benchmark.h"

namespace ringside::bench {

// A benchmark binary's main(): the registered benchmarks run with
// `reporter`, as medians of 5 repetitions unless the command line says how
// many (the machine is shared: single runs vary by tens of percent).
inline int RunWithMedians(int argc, char** argv, benchmark::BenchmarkReporter* reporter) {
  std::vector<char*> args(argv, argv + argc);
  std::string repetitions = "--benchmark_repetitions=5";
  std::string aggregates = "--benchmark_report_aggregates_only=true";
  bool has_repetitions = false;
  for (char* a : args) has_repetitions |= std::string(a).find("repetitions") != std::string::npos;
  if (!has_repetitions) args.insert(args.begin() + 1, {repetitions.data(), aggregates.data()});
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());
  if (benchmark::ReportUnrecognizedArguments(args_count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks(reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace ringside::bench

#endif  // RINGSIDE_TESTS_BENCH_BENCH_MAIN_H_
