#include "client/std_streams.h"

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

TEST(StdSpecTest, Parse_SingleDigit_AppliesToEveryRank) {
  auto spec = StdSpec::Parse("3");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ForRank(0), Std::kAll);
  EXPECT_EQ(spec->ForRank(7), Std::kAll);
  EXPECT_EQ(spec->ToString(), "3");
}

TEST(StdSpecTest, Parse_PerRank_UnnamedRanksGetNone) {
  auto spec = StdSpec::Parse("0:1,1:2");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ForRank(0), Std::kOut);
  EXPECT_EQ(spec->ForRank(1), Std::kErr);
  EXPECT_EQ(spec->ForRank(2), Std::kNone);
  EXPECT_EQ(spec->ToString(), "0:1,1:2");
}

TEST(StdSpecTest, Parse_Malformed_InvalidArgumentNamingText) {
  for (const char* bad : {"", "4", "x", "0:", ":1", "0:1,0:2", "-1:1", "0:5", "1,2", "0:1:2"}) {
    auto spec = StdSpec::Parse(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(spec.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << spec.status();
  }
}

TEST(StdTest, Includes_Bits_MatchTorchrun) {
  EXPECT_TRUE(IncludesStdout(Std::kOut));
  EXPECT_FALSE(IncludesStderr(Std::kOut));
  EXPECT_TRUE(IncludesStderr(Std::kErr));
  EXPECT_TRUE(IncludesStdout(Std::kAll) && IncludesStderr(Std::kAll));
  EXPECT_FALSE(IncludesStdout(Std::kNone) || IncludesStderr(Std::kNone));
}

}  // namespace
}  // namespace ddp::client
