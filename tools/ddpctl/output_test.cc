#include "tools/ddpctl/output.h"

#include <string>

#include "common/proto_json.h"
#include "gtest/gtest.h"
#include "tools/ddpctl/json_output.h"

namespace ddp::ddpctl {
namespace {

TEST(IsValidUtf8, AcceptsTextRejectsBrokenSequences) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("gr\xC3\xBC\xC3\x9F"));  // "grüß"
  EXPECT_FALSE(IsValidUtf8("\xC3"));               // Truncated.
  EXPECT_FALSE(IsValidUtf8("\xC0\x80"));           // Overlong NUL.
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));       // Surrogate.
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(PrintableBytes, BinaryValue_IsEscapedAndQuoted) {
  EXPECT_EQ(PrintableBytes("abc"), "abc");
  EXPECT_EQ(PrintableBytes(std::string("a\0b", 3)), "\"a\\x00\\x62\"");
  EXPECT_EQ(PrintableBytes("\xFF"), "\"\\xff\"");
}

TEST(EventText, PutAndDelete_ShowRevision) {
  v1::Event event;
  event.mutable_kv()->set_key("k");
  event.mutable_kv()->set_value("v");
  event.mutable_kv()->set_mod_revision(12);
  EXPECT_EQ(EventText(event), "PUT k = v (revision 12)");
  event.set_type(v1::Event::DELETE);
  EXPECT_EQ(EventText(event), "DELETE k (revision 12)");
  // --json prints the message in protobuf's JSON mapping (bytes as base64).
  EXPECT_EQ(ProtoJson(event),
            R"({"type":"DELETE","kv":{"namespace":"","key":"aw==","value":"dg==",)"
            R"("createRevision":"0","modRevision":"12","version":"0","lease":"0"}})");
}

v1::Job SampleJob() {
  v1::Job job;
  job.set_job_id("train-1");
  job.set_state(v1::RUNNING);
  job.set_generation(3);
  job.set_restart_count(1);
  job.set_created_unix_ms(1700000000123);
  job.set_last_event_index(9);
  v1::JobSettings* s = job.mutable_settings();
  s->set_min_nodes(2);
  s->set_max_nodes(4);
  s->set_nproc_per_node(8);
  s->set_max_restarts(3);
  s->set_join_timeout_ms(600000);
  s->set_last_call_timeout_ms(30000);
  s->set_heartbeat_interval_ms(500);
  s->set_heartbeat_timeout_ms(3000);
  s->set_shutdown_timeout_ms(30000);
  v1::Member* a = job.add_members();
  a->set_node_id("node-a");
  a->set_address("10.0.0.1");
  a->set_nproc(8);
  a->set_group_rank(0);
  a->set_global_rank_offset(0);
  a->set_heartbeat_age_ms(120);
  a->set_connected(true);
  v1::Member* spare = job.add_spares();
  spare->set_node_id("node-s");
  spare->set_nproc(8);
  spare->set_group_rank(-1);
  spare->set_global_rank_offset(-1);
  spare->set_heartbeat_age_ms(-1);
  job.add_excluded_nodes("node-x");
  v1::Failure* f = job.add_failures();
  f->set_node_id("node-b");
  f->set_generation(2);
  f->set_local_rank(1);
  f->set_global_rank(9);
  f->set_exit_code(1);
  f->set_message("CUDA error");
  f->set_time_unix_ms(1700000000000);
  return job;
}

TEST(ParseJobState, NamesAnyCase_UnspecifiedAndUnknownRejected) {
  EXPECT_EQ(*ParseJobState("running"), v1::RUNNING);
  EXPECT_EQ(*ParseJobState("CANCELLED"), v1::CANCELLED);
  absl::StatusOr<v1::JobState> bad = ParseJobState("asleep");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'asleep'"), std::string::npos);
  EXPECT_FALSE(ParseJobState("JOB_STATE_UNSPECIFIED").ok());
  EXPECT_EQ(JobStateName(v1::RESTARTING), "RESTARTING");
}

TEST(JobListText, TwoJobs_AlignedColumnsWithCounts) {
  v1::Job other;
  other.set_job_id("j2");
  other.set_state(v1::WAITING);
  EXPECT_EQ(JobListText({SampleJob(), other}),
            "JOB      STATE    GENERATION  RESTARTS  MEMBERS  SPARES\n"
            "train-1  RUNNING  3           1/3       1        1\n"
            "j2       WAITING  0           0/0       0        0\n");
}

TEST(JobSummaryText, Job_OneLine) {
  EXPECT_EQ(JobSummaryText(SampleJob()),
            "train-1: RUNNING, generation 3, restarts 1/3, 1 members, "
            "1 spares");
}

TEST(JobText, DrainingMemberAndStragglerPolicy_Shown) {
  v1::Job job = SampleJob();
  job.mutable_settings()->set_straggler_exclude_factor(1.5);
  job.mutable_settings()->set_straggler_exclude_after_ms(60000);
  job.mutable_members(0)->set_leaves_at_unix_ms(1700000000123);
  job.mutable_members(0)->set_drain_reason("kernel update");
  const std::string text = JobText(job);
  EXPECT_NE(text.find("  straggler-exclude   1.5x for 1m\n"), std::string::npos) << text;
  EXPECT_NE(text.find("draining: node-a leaves by 2023-11-14T22:13:20.123Z at the latest "
                      "(kernel update)\n"),
            std::string::npos)
      << text;
}

TEST(JobText, FullJob_ShowsSettingsMembersFailures) {
  v1::Job job = SampleJob();
  job.mutable_root_cause()->CopyFrom(job.failures(0));
  const std::string text = JobText(job);
  EXPECT_NE(text.find("state:       RUNNING\n"), std::string::npos) << text;
  EXPECT_NE(text.find("restarts:    1/3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("created:     2023-11-14T22:13:20.123Z\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  nnodes              2:4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  join-timeout        10m\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  heartbeat-interval  500ms\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  straggler-exclude   off\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  hang-timeout        -\n"), std::string::npos) << text;
  job.mutable_settings()->set_hang_timeout_ms(0);
  EXPECT_NE(JobText(job).find("  hang-timeout        off\n"), std::string::npos) << JobText(job);
  job.mutable_settings()->set_hang_timeout_ms(10000);
  EXPECT_NE(JobText(job).find("  hang-timeout        10s\n"), std::string::npos) << JobText(job);
  EXPECT_NE(text.find("members (1):\n  NODE    GROUP_RANK  RANK_OFFSET  NPROC"
                      "  ADDRESS   HEARTBEAT_AGE  CONNECTED\n"
                      "  node-a  0           0            8      10.0.0.1"
                      "  120ms          yes\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  node-s  -           -            8               "
                      "never          no\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("excluded nodes (1): node-x\n"), std::string::npos);
  const std::string failure =
      "2023-11-14T22:13:20.000Z generation 2 node node-b local rank 1 "
      "global rank 9 exit code 1: CUDA error";
  EXPECT_NE(text.find("failures (1, newest last):\n  " + failure + "\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("root cause: " + failure + "\n"), std::string::npos);
}

TEST(JobText, FinishedJob_MembersAreTheLastGeneration) {
  v1::Job job;
  job.set_job_id("j");
  job.set_state(v1::SUCCEEDED);
  v1::Member* m = job.add_members();
  m->set_node_id("node-a");
  m->set_group_rank(-1);
  m->set_global_rank_offset(-1);
  const std::string text = JobText(job);
  EXPECT_NE(text.find("members of the last generation (1):\n  NODE"), std::string::npos) << text;
  EXPECT_NE(text.find("spares (0): none\n"), std::string::npos) << text;
}

TEST(JobText, Time_TotalsAndOneRowPerGeneration) {
  v1::Job job;
  job.set_job_id("j");
  job.set_state(v1::RESTARTING);
  v1::JobTime* time = job.mutable_time();
  time->set_training_ms(18'000);
  time->set_rendezvous_ms(3'000);
  time->set_detection_ms(1'000);
  time->set_work_lost_ms(9'000);
  v1::GenerationTime* first = time->add_generations();
  first->set_generation(1);
  first->set_started_unix_ms(1'700'000'000'000);
  first->set_rendezvous_ms(2'000);
  first->set_training_ms(27'000);
  first->set_work_lost_ms(9'000);
  first->set_last_checkpoint_unix_ms(1'700'000'018'000);
  first->set_last_checkpoint_step(380);
  first->set_ended_by("worker_failure");
  v1::GenerationTime* next = time->add_generations();
  next->set_detection_ms(1'000);
  next->set_rendezvous_ms(1'000);
  const std::string text = JobText(job);
  EXPECT_NE(text.find("time: training 18s, lost 13s (rendezvous 3s, detection 1s, work since "
                      "checkpoint 9s)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  1           2023-11-14T22:13:20.000Z  0  "), std::string::npos) << text;
  EXPECT_NE(text.find("27s       9s         step 380 at 2023-11-14T22:13:38.000Z  worker_failure"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  next        -"), std::string::npos) << text;
  EXPECT_NE(text.find("so far"), std::string::npos) << text;
  job.clear_time();
  EXPECT_EQ(JobText(job).find("time:"), std::string::npos) << "none sent: nothing shown";
}

TEST(JobText, Progress_OneRowPerReportingWorkerInRankOrder) {
  v1::Job job;
  job.set_job_id("j");
  job.set_state(v1::RUNNING);
  v1::Member* b = job.add_members();
  b->set_node_id("node-b");
  v1::WorkerProgress* p = b->add_progress();
  p->set_global_rank(3);
  p->set_local_rank(1);
  p->set_generation(2);
  p->set_step(1200);
  p->set_steps_per_second(4.5);
  p->set_age_ms(1500);
  (*p->mutable_metrics())["loss"] = 0.3125;
  v1::Member* a = job.add_members();
  a->set_node_id("node-a");
  v1::WorkerProgress* q = a->add_progress();
  q->set_global_rank(0);
  q->set_step(1180);
  const std::string text = JobText(job);
  const size_t header =
      text.find("progress (as the workers reported it, or their CPU as the agent saw it):\n  RANK");
  ASSERT_NE(header, std::string::npos) << text;
  const size_t rank0 = text.find("  0     node-a/0", header);
  const size_t rank3 = text.find("  3     node-b/1", header);
  ASSERT_NE(rank0, std::string::npos) << text;
  ASSERT_NE(rank3, std::string::npos) << text;
  EXPECT_LT(rank0, rank3);
  EXPECT_NE(text.find("1200  4.5      -        -     1.5s  loss=0.3125"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("STRAGGLER"), std::string::npos) << text;
  p->set_relative_speed(0.6);
  p->set_straggler(true);
  p->set_speed_source(v1::SPEED_SOURCE_STEP_TIME);
  const std::string flagged = JobText(job);
  EXPECT_NE(flagged.find("1200  4.5      0.60   STRAGGLER  step time  1.5s"), std::string::npos)
      << flagged;
  // A rank of a script that reports nothing: scored from its CPU.
  v1::WorkerProgress* c = a->add_progress();
  c->set_global_rank(1);
  c->set_local_rank(1);
  c->set_cpu_busy(0.3);
  c->set_relative_speed(0.67);
  c->set_straggler(true);
  c->set_speed_source(v1::SPEED_SOURCE_CPU_BUSY);
  const std::string measured = JobText(job);
  EXPECT_NE(measured.find("node-a/1    0           -     -        0.67   STRAGGLER  cpu 30%"),
            std::string::npos)
      << measured;
  job.clear_members();
  EXPECT_EQ(JobText(job).find("progress ("), std::string::npos);
}

TEST(JobText, EmptyJob_SaysNone) {
  v1::Job job;
  job.set_job_id("j");
  job.set_state(v1::CANCELLED);
  job.set_message("cancelled: maintenance");
  const std::string text = JobText(job);
  EXPECT_NE(text.find("state:       CANCELLED (cancelled: maintenance)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("members of the last generation (0): none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("failures (0, newest last): none\n"), std::string::npos);
  EXPECT_NE(text.find("root cause: none\n"), std::string::npos);
}

TEST(FailureText, KnownPid_ShownInTextAndJson) {
  v1::Job job = SampleJob();
  job.mutable_failures(0)->set_pid(4242);
  EXPECT_NE(FailureText(job.failures(0)).find(" global rank 9 pid 4242 exit code 1"),
            std::string::npos)
      << FailureText(job.failures(0));
  const std::string json = ProtoJson(job);
  EXPECT_NE(json.find(R"("timeUnixMs":"1700000000000","hang":false,"pid":4242,)"),
            std::string::npos)
      << json;
}

TEST(FailureText, SignalHangAndCoordinator_Distinguished) {
  v1::Failure f;
  f.set_node_id("n");
  f.set_signal(9);
  EXPECT_EQ(FailureText(f),
            "- generation 0 node n local rank 0 global rank 0 "
            "signal 9");
  f.set_hang(true);
  EXPECT_EQ(FailureText(f), "- generation 0 node n local rank 0 global rank 0 hang");
  v1::Failure c;
  c.set_generation(4);
  c.set_message("join timeout:\nonly 1 of 2 nodes");
  EXPECT_EQ(FailureText(c), "- generation 4 coordinator: \"join timeout:\\nonly 1 of 2 nodes\"");
}

TEST(FailureText, NodeLoss_NamesTheNodeWithoutRanksOrExitCode) {
  v1::Failure f;
  f.set_node_id("node-b");
  f.set_generation(1);
  f.set_local_rank(-1);
  f.set_global_rank(-1);
  f.set_message("the session of node 'node-b' closed");
  EXPECT_EQ(FailureText(f),
            "- generation 1 node node-b node lost: the session of node 'node-b' closed");
}

TEST(JobEventText, NodeLostAndFinished_OneLineEach) {
  v1::JobEvent event;
  event.set_job_id("j");
  event.set_index(7);
  event.set_time_unix_ms(1700000000000);
  event.set_type(v1::JobEvent::NODE_LOST);
  event.set_node_id("node-b");
  event.set_generation(2);
  event.set_message("no heartbeat for 3s");
  EXPECT_EQ(JobEventText(event),
            "#7 2023-11-14T22:13:20.000Z NODE_LOST node node-b generation 2: "
            "no heartbeat for 3s");
  EXPECT_EQ(ProtoJson(event),
            R"({"jobId":"j","index":"7","timeUnixMs":"1700000000000",)"
            R"("type":"NODE_LOST","nodeId":"node-b","generation":"2",)"
            R"("message":"no heartbeat for 3s","restartCause":"RESTART_CAUSE_UNSPECIFIED",)"
            R"("lastCheckpointUnixMs":"0","lastCheckpointStep":"0"})");
  event.set_type(v1::JobEvent::WORKER_FAILED);
  event.clear_message();
  event.mutable_failure()->set_node_id("node-b");
  event.mutable_failure()->set_exit_code(3);
  EXPECT_EQ(JobEventText(event),
            "#7 2023-11-14T22:13:20.000Z WORKER_FAILED node node-b generation "
            "2 [failure - generation 0 node node-b local rank 0 global rank 0 "
            "exit code 3]");
}

TEST(JobStacksText, OddRankFirst_NodeAndPidNamed_MissingNodesListed) {
  v1::JobStacks stacks;
  stacks.set_job_id("train");
  stacks.set_generation(3);
  for (int rank = 0; rank < 3; ++rank) {
    v1::RankStack* r = stacks.add_ranks();
    r->set_global_rank(rank);
    r->set_node_id(rank < 2 ? "a" : "b");
    r->set_pid(100 + rank);
  }
  stacks.add_missing_nodes("c");
  v1::StackGroup* odd = stacks.add_groups();
  odd->add_ranks(2);
  odd->set_stack("Thread (most recent call first):\n  File \"t.py\", line 17 in step");
  v1::StackGroup* rest = stacks.add_groups();
  rest->add_ranks(0);
  rest->add_ranks(1);
  rest->set_stack("Thread (most recent call first):\n  File \"c10d.py\", line 9 in all_reduce");
  EXPECT_EQ(JobStacksText(stacks),
            "job train, generation 3: 3 ranks in 2 groups\n"
            "no answer from node c\n"
            "rank 2 (node b, pid 102):\n"
            "  Thread (most recent call first):\n"
            "    File \"t.py\", line 17 in step\n"
            "ranks 0,1:\n"
            "  Thread (most recent call first):\n"
            "    File \"c10d.py\", line 9 in all_reduce\n");
}

}  // namespace
}  // namespace ddp::ddpctl

namespace ddp::ddpctl {
namespace {

TEST(CliJson, TextBytesAsText_Int64AsNumbers) {
  v1::Event event;
  event.mutable_kv()->set_key("k");
  event.mutable_kv()->set_value("gr\xC3\xBC\xC3\x9F \"q\"\n");
  event.mutable_kv()->set_mod_revision(12);
  event.mutable_kv()->set_lease(7587899179807800585);
  EXPECT_EQ(CliJson(event), R"({"type":"PUT","kv":{"namespace":"","key":"k","value":"gr)"
                            "\xC3\xBC\xC3\x9F"
                            R"( \"q\"\n","createRevision":0,"modRevision":12,"version":0,)"
                            R"("lease":7587899179807800585}})");
}

TEST(CliJson, BinaryBytes_Base64WithEncodingField) {
  v1::KeyValue kv;
  kv.set_key("k");
  kv.set_value(std::string("\x00\xFF", 2));
  const std::string json = CliJson(kv);
  EXPECT_NE(json.find(R"("key":"k","value":"AP8=","valueEncoding":"base64",)"), std::string::npos)
      << json;
  EXPECT_EQ(json.find("keyEncoding"), std::string::npos) << json;
}

TEST(CliJson, Job_NumbersAndNestedMessages) {
  v1::Job job = SampleJob();
  job.mutable_failures(0)->set_pid(4242);
  const std::string json = CliJson(job);
  EXPECT_NE(json.find(R"("timeUnixMs":1700000000000,"hang":false,"pid":4242,)"), std::string::npos)
      << json;
}

TEST(JsonQuote, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonQuote(std::string("a\"b\\c\x01", 6)), R"("a\"b\\c\u0001")");
}

}  // namespace
}  // namespace ddp::ddpctl
