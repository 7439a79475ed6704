// The real ddpctl binary against a real coordinator process (port 0).

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

std::string DdpctlPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/ddp_coordinator/tools/ddpctl/ddpctl");
}

Result RunDdpctl(const std::string& args) {
  Result result;
  const std::string command = absl::StrCat(DdpctlPath(), " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    result.output.append(buffer, n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class DdpctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::getenv("TEST_TMPDIR");
    process_ =
        std::make_unique<ddp::testing::CoordinatorProcess>(ddp::testing::CoordinatorProcessOptions{
            ddp::testing::CoordinatorBinaryFromRunfiles(),
            dir + "/data",
            dir,
            // Values larger than a gRPC client's default 4 MiB receive limit.
            {"--max-value-bytes=8388608"}});
    ASSERT_TRUE(process_->Start().ok());
    flags_ = absl::StrCat("--coordinator ", process_->address(), " --namespace e2e ");
  }
  Result Ctl(const std::string& args) { return RunDdpctl(flags_ + args); }

  std::unique_ptr<ddp::testing::CoordinatorProcess> process_;
  std::string flags_;
};

TEST_F(DdpctlTest, PutGetListDel_RoundTrip) {
  Result put = Ctl("kv put alpha one");
  EXPECT_EQ(put.exit_code, 0) << put.output;
  EXPECT_THAT(put.output, StartsWith("OK (revision "));
  EXPECT_EQ(Ctl("kv put beta two").exit_code, 0);
  Result get = Ctl("kv get alpha");
  EXPECT_EQ(get.exit_code, 0);
  EXPECT_EQ(get.output, "one\n");
  EXPECT_EQ(Ctl("kv list").output, "alpha = one\nbeta = two\n");
  EXPECT_EQ(Ctl("kv list --keys-only --limit 1").output, "alpha\n");
  Result json = Ctl("--json kv get beta");
  // Text keys and values as text, int64 as numbers (etcdctl -w json's
  // numbers); binary values as base64, marked.
  EXPECT_THAT(json.output, HasSubstr(R"("key":"beta","value":"two","createRevision":2,)"));
  EXPECT_EQ(Ctl(R"cmd(kv put bin "$(printf '\001\377')")cmd").exit_code, 0);
  EXPECT_THAT(Ctl("--json kv get bin").output,
              HasSubstr(R"("key":"bin","value":"Af8=","valueEncoding":"base64",)"));
  Result raw = RunDdpctl(flags_ + "kv get bin --print-value-only | od -An -tx1");
  EXPECT_THAT(raw.output, HasSubstr("01 ff 0a"));
  EXPECT_EQ(Ctl("kv get bin").output, "\"\\x01\\xff\"\n");
  EXPECT_THAT(Ctl("kv del alpha").output, StartsWith("deleted 1 "));
  Result missing = Ctl("kv get alpha");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("NOT_FOUND"));
}

// etcdctl's get --rev: the key as it was then.
TEST_F(DdpctlTest, GetRev_HistoricRead) {
  long long first = 0, second = 0;
  ASSERT_EQ(sscanf(Ctl("kv put lr 0.1").output.c_str(), "OK (revision %lld)", &first), 1);
  ASSERT_EQ(sscanf(Ctl("kv put lr 0.05").output.c_str(), "OK (revision %lld)", &second), 1);
  EXPECT_EQ(Ctl(absl::StrCat("kv get lr --rev ", first)).output, "0.1\n");
  EXPECT_EQ(Ctl(absl::StrCat("kv get lr --rev ", second)).output, "0.05\n");
  EXPECT_EQ(Ctl("kv get lr").output, "0.05\n");
  Result future = Ctl("kv get lr --rev 999999");
  EXPECT_NE(future.exit_code, 0);
  EXPECT_THAT(future.output, HasSubstr("OUT_OF_RANGE"));
  EXPECT_THAT(future.output, HasSubstr("revision 999999 is in the future"));
  Result negative = Ctl("kv get lr --rev -3");
  EXPECT_EQ(negative.exit_code, 2) << negative.output;
  EXPECT_THAT(negative.output, HasSubstr("--rev=-3"));
}

// etcdctl's snapshot save, restored the documented way: the copy as
// coordinator.db of an empty data dir.
TEST_F(DdpctlTest, SnapshotSave_RestoredWithDataDir) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  ASSERT_EQ(Ctl("kv put kept before").exit_code, 0);
  Result saved = Ctl("snapshot save " + dir + "/snap.db");
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  EXPECT_THAT(saved.output, StartsWith("Snapshot saved at " + dir + "/snap.db ("));
  ASSERT_EQ(Ctl("kv put later after").exit_code, 0);
  Result again = Ctl("snapshot save " + dir + "/snap.db");
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_THAT(again.output, HasSubstr("exists"));

  ASSERT_EQ(mkdir((dir + "/restored").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir + "/restored_work").c_str(), 0755), 0);
  {
    std::ifstream from(dir + "/snap.db", std::ios::binary);
    std::ofstream to(dir + "/restored/coordinator.db", std::ios::binary);
    to << from.rdbuf();
    ASSERT_TRUE(to.good());
  }
  ddp::testing::CoordinatorProcess restored(ddp::testing::CoordinatorProcessOptions{
      ddp::testing::CoordinatorBinaryFromRunfiles(), dir + "/restored", dir + "/restored_work"});
  ASSERT_TRUE(restored.Start().ok()) << restored.log_path();
  const std::string on_restored =
      absl::StrCat("--coordinator ", restored.address(), " --namespace e2e ");
  EXPECT_EQ(RunDdpctl(on_restored + "kv get kept").output, "before\n");
  EXPECT_EQ(RunDdpctl(on_restored + "kv get later").exit_code, 1);  // after the snapshot
}

TEST_F(DdpctlTest, AddCasWait_BehaveLikeTcpStore) {
  EXPECT_EQ(Ctl("kv add counter 5").output, "5\n");
  EXPECT_EQ(Ctl("kv add counter -2").output, "3\n");
  EXPECT_EQ(Ctl("kv cas slot '' mine").output, "SUCCESS\nmine\n");
  // Not swapped is not an error (etcdctl's txn: FAILURE, exit 0).
  Result not_swapped = Ctl("kv cas slot other theirs");
  EXPECT_EQ(not_swapped.exit_code, 0);
  EXPECT_EQ(not_swapped.output, "FAILURE\nmine\n");
  EXPECT_THAT(Ctl("kv wait counter slot").output, StartsWith("all 2 keys"));
  Result timeout = Ctl("--timeout 200ms kv wait never");
  EXPECT_EQ(timeout.exit_code, 1) << timeout.output;
  EXPECT_THAT(timeout.output, HasSubstr("DEADLINE_EXCEEDED"));
}

TEST_F(DdpctlTest, PutIfAbsentOnExistingKey_PrintsFailureExitsZeroAsCas) {
  EXPECT_EQ(Ctl("kv put k v").exit_code, 0);
  // RunDdpctl adds 2>&1: the pipe keeps ddpctl's stderr out of the output.
  Result again = RunDdpctl(flags_ + "kv put k w --if-absent 2>/dev/null | cat");
  EXPECT_EQ(again.output, "FAILURE\n");
  Result why = Ctl("kv put k w --if-absent");
  EXPECT_EQ(why.exit_code, 0);
  why = Ctl("kv put k w --expect-revision 99");
  EXPECT_EQ(why.exit_code, 0);
  EXPECT_THAT(why.output, HasSubstr("condition failed: key 'k'"));
  EXPECT_THAT(Ctl("--json kv put k w --if-absent").output, HasSubstr(R"({"succeeded":false,)"));
  EXPECT_EQ(Ctl("kv get k").output, "v\n");
}

TEST_F(DdpctlTest, LeaseGrantKeepaliveRevoke_DeletesAttachedKey) {
  Result grant = Ctl("lease grant 30s");
  ASSERT_EQ(grant.exit_code, 0) << grant.output;
  // The id alone (scripts use $(ddpctl lease grant 30s)).
  ASSERT_THAT(grant.output, ::testing::MatchesRegex("[0-9]+\n"));
  const std::string id = grant.output.substr(0, grant.output.size() - 1);
  const std::string json = Ctl("--json lease grant 30s").output;
  EXPECT_THAT(json, StartsWith(R"({"lease":)"));  // a number, not a string
  EXPECT_THAT(json, Not(HasSubstr(R"("lease":")")));
  EXPECT_THAT(json, HasSubstr(R"(,"ttlMs":30000})"));
  EXPECT_EQ(Ctl(absl::StrCat("kv put leased x --lease ", id)).exit_code, 0);
  EXPECT_THAT(Ctl("lease list").output, HasSubstr(id + "\n"));
  Result ttl = Ctl(absl::StrCat("lease timetolive ", id, " --keys"));
  EXPECT_EQ(ttl.exit_code, 0) << ttl.output;
  EXPECT_THAT(ttl.output,
              StartsWith(absl::StrCat("lease ", id, " granted with TTL(30s), remaining(")));
  EXPECT_THAT(ttl.output, HasSubstr("\n  leased (namespace e2e)\n"));
  EXPECT_THAT(Ctl(absl::StrCat("lease keep-alive ", id, " --once")).output, HasSubstr("renewed"));
  EXPECT_THAT(Ctl(absl::StrCat("lease revoke ", id)).output, HasSubstr("1 keys deleted"));
  EXPECT_EQ(Ctl("kv get leased").exit_code, 1);
  EXPECT_THAT(Ctl(absl::StrCat("lease timetolive ", id)).output, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(Ctl("lease list").output, Not(HasSubstr(id + "\n")));
}

TEST_F(DdpctlTest, WatchFromRevision_ReplaysHistoryUntilStopped) {
  EXPECT_EQ(Ctl("kv put w1 a").exit_code, 0);
  EXPECT_EQ(Ctl("kv put w2 b").exit_code, 0);
  // `timeout -s INT` plays the user's Ctrl-C; ddpctl must then exit 0.
  Result watch = RunDdpctl(absl::StrCat("--coordinator ", process_->address(),
                                        " --namespace e2e kv watch w --prefix --from-revision 1"
                                        " & pid=$!; sleep 1; kill -INT $pid; wait $pid"));
  EXPECT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_THAT(watch.output, HasSubstr("PUT w1 = a (revision "));
  EXPECT_THAT(watch.output, HasSubstr("PUT w2 = b (revision "));
}

TEST_F(DdpctlTest, WatchKey_ExactKeyUnlessPrefix) {
  EXPECT_EQ(Ctl("kv put lr a").exit_code, 0);
  EXPECT_EQ(Ctl("kv put lr2 b").exit_code, 0);
  Result watch = RunDdpctl(absl::StrCat("--coordinator ", process_->address(),
                                        " --namespace e2e kv watch lr --from-revision 1"
                                        " & pid=$!; sleep 1; kill -INT $pid; wait $pid"));
  EXPECT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_THAT(watch.output, HasSubstr("PUT lr = a (revision "));
  EXPECT_THAT(watch.output, Not(HasSubstr("lr2")));
  EXPECT_EQ(Ctl("kv watch").exit_code, 2);
}

TEST_F(DdpctlTest, Compact_ThenWatchFromCompactedRevisionIsOutOfRange) {
  EXPECT_EQ(Ctl("kv put c1 a").exit_code, 0);
  Result put = Ctl("kv put c2 b");
  ASSERT_THAT(put.output, StartsWith("OK (revision "));
  const int64_t rev = std::strtoll(put.output.c_str() + 13, nullptr, 10);
  // History before c2's revision goes: a watch from it still replays c2.
  EXPECT_EQ(Ctl(absl::StrCat("kv compact ", rev)).output,
            absl::StrCat("compacted revision ", rev - 1, "\n"));
  Result replay = RunDdpctl(absl::StrCat(flags_, "kv watch c2 --from-revision ", rev,
                                         " & pid=$!; sleep 1; kill -INT $pid; wait $pid"));
  EXPECT_THAT(replay.output, HasSubstr(absl::StrCat("PUT c2 = b (revision ", rev, ")")));
  Result watch = Ctl(absl::StrCat("kv watch c1 --from-revision ", rev - 1));
  EXPECT_EQ(watch.exit_code, 1);
  EXPECT_THAT(watch.output, HasSubstr("OUT_OF_RANGE"));
  EXPECT_EQ(Ctl("kv compact 0").exit_code, 2);
}

TEST_F(DdpctlTest, ClusterStatus_EndpointStatusTableWithRevisionAndVersion) {
  Result put = Ctl("kv put s 1");
  ASSERT_THAT(put.output, StartsWith("OK (revision "));
  const int64_t rev = std::strtoll(put.output.c_str() + 13, nullptr, 10);
  Result status = Ctl("cluster status");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_THAT(status.output, StartsWith("COORDINATOR "));
  EXPECT_THAT(status.output, HasSubstr(" IS LEADER "));
  EXPECT_THAT(status.output,
              ::testing::ContainsRegex(absl::StrCat(process_->address(), " +single +true +.* ", rev,
                                                    " +[0-9]+ +[0-9]+\\.[0-9]+")))
      << status.output;
}

TEST_F(DdpctlTest, JobsCreateGetListCancel_ShowSettingsAndState) {
  Result create =
      Ctl("jobs create train-1 --nnodes 2:4 --nproc-per-node 8 --max-restarts 3 "
          "--join-timeout 5m --heartbeat-timeout 1500ms --hang-timeout 45s");
  ASSERT_EQ(create.exit_code, 0) << create.output;
  EXPECT_THAT(create.output, StartsWith("train-1: WAITING, generation "));
  Result get = Ctl("jobs get train-1");
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, HasSubstr("state:       WAITING"));
  EXPECT_THAT(get.output, HasSubstr("  nnodes              2:4\n"));
  EXPECT_THAT(get.output, HasSubstr("  nproc-per-node      8\n"));
  EXPECT_THAT(get.output, HasSubstr("  max-restarts        3\n"));
  EXPECT_THAT(get.output, HasSubstr("  join-timeout        5m\n"));
  EXPECT_THAT(get.output, HasSubstr("  heartbeat-timeout   1.5s\n"));
  EXPECT_THAT(get.output, HasSubstr("  hang-timeout        45s\n"));
  // Unset fields took the server's defaults.
  EXPECT_THAT(get.output, HasSubstr("  last-call-timeout   30s\n"));
  EXPECT_THAT(get.output, HasSubstr("restarts:    0/3\n"));
  // Below the hang timeout's minimum: the coordinator names the value and
  // the limit.
  Result short_hang = Ctl("jobs create train-2 --hang-timeout 1s");
  EXPECT_EQ(short_hang.exit_code, 1) << short_hang.output;
  EXPECT_THAT(short_hang.output, HasSubstr("hang_timeout (0 turns it off)=1s is out of range"));
  EXPECT_THAT(short_hang.output, HasSubstr(">= 2s"));

  Result list = Ctl("jobs list");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, StartsWith("JOB      STATE    GENERATION"));
  EXPECT_THAT(list.output, HasSubstr("\ntrain-1  WAITING  "));
  EXPECT_THAT(Ctl("--json jobs list --state waiting").output,
              StartsWith(R"({"jobId":"train-1","settings":{"minNodes":)"));
  EXPECT_EQ(Ctl("jobs list --state RUNNING,FAILED").output,
            "JOB  STATE  GENERATION  RESTARTS  MEMBERS  SPARES\n");

  Result cancel = Ctl("jobs cancel train-1 --reason 'maintenance window'");
  ASSERT_EQ(cancel.exit_code, 0) << cancel.output;
  EXPECT_THAT(cancel.output, StartsWith("train-1: CANCELLED"));
  EXPECT_THAT(Ctl("jobs get train-1").output, HasSubstr("state:       CANCELLED"));
  Result again = Ctl("jobs cancel train-1");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_THAT(again.output, HasSubstr("FAILED_PRECONDITION"));
}

TEST_F(DdpctlTest, JobsGetUnknownJob_ExitsOneNamingIt) {
  Result get = Ctl("jobs get no-such-job");
  EXPECT_EQ(get.exit_code, 1) << get.output;
  EXPECT_THAT(get.output, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(get.output, HasSubstr("no-such-job"));
}

TEST_F(DdpctlTest, JobsWatchCancelledJob_PrintsEventsAndExitsZero) {
  ASSERT_EQ(Ctl("jobs create w-1").exit_code, 0);
  ASSERT_EQ(Ctl("jobs cancel w-1 --reason done-here").exit_code, 0);
  // The stream ends after JOB_FINISHED; a hang would trip the test timeout.
  Result watch = Ctl("jobs watch w-1");
  EXPECT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_THAT(watch.output, StartsWith("#1 "));
  EXPECT_THAT(watch.output, HasSubstr(" JOB_CREATED "));
  EXPECT_THAT(watch.output, HasSubstr(" JOB_FINISHED "));
  Result json = Ctl("--json jobs watch w-1 --from-index 2");
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_THAT(json.output, StartsWith(R"({"jobId":"w-1","index":2,)"));
}

TEST_F(DdpctlTest, BadUsage_ExitsTwo) {
  Result bad = Ctl("kv add counter lots");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("DELTA='lots'"));
  EXPECT_EQ(RunDdpctl("kv nothing").exit_code, 2);
  Result update = Ctl("jobs update j");
  EXPECT_EQ(update.exit_code, 2) << update.output;
  EXPECT_THAT(update.output, HasSubstr("--nnodes MIN:MAX is required"));
  EXPECT_THAT(Ctl("jobs list --state asleep").output, HasSubstr("'asleep'"));
}

TEST_F(DdpctlTest, CoordinatorDown_ExitsThreeNamingAddress) {
  const std::string address = process_->address();
  process_->Kill9();
  Result down = RunDdpctl(absl::StrCat("--coordinator ", address, " --timeout 2s kv get k"));
  EXPECT_EQ(down.exit_code, 3) << down.output;
  EXPECT_THAT(down.output,
              HasSubstr(absl::StrCat("coordinator at ", address, " is not answering")));
}

TEST_F(DdpctlTest, JobsWatchAfterRestart_HistoryFromBeforeTheRestartKept) {
  ASSERT_EQ(Ctl("jobs create w-2").exit_code, 0);
  ASSERT_EQ(process_->Terminate(), 0);
  ASSERT_TRUE(process_->Start().ok());
  // The events before the restart are kept (stored with the job); the
  // cancel makes a new one, numbered after them.
  Result cancel = Ctl("--timeout 20s jobs cancel w-2");
  ASSERT_EQ(cancel.exit_code, 0) << cancel.output;
  Result watch = Ctl("jobs watch w-2");
  EXPECT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_THAT(watch.output, Not(HasSubstr("are no longer kept")));
  EXPECT_THAT(watch.output, HasSubstr(" JOB_CREATED "));
  EXPECT_THAT(watch.output, HasSubstr(" JOB_FINISHED "));
  Result json = Ctl("--json jobs watch w-2 --from-index 1");
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_THAT(json.output, StartsWith(R"({"jobId":"w-2","index":1,)"));
}

TEST_F(DdpctlTest, JobsDelete_RunningNeedsForce_ThenGone) {
  ASSERT_EQ(Ctl("jobs create d-1").exit_code, 0);
  Result refused = Ctl("jobs delete d-1");
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("FAILED_PRECONDITION"));
  Result forced = Ctl("jobs delete d-1 --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_THAT(forced.output, HasSubstr("deleted job d-1"));
  EXPECT_THAT(Ctl("jobs get d-1").output, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Ctl("jobs create d-1").exit_code, 0);  // the id is free again
}

// A scheduler requeueing with a fixed id (Kubeflow, TorchX, Slurm --requeue):
// each CreateJob of the finished id is the next run, and the past ones stay
// visible, across a coordinator restart.
TEST_F(DdpctlTest, JobIdCreatedAgainAfterItFinished_PastRunsListedAndShown) {
  ASSERT_EQ(Ctl("jobs create r-1 --max-restarts 2").exit_code, 0);
  ASSERT_EQ(Ctl("jobs cancel r-1 --reason first-attempt").exit_code, 0);
  Result second = Ctl("jobs create r-1 --max-restarts 5");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output, StartsWith("r-1: WAITING"));
  ASSERT_EQ(process_->Terminate(), 0);
  ASSERT_TRUE(process_->Start().ok());

  Result list = Ctl("--timeout 20s jobs list --all-runs");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  // (Other tests' jobs share the data dir: match the rows, not the widths.)
  EXPECT_THAT(list.output, HasSubstr("  RUN  STATE      GENERATION"));
  EXPECT_THAT(list.output, HasSubstr("  2    WAITING    0           0/5  "));
  EXPECT_THAT(list.output, HasSubstr("  1    CANCELLED  0           0/2  "));
  EXPECT_THAT(Ctl("jobs list").output, Not(HasSubstr("0/2")));
  Result current = Ctl("jobs get r-1");
  EXPECT_THAT(current.output, HasSubstr("run:         2\n"));
  EXPECT_THAT(current.output, HasSubstr("restarts:    0/5\n"));
  Result past = Ctl("jobs get r-1 --run 1");
  ASSERT_EQ(past.exit_code, 0) << past.output;
  EXPECT_THAT(past.output, HasSubstr("run:         1\n"));
  EXPECT_THAT(past.output, HasSubstr("state:       CANCELLED (cancelled: first-attempt)"));
  EXPECT_THAT(past.output, HasSubstr("restarts:    0/2\n"));
  EXPECT_THAT(past.output, HasSubstr("finished:    "));
  EXPECT_THAT(Ctl("--json jobs get r-1 --run 1").output, HasSubstr(R"("run":1)"));
  Result missing = Ctl("jobs get r-1 --run 9");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("has no run 9; runs kept: 1..1 (past) and 2 (current)"));
  EXPECT_EQ(Ctl("jobs get r-1 --run 0").exit_code, 2);
}

TEST_F(DdpctlTest, BadCoordinatorAddress_ExitsTwoNamingValueAndLimit) {
  Result bad = RunDdpctl("--coordinator 127.0.0.1:99999 kv get k");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("'127.0.0.1:99999'"));
  EXPECT_THAT(bad.output, HasSubstr("[1, 65535]"));
}

TEST_F(DdpctlTest, ValueOverFourMebibytes_ReadsBack) {
  // Written through the API (a command line cannot carry 5 MiB), read by ddpctl.
  auto stub = ddp::v1::KeyValueService::NewStub(
      grpc::CreateChannel(process_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  ddp::v1::PutRequest put;
  put.set_namespace_("e2e");
  put.set_key("big");
  put.set_value(std::string(5 << 20, 'x'));
  ddp::v1::PutResponse response;
  grpc::Status status = stub->Put(&context, put, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  Result get = Ctl("kv get big");
  EXPECT_EQ(get.exit_code, 0) << get.output.substr(0, 300);
  EXPECT_EQ(get.output.size(), (5u << 20) + 1);
}

}  // namespace
