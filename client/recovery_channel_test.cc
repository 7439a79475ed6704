#include "client/recovery_channel.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

std::string TempDir() {
  char pattern[] = "/tmp/recovery_channel_test_XXXXXX";
  return mkdtemp(pattern);
}

void WriteState(const std::string& dir, const std::string& text) {
  FILE* f = std::fopen((dir + "/state").c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

TEST(ParseRecoveryReport_Test, ParseRecoveryReport_RunningAndParked_Parsed) {
  absl::StatusOr<RecoveryReport> running = ParseRecoveryReport("running 4 1234\n");
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->state, RecoveryReport::State::kRunning);
  EXPECT_EQ(running->generation, 4);
  EXPECT_EQ(running->pid, 1234);
  absl::StatusOr<RecoveryReport> parked = ParseRecoveryReport("parked 7 99");
  ASSERT_TRUE(parked.ok()) << parked.status();
  EXPECT_EQ(parked->state, RecoveryReport::State::kParked);
}

TEST(ParseRecoveryReport_Test, ParseRecoveryReport_Malformed_InvalidArgumentNamesIt) {
  for (const char* text :
       {"", "sleeping 1 2", "running x 2", "running 1 0", "running 1", "parked 1 2 3"}) {
    absl::StatusOr<RecoveryReport> report = ParseRecoveryReport(text);
    EXPECT_TRUE(absl::IsInvalidArgument(report.status())) << text;
  }
  EXPECT_NE(ParseRecoveryReport("sleeping 1 2").status().message().find("sleeping"),
            std::string::npos);
}

TEST(RecoveryMessages_Test, JoinMessage_OnlyGenerationVariables_Escaped) {
  EnvMap env{{"RANK", "3"}, {"MASTER_ADDR", "h\"x\\y\n"}, {"PATH", "/bin"}, {"LOCAL_RANK", "1"}};
  EXPECT_EQ(JoinMessage(5, env),
            "{\"op\":\"join\",\"generation\":5,\"env\":{\"MASTER_ADDR\":\"h\\\"x\\\\y\\u000a\","
            "\"RANK\":\"3\"}}\n");
  EXPECT_EQ(AbandonMessage(4), "{\"op\":\"abandon\",\"generation\":4}\n");
}

TEST(RecoveryChannel_Test, Send_NoReader_FailedPrecondition) {
  absl::StatusOr<RecoveryChannel> channel = RecoveryChannel::Open(TempDir() + "/rank0");
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_TRUE(absl::IsFailedPrecondition(channel->Send(AbandonMessage(1))));
}

TEST(RecoveryChannel_Test, Send_WorkerReads_LineArrives) {
  absl::StatusOr<RecoveryChannel> channel = RecoveryChannel::Open(TempDir() + "/rank0");
  ASSERT_TRUE(channel.ok()) << channel.status();
  // The worker opens its end read-write (never blocks, never sees EOF).
  const int reader = open((channel->dir() + "/control").c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(channel->Send(AbandonMessage(2)).ok());
  char buffer[128];
  const ssize_t n = read(reader, buffer, sizeof(buffer));
  close(reader);
  EXPECT_EQ(std::string(buffer, n > 0 ? n : 0), AbandonMessage(2));
}

TEST(RecoveryChannel_Test, Read_StateWrittenThenReset_ReportThenNone) {
  absl::StatusOr<RecoveryChannel> channel = RecoveryChannel::Open(TempDir() + "/rank1");
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_FALSE(channel->Read().has_value());
  WriteState(channel->dir(), "parked 3 42\n");
  std::optional<RecoveryReport> report = channel->Read();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->state, RecoveryReport::State::kParked);
  EXPECT_EQ(report->generation, 3);
  channel->Reset();
  EXPECT_FALSE(channel->Read().has_value());
  WriteState(channel->dir(), "garbage");
  EXPECT_FALSE(channel->Read().has_value());
  // Opened again (the agent restarted the slot): the FIFO is kept.
  EXPECT_TRUE(RecoveryChannel::Open(channel->dir()).ok());
}

}  // namespace
}  // namespace ddp::client
