// A node cut off from the coordinator, with real processes: the coordinator
// binary, two ddp-client processes, one of them behind a TcpProxy that goes
// silent (no FIN, no RST: a partition), and Python workers that append
// "generation group-rank time" lines to one shared file. No two generations
// may write at the same time: the cut-off node's agent freezes its workers
// (SIGSTOP) when its lease runs out, before the coordinator declares the node
// lost and starts the next generation without it (issue 8.6), and kills them
// when it learns, on its way back, that another generation began (issue 22).

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/tcp_proxy.h"
#include "tests/e2e/training_fixture.h"
#include "tests/ha/ha_cluster.h"
#include "tests/ha/network_namespace.h"

namespace ddp::testing {
namespace {

struct Write {
  int generation = 0;
  std::string node;
  int64_t time_ns = 0;
  bool current = false;  // generation_is_current() just before the write
};

std::string Dirname(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::vector<Write> ParseWrites(const std::string& text) {
  std::vector<Write> writes;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    Write w;
    if (fields.size() == 4 && absl::SimpleAtoi(fields[0], &w.generation) &&
        absl::SimpleAtoi(fields[2], &w.time_ns)) {
      w.node = fields[1];
      w.current = fields[3] == "1";
      writes.push_back(w);
    }
  }
  return writes;
}

// (first, last) write time of each generation.
std::map<int, std::pair<int64_t, int64_t>> SpanByGeneration(const std::vector<Write>& writes) {
  std::map<int, std::pair<int64_t, int64_t>> spans;
  for (const Write& w : writes) {
    auto [it, added] = spans.emplace(w.generation, std::make_pair(w.time_ns, w.time_ns));
    it->second.first = std::min(it->second.first, w.time_ns);
    it->second.second = std::max(it->second.second, w.time_ns);
  }
  return spans;
}

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

class PartitionE2eTest : public TrainingE2eTest {
 protected:
  // A node of job "cut" with one Python worker that writes a line every 50 ms
  // until the file "finish" exists, and keeps a copy of its lease file.
  AgentProcess& StartNode(const std::string& node, const std::string& coordinator) {
    // Python with no child processes: a shell's finished children would be
    // left as zombies of this test (a subreaper) and keep the group alive.
    // Each line also says whether examples/train_ddp.py's worker-side check
    // (generation_is_current, on DDP_LEASE_FILE) lets the generation act.
    const std::string script = absl::StrCat(
        "import os, sys, time\n"
        "sys.path.insert(0, '",
        Dirname(Runfile("examples/train_ddp.py")),
        "')\n"
        "from train_ddp import generation_is_current\n"
        "g, r = os.environ['DDP_GENERATION'], '",
        node,
        "'\n"
        "i = 0\n"
        "while not os.path.exists('finish'):\n"
        "    i += 1\n"
        "    ok = int(generation_is_current())\n"
        "    with open('writes', 'a') as f: f.write(f'{g} {r} {time.time_ns()} {ok}\\n')\n"
        "    if i == 20:\n"
        "        with open(os.environ['DDP_LEASE_FILE']) as src, "
        "open(f'lease_g{g}_{r}', 'w') as dst: dst.write(src.read())\n"
        "    time.sleep(0.05)\n");
    AgentArgsOptions options = AgentOptions(node);
    options.coordinator = coordinator;
    options.job = "cut";
    options.rdzv_conf = "heartbeat_timeout=3,last_call_timeout=1,join_timeout=60";
    options.nnodes = "1:2";
    options.nproc_per_node = 1;
    options.max_restarts = 0;
    options.connect_timeout_s = 30;
    options.shutdown_timeout_s = 3;
    options.no_python = true;
    options.entrypoint = {"/bin/sh", "-c",
                          absl::StrCat("cd ", dir_, " && exec /usr/bin/python3 -c \"$0\""), script};
    return Launch(node, AgentArgs(options));
  }
  // node-a reaches the coordinator directly, node-b through a proxy (its
  // silence cuts node-b off); generation 1 runs on both.
  void StartNodeBBehindAProxy() {
    StartCoordinator();
    absl::StatusOr<std::unique_ptr<TcpProxy>> proxy = TcpProxy::Start(coordinator_->port());
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = std::move(*proxy);
    StartNode("node-a", coordinator_->address());
    StartNode("node-b", proxy_->address());
    ASSERT_TRUE(WaitForGeneration(1, 2)) << Logs();
  }
  // Both nodes reach the coordinator through one proxy (its silence is a
  // coordinator outage as they see it); generation 1 runs on both.
  void StartBothBehindOneProxy() {
    StartCoordinator();
    absl::StatusOr<std::unique_ptr<TcpProxy>> proxy = TcpProxy::Start(coordinator_->port());
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = std::move(*proxy);
    StartNode("node-a", proxy_->address());
    StartNode("node-b", proxy_->address());
    ASSERT_TRUE(WaitForGeneration(1, 2)) << Logs();
  }
  // Every write of a generation comes before every write of a later one.
  void ExpectGenerationsNeverOverlap() const {
    const auto spans = SpanByGeneration(Writes());
    EXPECT_GE(spans.size(), 2u) << ReadWholeFile(Path("writes"));
    for (auto older = spans.begin(); older != spans.end(); ++older) {
      for (auto newer = std::next(older); newer != spans.end(); ++newer) {
        EXPECT_LT(older->second.second, newer->second.first)
            << "generation " << older->first << " wrote after generation " << newer->first
            << " began\n"
            << ReadWholeFile(Path("writes"));
      }
    }
  }
  std::vector<Write> Writes() const { return ParseWrites(ReadWholeFile(Path("writes"))); }
  // True once a generation >= `g` has written lines from `nodes` nodes.
  bool WaitForGeneration(int g, int nodes) {
    return PollUntil(
        [&] {
          std::map<int, std::set<std::string>> seen;
          for (const Write& w : Writes()) {
            if (w.generation >= g) seen[w.generation].insert(w.node);
          }
          for (const auto& [generation, writers] : seen) {
            if (static_cast<int>(writers.size()) >= nodes) return true;
          }
          return false;
        },
        kBound);
  }
  // node-b, cut off at `cut_at` and healed since, joins generation 3 with
  // node-a; the job finishes. No two generations wrote at once, and node-b's
  // worker of generation 1 froze within its lease of the cut (it never wrote
  // again: killed, not thawed, on its way back).
  // `froze_within`: the bound on node-b's last write of generation 1 after
  // the cut (its lease, or keepalive when only TCP was cut under UDP
  // heartbeats).
  void FinishAfterNodeBCameBack(AgentProcess& a, AgentProcess& b, int64_t cut_at,
                                double froze_within_s = 3.0) {
    ASSERT_TRUE(WaitForGeneration(3, 2)) << Logs();
    ASSERT_EQ(mkdir(Path("finish").c_str(), 0755), 0);
    EXPECT_EQ(a.Wait(kBound), 0) << Logs();
    EXPECT_EQ(b.Wait(kBound), 0) << Logs();
    ExpectGenerationsNeverOverlap();
    int64_t b_last_g1 = 0;
    for (const Write& w : Writes()) {
      if (w.generation == 1 && w.node == "node-b") b_last_g1 = std::max(b_last_g1, w.time_ns);
    }
    EXPECT_LT((b_last_g1 - cut_at) / 1e9, froze_within_s) << ReadWholeFile(Path("writes"));
    EXPECT_TRUE(absl::StrContains(b.log(), "lease of generation 1 ran out")) << b.log();
  }
  std::unique_ptr<TcpProxy> proxy_;
};

// Heartbeats on the streams (--heartbeat-udp=false): the proxy's silence
// cuts everything node-b says, and its lease freezes its worker within 3 s.
TEST_F(PartitionE2eTest, CutOffNodeFreezesItsWorkersBeforeTheNextGenerationRuns) {
  coordinator_args_ = {"--heartbeat-udp=false"};
  ASSERT_NO_FATAL_FAILURE(StartNodeBBehindAProxy());
  AgentProcess& a = *agents_[0];
  AgentProcess& b = *agents_[1];
  // Let the lease file of generation 1 be written: it says the generation is
  // current, until when on CLOCK_MONOTONIC.
  ASSERT_TRUE(PollUntil([&] { return !ReadWholeFile(Path("lease_g1_node-b")).empty(); }, kBound));
  EXPECT_TRUE(
      absl::StrContains(ReadWholeFile(Path("lease_g1_node-b")),
                        "{\"generation\": 1, \"current\": true, \"valid_until_monotonic\": "))
      << ReadWholeFile(Path("lease_g1_node-b"));

  const int64_t cut_at = NowNs();
  proxy_->SetPartitioned(true);
  // node-b's lease (2 s) runs out and its worker freezes; the coordinator
  // declares node-b lost after heartbeat_timeout (3 s); node-a goes on alone.
  ASSERT_TRUE(WaitForGeneration(2, 1)) << Logs();
  absl::SleepFor(absl::Seconds(1));  // node-a alone for a while
  proxy_->SetPartitioned(false);
  // node-b comes back: its frozen worker of generation 1 is killed, never
  // running again, and node-b joins a generation with both nodes.
  ASSERT_TRUE(WaitForGeneration(3, 2)) << Logs();
  ASSERT_EQ(mkdir(Path("finish").c_str(), 0755), 0);
  // --max-restarts 0: a charged restart would have failed the job.
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();

  ExpectGenerationsNeverOverlap();
  const std::vector<Write> writes = Writes();
  const auto spans = SpanByGeneration(writes);
  int64_t b_last_g1 = 0;
  bool b_last_g1_current = true;
  for (const Write& w : writes) {
    if (w.generation != 1 || w.node != "node-b") continue;
    // Before the cut, the worker-side check lets generation 1 act.
    if (w.time_ns < cut_at) EXPECT_TRUE(w.current) << ReadWholeFile(Path("writes"));
    if (w.time_ns > b_last_g1) {
      b_last_g1 = w.time_ns;
      b_last_g1_current = w.current;
    }
  }
  // Its last writes, within the check's margin of the lease's end, were told
  // not to act.
  EXPECT_FALSE(b_last_g1_current) << ReadWholeFile(Path("writes"));
  const double stopped_after_s = (b_last_g1 - cut_at) / 1e9;
  ASSERT_NE(spans.upper_bound(1), spans.end());
  const double next_after_s = (spans.upper_bound(1)->second.first - cut_at) / 1e9;
  std::cerr << "cut-off worker's last write " << stopped_after_s
            << " s after the cut; generation 2's first write " << next_after_s << " s after it\n";
  EXPECT_LT(stopped_after_s, 3.0) << b.log();  // frozen at the 2 s lease
  EXPECT_GE(next_after_s, 2.0);
  EXPECT_TRUE(absl::StrContains(b.log(), "lease of generation 1 ran out")) << b.log();
  EXPECT_FALSE(absl::StrContains(a.log(), "lease of generation")) << a.log();
}

// The rare path of heartbeats over UDP (the default): TCP dies and UDP lives.
// node-b's stream goes through a proxy that goes silent, while its heartbeat
// datagrams still reach the coordinator directly, so its lease is renewed
// and the coordinator keeps it; both sides learn that the stream is dead from
// HTTP/2 keepalive (ddp-client pings every 20 s, 10 s timeout), node-b's
// lease then runs out 2 s after the last ack, and the coordinator closes its
// heartbeat channel before it declares node-b lost. Slower to notice than a
// whole cut (about 30 s, docs/operations.md), and still never two
// generations at once.
TEST_F(PartitionE2eTest, TcpCutUdpAlive_NoticedByKeepalive_NoTwoGenerationsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartNodeBBehindAProxy());
  AgentProcess& a = *agents_[0];
  AgentProcess& b = *agents_[1];
  EXPECT_TRUE(absl::StrContains(b.log(), "heartbeat_channel { udp_port: ")) << b.log();
  absl::SleepFor(absl::Seconds(1));  // heartbeats over UDP for a while

  const int64_t cut_at = NowNs();
  proxy_->SetPartitioned(true);
  ASSERT_TRUE(WaitForGeneration(2, 1)) << Logs();
  absl::SleepFor(absl::Seconds(1));
  proxy_->SetPartitioned(false);
  // Noticed through keepalive (20 s + 10 s), not through heartbeat_timeout;
  // never two generations at once (FinishAfterNodeBCameBack checks both).
  ASSERT_NO_FATAL_FAILURE(FinishAfterNodeBCameBack(a, b, cut_at, /*froze_within_s=*/45.0));
}

// The same cut made by the kernel, and with the heartbeats over UDP: node-b's
// agent runs in a network namespace (another host) that reaches the
// coordinator over a veth link; taking the link down silences its stream and
// its heartbeat datagrams alike. Its lease still stops its worker before the
// next generation runs. Needs root and iproute2 (skipped otherwise).
TEST_F(PartitionE2eTest, KernelCutWithHeartbeatsOverUdp_NoTwoGenerationsAtOnce) {
  auto ns = NetworkNamespace::Create();
  if (!ns.ok()) GTEST_SKIP() << ns.status();
  coordinator_args_ = {"--bind=0.0.0.0"};  // heartbeats over UDP: the default
  StartCoordinator();
  const std::string port = std::to_string(coordinator_->port());
  AgentProcess& a = StartNode("node-a", "127.0.0.1:" + port);
  launch_prefix_ = (*ns)->ExecPrefix();
  AgentProcess& b = StartNode("node-b", (*ns)->host_store_address() + ":" + port);
  launch_prefix_.clear();
  ASSERT_TRUE(WaitForGeneration(1, 2)) << Logs();
  EXPECT_TRUE(absl::StrContains(b.log(), "heartbeat_channel { udp_port: " + port)) << b.log();
  absl::SleepFor(absl::Seconds(1));  // heartbeats over UDP for a while

  const int64_t cut_at = NowNs();
  ASSERT_TRUE((*ns)->Cut().ok());
  ASSERT_TRUE(WaitForGeneration(2, 1)) << Logs();
  absl::SleepFor(absl::Seconds(1));
  ASSERT_TRUE((*ns)->Heal().ok());
  ASSERT_TRUE(WaitForGeneration(3, 2)) << Logs();
  ASSERT_EQ(mkdir(Path("finish").c_str(), 0755), 0);
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();

  ExpectGenerationsNeverOverlap();
  const auto spans = SpanByGeneration(Writes());
  int64_t b_last_g1 = 0;
  for (const Write& w : Writes()) {
    if (w.generation == 1 && w.node == "node-b") b_last_g1 = std::max(b_last_g1, w.time_ns);
  }
  ASSERT_NE(spans.upper_bound(1), spans.end());
  const double stopped_after_s = (b_last_g1 - cut_at) / 1e9;
  const double next_after_s = (spans.upper_bound(1)->second.first - cut_at) / 1e9;
  std::cerr << "over UDP: cut-off worker's last write " << stopped_after_s
            << " s after the cut; generation 2's first write " << next_after_s << " s after it\n";
  EXPECT_LT(stopped_after_s, 3.0) << b.log();
  EXPECT_GE(next_after_s, 2.0);
  EXPECT_TRUE(absl::StrContains(b.log(), "lease of generation 1 ran out")) << b.log();
}

// Both nodes lose the coordinator (a coordinator outage, as seen by them).
TEST_F(PartitionE2eTest, OutageShorterThanTheLease_NoWorkerRestarts) {
  ASSERT_NO_FATAL_FAILURE(StartBothBehindOneProxy());
  AgentProcess& a = *agents_[0];
  AgentProcess& b = *agents_[1];
  proxy_->SetPartitioned(true);
  absl::SleepFor(absl::Milliseconds(1000));  // the lease is 2 s
  proxy_->SetPartitioned(false);
  absl::SleepFor(absl::Seconds(3));  // past heartbeat_timeout: nothing happened meanwhile
  ASSERT_EQ(mkdir(Path("finish").c_str(), 0755), 0);
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  EXPECT_EQ(SpanByGeneration(Writes()).size(), 1u) << ReadWholeFile(Path("writes"));
  EXPECT_FALSE(absl::StrContains(Logs(), "lease of generation")) << Logs();
}

// The coordinator itself is paused (SIGSTOP: a VM freeze, a stall) for longer
// than heartbeat_timeout: both agents' leases run out and they freeze their
// workers; the coordinator, when it runs again, sees that it stalled and
// declares nobody lost for the silence it did not hear; the sessions resume,
// generation 1 is still the running one, and the workers are thawed.
TEST_F(PartitionE2eTest, CoordinatorPausedPastTheTimeout_WorkersFrozenThenThawed_NoRestart) {
  ASSERT_NO_FATAL_FAILURE(StartBothBehindOneProxy());
  AgentProcess& a = *agents_[0];
  AgentProcess& b = *agents_[1];
  ASSERT_EQ(kill(coordinator_->pid(), SIGSTOP), 0);
  absl::SleepFor(absl::Seconds(5));
  const int64_t resumed_at = NowNs();
  ASSERT_EQ(kill(coordinator_->pid(), SIGCONT), 0);
  ASSERT_TRUE(PollUntil([&] { return CountOf(Logs(), "thawed the workers") >= 2; }, kBound))
      << Logs();
  // Both write again, still as generation 1.
  ASSERT_TRUE(PollUntil(
      [&] {
        std::set<std::string> writers;
        for (const Write& w : Writes()) {
          if (w.time_ns > resumed_at) writers.insert(w.node);
        }
        return writers.size() == 2;
      },
      kBound))
      << Logs();
  ASSERT_EQ(mkdir(Path("finish").c_str(), 0755), 0);
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  EXPECT_EQ(SpanByGeneration(Writes()).size(), 1u) << ReadWholeFile(Path("writes"));
  EXPECT_TRUE(absl::StrContains(a.log(), "lease of generation 1 ran out")) << a.log();
  EXPECT_TRUE(absl::StrContains(b.log(), "lease of generation 1 ran out")) << b.log();
}

// The coordinator is killed and restarted while node-b is cut off: the
// restarted coordinator gives node-b a full heartbeat timeout from its start,
// then declares it lost and goes on with node-a; node-b's frozen worker never
// runs again, and no two generations ever write at once.
TEST_F(PartitionE2eTest, CoordinatorRestartDuringAPartition_NoTwoGenerationsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartNodeBBehindAProxy());
  AgentProcess& a = *agents_[0];
  AgentProcess& b = *agents_[1];
  const int64_t cut_at = NowNs();
  proxy_->SetPartitioned(true);
  absl::SleepFor(absl::Milliseconds(500));
  coordinator_->Kill9();
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(coordinator_->Start().ok());
  // node-a resumes and thaws; node-b stays cut off past heartbeat_timeout.
  ASSERT_TRUE(WaitForGeneration(2, 1)) << Logs();
  absl::SleepFor(absl::Seconds(1));
  proxy_->SetPartitioned(false);
  ASSERT_NO_FATAL_FAILURE(FinishAfterNodeBCameBack(a, b, cut_at));
}

// A partition that starts during a failover: three coordinators on a
// 3-member etcd; the leader is killed, and at once node-b (another host: a
// network namespace) is cut off from every coordinator. The new leader gives
// both nodes a full heartbeat timeout from when it serves; node-a resumes
// with it and thaws, node-b stays frozen, is declared lost, and its worker
// never runs again; the job goes on with node-a, then takes node-b back. No
// two generations ever write at once. Needs root, iproute2 and etcd.
TEST_F(PartitionE2eTest, PartitionStartsDuringAFailover_NoTwoGenerationsAtOnce) {
  auto ns = NetworkNamespace::Create();
  if (!ns.ok()) GTEST_SKIP() << ns.status();
  if (!EtcdInstalled()) GTEST_SKIP() << kEtcdBinary << " is not installed (tools/setup.sh)";
  auto etcd = EtcdCluster::Start(Path("etcd-cluster"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  CoordinatorGroup group(dir_, (*etcd)->Store("cut-ha"), 3, {"--advertise-host", "127.0.0.1"},
                         [](CoordinatorProcessOptions& o) { o.host = "0.0.0.0"; });
  ASSERT_TRUE(group.StartAll().ok());
  const int leader = group.WaitForLeader(absl::Seconds(15));
  ASSERT_GE(leader, 0);
  std::vector<std::string> local, remote;
  for (int i = 0; i < group.size(); ++i) {
    local.push_back(absl::StrCat("127.0.0.1:", group.at(i).port()));
    remote.push_back(absl::StrCat((*ns)->host_store_address(), ":", group.at(i).port()));
  }
  AgentProcess& a = StartNode("node-a", absl::StrJoin(local, ","));
  launch_prefix_ = (*ns)->ExecPrefix();
  AgentProcess& b = StartNode("node-b", absl::StrJoin(remote, ","));
  launch_prefix_.clear();
  ASSERT_TRUE(WaitForGeneration(1, 2)) << Logs();

  const int64_t cut_at = NowNs();
  group.at(leader).Kill9();
  ASSERT_TRUE((*ns)->Cut().ok());
  ASSERT_GE(group.WaitForLeader(absl::Seconds(15), leader), 0) << "no coordinator took over";
  ASSERT_TRUE(WaitForGeneration(2, 1)) << Logs();
  absl::SleepFor(absl::Seconds(1));
  ASSERT_TRUE((*ns)->Heal().ok());
  ASSERT_NO_FATAL_FAILURE(FinishAfterNodeBCameBack(a, b, cut_at));
  EXPECT_TRUE(absl::StrContains(a.log(), "session resumed")) << a.log();
}

}  // namespace
}  // namespace ddp::testing
