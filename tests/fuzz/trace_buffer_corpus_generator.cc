// Writes the seed corpus of trace_buffer_fuzzer: scripts that start from
// meaningful operations, so the fuzzer begins with deep coverage.
//
//   trace_buffer_corpus_generator OUT_DIR [COUNT]

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<uint8_t> Script(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> s;
  s.push_back(static_cast<uint8_t>(rng()));                              // Buffer size.
  s.push_back(static_cast<uint8_t>(seed % 8 == 0 ? 0 : 1 + rng() % 7));  // Policy.
  for (int i = 0; i < 6; i++) {  // Chunk sizes, some with a first ChunkID above 0.
    s.push_back(static_cast<uint8_t>((rng() % 4 == 0 ? rng() % 16 : 0) << 4 | rng() % 16));
  }
  const int operations = 10 + static_cast<int>(rng() % 60);
  for (int i = 0; i < operations; i++) {
    const uint8_t op = static_cast<uint8_t>(rng() % 12);
    s.push_back(op);
    s.push_back(static_cast<uint8_t>(rng() % 6));
    switch (op) {
      case 0: {  // Write: count, then sizes.
        const uint8_t count = static_cast<uint8_t>(rng() % 4);
        s.push_back(count);
        for (int k = 0; k <= count; k++) {
          const uint16_t size = static_cast<uint16_t>(rng() % 1200);
          s.push_back(static_cast<uint8_t>(size));
          s.push_back(static_cast<uint8_t>(size >> 8));
        }
        break;
      }
      case 5:
        s.push_back(static_cast<uint8_t>(rng()));
        s.push_back(static_cast<uint8_t>(rng()));
        break;
      case 8: {  // Hostile commit: writer, id, flags, complete, fragments, size, bytes.
        for (int k = 0; k < 6; k++) s.push_back(static_cast<uint8_t>(rng()));
        const uint16_t size = static_cast<uint16_t>(rng() % 200);
        s.push_back(static_cast<uint8_t>(size));
        s.push_back(static_cast<uint8_t>(size >> 8));
        for (int k = 0; k < size; k++) s.push_back(static_cast<uint8_t>(rng()));
        break;
      }
      case 6:
      case 7:
      case 10:
      case 11:
        break;
      default:
        s.push_back(static_cast<uint8_t>(rng()));
        break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [COUNT]\n", argv[0]);
    return 2;
  }
  const int count = argc > 2 ? std::atoi(argv[2]) : 64;
  for (int i = 0; i < count; i++) {
    const std::vector<uint8_t> script = Script(static_cast<uint32_t>(i));
    const std::string path = std::string(argv[1]) + "/seed_" + std::to_string(i);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
      std::perror(path.c_str());
      return 1;
    }
    std::fwrite(script.data(), 1, script.size(), f);
    std::fclose(f);
  }
  return 0;
}
