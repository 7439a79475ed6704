#include "common/logging.h"

#include <unistd.h>

#include <algorithm>

#include "common/log_file.h"
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
  EXPECT_EQ(out[4], '-');                // 2026-...
  EXPECT_EQ(out.find('Z'), 26u) << out;  // ...T00:00:00.000000Z
}

TEST(LoggingTest, Log_BelowMinLevel_IsDropped) {
  SetMinLogLevel(LogLevel::kError);
  testing::internal::CaptureStderr();
  DDP_LOG(INFO) << "hidden";
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  SetMinLogLevel(LogLevel::kInfo);
}

TEST(LoggingTest, LogFile_KeepsLinesTheQuieterConsoleDrops) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  SetMinLogLevel(LogLevel::kWarning);
  SetLogFile(fds[1], LogLevel::kInfo);
  testing::internal::CaptureStderr();
  DDP_LOG(DEBUG) << "nowhere";
  DDP_LOG(INFO) << "file only";
  DDP_LOG(WARNING) << "both";
  const std::string console = testing::internal::GetCapturedStderr();
  SetLogFile(-1, LogLevel::kInfo);
  SetMinLogLevel(LogLevel::kInfo);
  close(fds[1]);
  std::string file;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) file.append(buffer, n);
  close(fds[0]);
  EXPECT_EQ(console.find("file only"), std::string::npos) << console;
  EXPECT_NE(console.find("] both\n"), std::string::npos) << console;
  EXPECT_EQ(file.find("nowhere"), std::string::npos) << file;
  EXPECT_NE(file.find("] file only\n"), std::string::npos) << file;
  EXPECT_NE(file.find("] both\n"), std::string::npos) << file;
}

TEST(LoggingTest, LogEveryNSec_RepeatedCalls_OneLineThenCountOfSuppressed) {
  testing::internal::CaptureStderr();
  for (int i = 0; i < 50; ++i) DDP_LOG_EVERY_N_SEC(WARNING, 0.3) << "disk full";
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  usleep(350 * 1000);
  testing::internal::CaptureStderr();
  DDP_LOG_EVERY_N_SEC(WARNING, 0.3) << "disk full";
  out = testing::internal::GetCapturedStderr();
  // Another call site: its own budget; this one was reached 50 times above.
  EXPECT_NE(out.find("disk full"), std::string::npos) << out;
}

TEST(LoggingTest, LogRateLimit_CountsSuppressed) {
  LogRateLimit limit(60);
  int64_t suppressed = -1;
  EXPECT_TRUE(limit.Allow(&suppressed));
  EXPECT_EQ(suppressed, 0);
  EXPECT_FALSE(limit.Allow(&suppressed));
  EXPECT_FALSE(limit.Allow(&suppressed));
  LogRateLimit fast(0.0);
  EXPECT_TRUE(fast.Allow(&suppressed));
  EXPECT_TRUE(fast.Allow(&suppressed));
  EXPECT_EQ(suppressed, 0);
}

TEST(LoggingDeathTest, Check_Fails_Aborts) {
  EXPECT_DEATH({ DDP_CHECK(1 + 1 == 3) << "math"; }, "Check failed: 1 \\+ 1 == 3 math");
}

}  // namespace
}  // namespace ddp
