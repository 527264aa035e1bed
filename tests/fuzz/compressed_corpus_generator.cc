// Writes the trace-file fuzzer's compressed seeds: a plain seed trace
// (argv[1]) with its packets in Perfetto's compressed packets, once per
// codec, as argv[2] (zstd) and argv[3] (deflate). `make fuzz-corpus`.

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "agent/tracefile/packet_compression.h"

namespace {

bool Write(const std::string& plain, ringside::agent::PacketCodec codec, const char* path) {
  absl::StatusOr<std::unique_ptr<ringside::agent::PacketCompressor>> c =
      ringside::agent::PacketCompressor::Create({codec, 0});
  std::string out;
  if (!c.ok() || !(*c)->Compress(plain, &out).ok()) return false;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PLAIN_SEED ZSTD_OUT DEFLATE_OUT\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::string plain((std::istreambuf_iterator<char>(in)), {});
  if (plain.empty() || !Write(plain, ringside::agent::PacketCodec::kZstd, argv[2]) ||
      !Write(plain, ringside::agent::PacketCodec::kDeflate, argv[3])) {
    std::fprintf(stderr, "%s: cannot compress %s\n", argv[0], argv[1]);
    return 1;
  }
  return 0;
}
