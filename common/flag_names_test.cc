#include "common/flag_names.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

std::vector<std::string> Normalize(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  std::vector<std::string> storage;
  std::vector<char*> out = NormalizeFlagNames(static_cast<int>(argv.size()), argv.data(), &storage);
  return std::vector<std::string>(out.begin(), out.end());
}

TEST(NormalizeFlagNames, DashesInNamesOnly) {
  EXPECT_THAT(
      Normalize({"my-prog", "--data-dir=/a-b", "--log-level", "debug-x", "-v", "--", "--keep-me"}),
      ::testing::ElementsAre("my-prog", "--data_dir=/a-b", "--log_level", "debug-x", "-v", "--",
                             "--keep_me"));
}

TEST(NormalizeFlagNames, UnderscoreSpellingUnchanged) {
  EXPECT_THAT(Normalize({"p", "--port_file=x", "--port=1"}),
              ::testing::ElementsAre("p", "--port_file=x", "--port=1"));
}

}  // namespace
}  // namespace ddp
