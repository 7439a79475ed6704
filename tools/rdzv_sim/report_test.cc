#include "tools/rdzv_sim/report.h"

#include "gtest/gtest.h"

namespace ddp::rdzv_sim {
namespace {

SizeResult Sample() {
  SizeResult r;
  r.nodes = 1024;
  r.channels = 64;
  r.job_id = "rdzv-sim-n1024";
  r.rendezvous = absl::Milliseconds(512);
  r.restart = absl::Milliseconds(1500);
  r.heartbeat_window = absl::Seconds(10);
  r.heartbeats_sent = 20480;
  r.coordinator_cpu_fraction = 0.125;
  r.client_cpu_fraction = 0.5;
  r.coordinator_threads = {{"grpc-exec", 0.1}, {"rdzv-dispatch", 0.025}};
  r.rss_idle_bytes = 10'000'000;
  r.rss_connected_bytes = 10'000'000 + 1024 * 20'000;
  r.sim_pacing = SimPacing{absl::Milliseconds(37), 5, 2};
  r.rendezvous_cpu.coordinator = absl::Milliseconds(256);
  r.rendezvous_cpu.simulator = absl::Milliseconds(128);
  r.restart_cpu.simulator = absl::Milliseconds(750);
  r.load_start = 1.25;
  r.load_end = 3.5;
  return r;
}

TEST(Report, Targets_BySize) {
  EXPECT_EQ(RendezvousTarget(256), absl::Seconds(1));
  EXPECT_EQ(RendezvousTarget(1024), absl::Seconds(1));
  EXPECT_EQ(RendezvousTarget(4096), absl::Seconds(3));
  EXPECT_EQ(RendezvousTarget(65536), absl::Seconds(5));
  EXPECT_FALSE(RendezvousTarget(65537).has_value());
  EXPECT_EQ(RestartTarget(1024), absl::Seconds(1));
  EXPECT_EQ(RestartTarget(16384), absl::Milliseconds(1500));
  EXPECT_EQ(RestartTarget(65536), absl::Seconds(3));
  EXPECT_FALSE(RestartTarget(131072).has_value());
}

TEST(Report, CpuPerHeartbeat_ShareOfWindowOverHeartbeats) {
  // 12.5 % of a core over 10 s = 1.25 s, over 20,480 heartbeats.
  EXPECT_NEAR(absl::ToDoubleMicroseconds(*CpuPerHeartbeat(Sample())), 61.04, 0.01);
  SizeResult silent = Sample();
  silent.heartbeats_sent = 0;
  EXPECT_FALSE(CpuPerHeartbeat(silent).has_value());
}

TEST(Report, PerJoinGrowth_LargestUpTo16384OverThe1024Row) {
  SizeResult base = Sample();  // 512 ms / 1,024 = 500 us
  SizeResult mid = Sample();
  mid.nodes = 4096;
  mid.rendezvous = absl::Milliseconds(4096);  // 1,000 us
  SizeResult big = Sample();
  big.nodes = 16384;
  big.rendezvous = absl::Milliseconds(12288);  // 750 us
  SizeResult beyond = Sample();
  beyond.nodes = 65536;
  beyond.rendezvous = absl::Seconds(600);
  EXPECT_DOUBLE_EQ(*PerJoinGrowth({base, mid, big, beyond}), 1.5);
  EXPECT_DOUBLE_EQ(*PerJoinGrowth({mid, base}), 2.0);
  EXPECT_FALSE(PerJoinGrowth({mid, big}).has_value());
  big.error = "lost";
  EXPECT_DOUBLE_EQ(*PerJoinGrowth({base, mid, big}), 2.0);
  const std::string table = RenderTable({base, mid}, {2, "x"});
  EXPECT_NE(table.find("over 1,024: 2.00x MISS"), std::string::npos) << table;
}

TEST(Report, BytesPerAgent_DifferenceOverNodes) {
  EXPECT_DOUBLE_EQ(*BytesPerAgent(Sample()), 20'000.0);
  SizeResult unknown = Sample();
  unknown.rss_idle_bytes.reset();
  EXPECT_FALSE(BytesPerAgent(unknown).has_value());
}

TEST(Report, RenderTable_ShowsFiguresAndVerdicts) {
  const std::string table = RenderTable({Sample()}, {2, "Test CPU"});
  EXPECT_NE(table.find("2 cpus (Test CPU)"), std::string::npos) << table;
  EXPECT_NE(table.find("512 ms ok"), std::string::npos) << table;
  EXPECT_NE(table.find("1500 ms MISS"), std::string::npos) << table;
  EXPECT_NE(table.find("500 us"), std::string::npos) << table;  // per join
  EXPECT_NE(table.find("12.5% MISS"), std::string::npos) << table;
  EXPECT_NE(table.find("61.0 us each MISS"), std::string::npos) << table;
  EXPECT_NE(table.find("20.0 KB ok"), std::string::npos) << table;
  EXPECT_NE(table.find("2048"), std::string::npos) << table;  // beats/s
  EXPECT_NE(table.find("grpc-exec 10.0%, rdzv-dispatch 2.5%"), std::string::npos) << table;
  EXPECT_NE(table.find("CPU in rendezvous: coordinator 256 ms (50% of a core), simulator 128 ms "
                       "(25% of a core); in restart: coordinator n/a, simulator 750 ms (50% of "
                       "a core)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("machine load average 1.2 at the start, 3.5 at the end"), std::string::npos)
      << table;
  EXPECT_NE(table.find("simulator pacing: longest pause between heartbeat rounds 37 ms, 5 "
                       "heartbeats skipped (it fell behind), 2 not sent while the agent's previous "
                       "one was queued"),
            std::string::npos)
      << table;
}

TEST(Report, RenderTable_ErrorRow_ShowsError) {
  SizeResult failed;
  failed.nodes = 4096;
  failed.error = "rendezvous: DEADLINE_EXCEEDED";
  const std::string table = RenderTable({failed}, {2, "x"});
  EXPECT_NE(table.find("4096 | error: rendezvous: DEADLINE_EXCEEDED"), std::string::npos) << table;
  EXPECT_EQ(table.find("simulator pacing"), std::string::npos) << table;  // no fleet made

  // A node lost while the simulator itself stalled says so.
  failed.sim_pacing = SimPacing{absl::Milliseconds(2900), 40'000, 0};
  const std::string stalled = RenderTable({failed}, {2, "x"});
  EXPECT_NE(stalled.find("longest pause between heartbeat rounds 2900 ms, 40000 heartbeats "
                         "skipped"),
            std::string::npos)
      << stalled;
}

TEST(Report, RenderJson_FieldsAndNulls) {
  SizeResult r = Sample();
  r.coordinator_cpu_fraction.reset();
  r.error = "say \"hi\"";
  const std::string json = RenderJson({r}, {2, "Test CPU"});
  EXPECT_NE(json.find("\"cpus\":2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"nodes\":1024"), std::string::npos) << json;
  EXPECT_NE(json.find("\"rendezvous_ms\":512.000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"per_join_us\":500.000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"coordinator_threads\":{\"grpc-exec\":0.100,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"coordinator_cpu_fraction\":null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"bytes_per_agent\":20000.000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"load_start\":1.250,\"load_end\":3.500"), std::string::npos) << json;
  EXPECT_NE(json.find("\"rendezvous_cpu\":{\"coordinator_ms\":256.000,\"simulator_ms\":128.000}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"restart_cpu\":{\"coordinator_ms\":null,\"simulator_ms\":750.000}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"error\":\"say \\\"hi\\\"\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"sim_pacing\":{\"longest_pause_ms\":37.000,\"skipped\":5,"
                      "\"dropped_while_queued\":2}"),
            std::string::npos)
      << json;
  r.sim_pacing.reset();
  EXPECT_NE(RenderJson({r}, {2, "Test CPU"}).find("\"sim_pacing\":null"), std::string::npos);
}

}  // namespace
}  // namespace ddp::rdzv_sim
