#include "client/preemption_notice.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

std::string TempDir() {
  std::string dir = "/tmp/preemption_notice_testXXXXXX";
  if (const char* t = getenv("TEST_TMPDIR")) dir = std::string(t) + "/notice_XXXXXX";
  return mkdtemp(dir.data());
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(WritePreemptionNotice, WritesJsonWithEscapedStrings) {
  const std::string path = TempDir() + "/notice.json";
  PreemptionNotice notice{"node-2", absl::FromUnixMillis(1700000000123), "say \"bye\"\n", 4};
  ASSERT_TRUE(WritePreemptionNotice(path, notice).ok());
  EXPECT_EQ(Read(path),
            "{\"node_id\": \"node-2\", \"leave_at_unix_ms\": 1700000000123, \"reason\": "
            "\"say \\\"bye\\\"\\u000a\", \"generation\": 4}\n");
}

TEST(WritePreemptionNotice, MissingDirectory_InternalNamesPath) {
  absl::Status status = WritePreemptionNotice("/nonexistent-dir/notice.json", {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("/nonexistent-dir/notice.json"), std::string::npos) << status;
}

TEST(AllReadyToLeave, EveryFileMustExist) {
  const std::string dir = TempDir();
  const std::vector<std::string> files = {dir + "/0", dir + "/1"};
  EXPECT_FALSE(AllReadyToLeave({}));
  EXPECT_FALSE(AllReadyToLeave(files));
  Write(files[0], "");
  EXPECT_FALSE(AllReadyToLeave(files));
  Write(files[1], "");
  EXPECT_TRUE(AllReadyToLeave(files));
}

TEST(ReadCloudNotice, AbsentNumberOrOtherContent) {
  const std::string path = TempDir() + "/cloud-notice";
  EXPECT_FALSE(ReadCloudNotice(path, absl::Seconds(30)).has_value());
  Write(path, "");
  EXPECT_EQ(ReadCloudNotice(path, absl::Seconds(30)), absl::Seconds(30));
  Write(path, " 90\n");
  EXPECT_EQ(ReadCloudNotice(path, absl::Seconds(30)), absl::Seconds(90));
  Write(path, "{\"action\": \"terminate\"}");
  EXPECT_EQ(ReadCloudNotice(path, absl::Seconds(30)), absl::Seconds(30));
  Write(path, "999999999");
  EXPECT_EQ(ReadCloudNotice(path, absl::Seconds(30)), kMaxCloudNoticeGrace);
  Write(path, "-5");
  EXPECT_EQ(ReadCloudNotice(path, absl::Seconds(30)), absl::Seconds(30));
}

}  // namespace
}  // namespace ddp::client
