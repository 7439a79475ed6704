#include "common/version.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::MatchesRegex;

TEST(VersionTest, VersionLine_NamesProgramVersionAndMode) {
  EXPECT_EQ(VersionLine("ddpctl"), std::string("ddpctl ") + kVersion + " (" + BuildMode() + " build)");
  EXPECT_THAT(std::string(kVersion), MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
}

TEST(VersionTest, BuildMode_FollowsNdebug) {
#ifdef NDEBUG
  EXPECT_STREQ(BuildMode(), "release");
#else
  EXPECT_STREQ(BuildMode(), "development");
#endif
}

}  // namespace
}  // namespace ddp
