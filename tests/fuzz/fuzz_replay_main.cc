// Runs a libFuzzer target without libFuzzer (any compiler), as a test: every
// file of the seed corpus, then a few thousand deterministic mutations of
// them. `tools/fuzz.sh` runs the real fuzzers (clang-14, libFuzzer, ASan,
// UBSan); this keeps the targets building and the corpus passing in the
// README's test command.
//
//   <test> CORPUS_DIR [MUTATIONS]

#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> ReadCorpus(const std::string& dir) {
  std::vector<std::string> inputs;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return inputs;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    std::ifstream in(dir + "/" + name, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    inputs.push_back(text.str());
  }
  closedir(d);
  return inputs;
}

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS]\n", argv[0]);
    return 2;
  }
  const std::vector<std::string> corpus = ReadCorpus(argv[1]);
  if (corpus.empty()) {
    std::fprintf(stderr, "no seed inputs in %s\n", argv[1]);
    return 1;
  }
  for (const std::string& input : corpus) Run(input);
  const int mutations = argc > 2 ? std::atoi(argv[2]) : 5000;
  std::mt19937 random(12345);
  for (int i = 0; i < mutations; ++i) {
    std::string input = corpus[random() % corpus.size()];
    const int edits = 1 + random() % 4;
    for (int e = 0; e < edits; ++e) {
      const size_t at = input.empty() ? 0 : random() % input.size();
      switch (random() % 4) {
        case 0:  // flip a byte
          if (!input.empty()) input[at] = static_cast<char>(random());
          break;
        case 1:  // insert a byte
          input.insert(input.begin() + at, static_cast<char>(random()));
          break;
        case 2:  // erase a span
          if (!input.empty()) input.erase(at, 1 + random() % 8);
          break;
        default:  // duplicate a span
          input.insert(at, input.substr(at, random() % 16));
      }
    }
    Run(input);
  }
  std::printf("%zu seed inputs and %d mutations ran clean\n", corpus.size(), mutations);
  return 0;
}
