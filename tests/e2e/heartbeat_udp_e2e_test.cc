// Heartbeats over UDP end to end: the coordinator binary with --heartbeat-udp,
// two ddp-client processes, real PyTorch workers over gloo. The agents'
// heartbeats, their workers' states included, go as datagrams (the
// coordinator's /metrics counts them), a
// worker failure restarts the group as without UDP, and a coordinator killed
// and restarted (new session keys: the old datagrams are dropped) costs no
// worker restart.

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

class HeartbeatUdpE2eTest : public TrainingE2eTest {
 protected:
  void StartUdpCoordinator() {
    coordinator_args_ = {"--heartbeat-udp", "--http-port-file=" + Path("http_port")};
    StartCoordinator();
  }

  // The value of a /metrics sample line that starts with `series`, or -1.
  int64_t Metric(const std::string& series) {
    const std::string port =
        std::string(absl::StripAsciiWhitespace(ReadWholeFile(Path("http_port"))));
    const ShellResult scrape = RunShell("curl -s http://127.0.0.1:" + port + "/metrics");
    for (absl::string_view line : absl::StrSplit(scrape.output, '\n')) {
      double value = 0;
      if (absl::ConsumePrefix(&line, series + " ") && absl::SimpleAtod(line, &value)) {
        return static_cast<int64_t>(value);
      }
    }
    return -1;
  }
};

TEST_F(HeartbeatUdpE2eTest, WorkerExitsOne_GroupRestarts_HeartbeatsWentOverUdp) {
  StartUdpCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--max-restarts", "2"};
  const std::vector<std::string> train =
      Train(12, "0.2", {"--fail-at-step", "7", "--fail-rank", "2"});
  AgentProcess& a = StartAgent("node-a", launch, train);
  AgentProcess& b = StartAgent("node-b", launch, train);
  ASSERT_TRUE(WaitForLog("step 0 loss")) << Logs();
  EXPECT_TRUE(PollUntil(
      [&] { return Metric("ddp_heartbeat_datagrams_total{result=\"accepted\"}") > 4; }, kBound))
      << "no heartbeats over UDP while training\n"
      << Logs();
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  const std::string logs = Logs();
  EXPECT_TRUE(absl::StrContains(logs, "rank 2 failing on purpose at step 7")) << logs;
  EXPECT_TRUE(absl::StrContains(logs, "heartbeat_channel { udp_port: ")) << logs;
  EXPECT_FALSE(absl::StrContains(logs, "key:")) << "a heartbeat key in a log\n" << logs;
  EXPECT_FALSE(absl::StrContains(logs, "heartbeat datagrams in a row")) << logs;
  EXPECT_EQ(Metric("ddp_heartbeat_datagrams_total{result=\"dropped\"}"), 0);
  // The coordinator kept up: nothing dropped unread (a count it reads from the kernel).
  EXPECT_EQ(Metric("ddp_heartbeat_datagrams_total{result=\"overflowed\"}"), 0);
  // The workers' states went as datagrams too: each agent's at least once in
  // each of the two generations.
  EXPECT_GE(Metric("ddp_heartbeat_datagram_states_total{result=\"taken\"}"), 4) << logs;
  ExpectTrainedTogether(4, 1);
}

TEST_F(HeartbeatUdpE2eTest, CoordinatorKilled9AndRestarted_NoWorkerRestart) {
  StartUdpCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--rdzv-conf", "heartbeat_timeout=6"};
  AgentProcess& a = StartAgent("node-a", launch, Train(24, "0.25"));
  AgentProcess& b = StartAgent("node-b", launch, Train(24, "0.25"));
  ASSERT_TRUE(WaitForLog("step 0 loss")) << Logs();
  ASSERT_FALSE(AnyResult()) << "training ended before the kill";
  coordinator_->Kill9();
  ASSERT_TRUE(coordinator_->Start().ok());  // same dir and ports: the UDP port too
  // The resumed sessions heartbeat over UDP again, with new keys.
  ASSERT_TRUE(PollUntil(
      [&] { return Metric("ddp_heartbeat_datagrams_total{result=\"accepted\"}") > 4; }, kBound))
      << Logs();
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  EXPECT_TRUE(absl::StrContains(a.log(), "session resumed")) << a.log();
  EXPECT_TRUE(absl::StrContains(b.log(), "session resumed")) << b.log();
  ExpectEveryRankStartedOnce(4);
}

}  // namespace
}  // namespace ddp::testing
