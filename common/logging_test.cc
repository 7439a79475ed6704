#include "common/logging.h"

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(LoggingTest, ParseLogLevel_AcceptsKnownNames) {
  LogLevel level = LogLevel::kInfo;
  EXPECT_TRUE(ParseLogLevel("DEBUG", &level));
  EXPECT_EQ(level, LogLevel::kDebug);
  EXPECT_TRUE(ParseLogLevel("warning", &level));
  EXPECT_EQ(level, LogLevel::kWarning);
  EXPECT_FALSE(ParseLogLevel("loud", &level));
  EXPECT_EQ(level, LogLevel::kWarning);
}

TEST(LoggingTest, Log_WritesTimestampLevelAndLocation) {
  testing::internal::CaptureStderr();
  DDP_LOG(WARNING) << "disk is " << 93 << "% full";
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find(" W common/logging_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find("] disk is 93% full\n"), std::string::npos) << out;
  EXPECT_EQ(out[4], '-');   // 2026-...
  EXPECT_EQ(out.find('Z'), 26u) << out;  // ...T00:00:00.000000Z
}

TEST(LoggingTest, Log_BelowMinLevel_IsDropped) {
  SetMinLogLevel(LogLevel::kError);
  testing::internal::CaptureStderr();
  DDP_LOG(INFO) << "hidden";
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  SetMinLogLevel(LogLevel::kInfo);
}

TEST(LoggingDeathTest, Check_Fails_Aborts) {
  EXPECT_DEATH({ DDP_CHECK(1 + 1 == 3) << "math"; }, "Check failed: 1 \\+ 1 == 3 math");
}

}  // namespace
}  // namespace ddp
