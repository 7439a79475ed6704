#ifndef DDP_COORDINATOR_STORAGE_JOB_STATE_STORE_CONFORMANCE_H_
#define DDP_COORDINATOR_STORAGE_JOB_STATE_STORE_CONFORMANCE_H_

// The contract of coordinator/rendezvous/job_state_store.h as one typed
// GoogleTest suite. Every JobStateStore implementation instantiates it with a
// factory type F:
//
//   struct F {
//     F();  // fresh, empty storage for one test
//     // Opens the storage (a new object each call for durable stores).
//     absl::StatusOr<std::unique_ptr<ddp::rendezvous::JobStateStore>> Open();
//     // Closes `store` and opens the same storage again. A durable store must
//     // destroy it and reopen from disk; a volatile one returns it unchanged.
//     absl::StatusOr<std::unique_ptr<ddp::rendezvous::JobStateStore>> Reopen(
//         std::unique_ptr<ddp::rendezvous::JobStateStore> store);
//   };
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, JobStateStoreConformanceTest, F);
//
// Tests that check what was stored call Reopen() first, so a durable store
// proves that the state survives close + open. The contract does not fix the
// order of LoadAll's jobs and nodes, nor of a record's excluded nodes (a set):
// MustLoad sorts all three before comparing.

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace conformance {

// Every field of a record on one line (a field added to the message is
// compared without touching the suite).
inline std::string FieldsOf(const NodeRecord& n) { return n.ShortDebugString(); }
inline std::string FieldsOf(const JobEvent& e) { return e.ShortDebugString(); }

template <typename T>
auto FieldsOf(const std::vector<T>& items) {
  std::vector<decltype(FieldsOf(items.front()))> out;
  for (const T& item : items) out.push_back(FieldsOf(item));
  return out;
}

// Every field of a job record on one line, its excluded nodes (a set)
// sorted.
inline std::string FieldsOf(JobRecord record) {
  std::sort(record.mutable_excluded_nodes()->begin(), record.mutable_excluded_nodes()->end());
  return record.ShortDebugString();
}

// Compares every field of two job records.
inline void ExpectSameRecord(const JobRecord& got, const JobRecord& want) {
  EXPECT_EQ(FieldsOf(got), FieldsOf(want));
}

inline FailureInfo Failure(std::string node_id, Generation generation, int exit_code,
                           std::string message) {
  FailureInfo f;
  f.set_node_id(std::move(node_id));
  f.set_generation(generation);
  f.set_local_rank(1);
  f.set_global_rank(generation * 8 + 1);
  f.set_exit_code(exit_code);
  f.set_signal(exit_code == 0 ? 9 : 0);
  f.set_message(std::move(message));
  SetFailureTime(absl::FromUnixMillis(1700000000000 + generation), &f);
  f.set_pid(static_cast<int>(4000 + generation));
  return f;
}

// A hang report: no exit, the time of the last heartbeat.
inline FailureInfo Hang(std::string node_id, Generation generation, int pid) {
  FailureInfo f = Failure(std::move(node_id), generation, 0, "hang: silent");
  f.set_signal(0);
  f.set_hang(true);
  f.set_pid(pid);
  return f;
}

// A record with every field set to a non-default value.
inline JobRecord FullRecord(const std::string& job_id) {
  JobRecord r;
  r.set_job_id(job_id);
  JobSettings& s = *r.mutable_settings();
  s.set_min_nodes(2);
  s.set_max_nodes(4096);
  s.set_nproc_per_node(8);
  s.set_max_restarts(17);
  s.set_join_timeout_ms(600001);
  s.set_last_call_timeout_ms(30002);
  s.set_heartbeat_interval_ms(503);
  s.set_heartbeat_timeout_ms(3004);
  s.set_shutdown_timeout_ms(45005);
  s.set_hang_timeout_ms(10006);
  SetJobState(JobState::kRestarting, &r);
  r.set_generation(5000000000);  // beyond 32 bits
  r.set_restart_count(6);
  FailureInfo& cause = *r.mutable_cause();
  cause = Hang("node-7", 3, 2147483647);  // the largest pid_t
  cause.set_time_unix_ms(1700000000123);
  cause.set_stderr_tail("root tail");
  r.set_finish_message("not finished");
  for (FailureInfo f :
       {Failure("node-3", 1, 1, "first"), Failure("node-1", 2, 0, "second: killed"),
        Hang("node-5", 2, 77), Failure("node-7", 3, 137, std::string("oom\0killed", 10))}) {
    *r.add_failure_history() = std::move(f);
  }
  r.mutable_failure_history(2)->set_process_stopped(true);  // a hang of a stopped process
  // The worker's output (issue 25.1): UTF-8 beyond ASCII, a NUL.
  FailureInfo& last = *r.mutable_failure_history(3);
  last.set_stderr_tail(std::string("last line\nValueError: \xc3\xa9\0x\n", 27));
  last.set_traceback("Traceback (most recent call last):\nValueError: x");
  last.set_log_path("/tmp/ddp_job/attempt_3/0/stderr.log");
  for (const char* node : {"bad-a", "bad-b", "bad-c"}) r.add_excluded_nodes(node);
  std::string id(kNcclUniqueIdBytes, '\0');
  for (int i = 0; i < kNcclUniqueIdBytes; ++i) {
    id[i] = static_cast<char>(i % 3 == 0 ? 0 : 255 - i);  // NULs and high bytes
  }
  *r.mutable_master() = NewMasterInfo("10.0.0.7", 29500, id);
  r.set_world_size(32768);
  r.set_created_unix_ns(1699999999987654321);
  r.set_run(3);
  r.set_finished_unix_ns(1700000000987654321);
  r.set_token_hash(std::string(64, 'a'));
  SetCounters(JobCounters{123456789012, 4097}, &r);
  return r;
}

// The batch that replaces finished run `finished` of its job id with `next`
// (the registry's new run): the finished run is archived without exclusions,
// nodes and events; runs below `keep_from` are dropped.
inline std::vector<JobChanges> NewRun(JobRecord finished, const JobRecord& next, int keep_from,
                                      std::vector<NodeRecord> nodes = {}) {
  finished.clear_excluded_nodes();
  JobChanges removal;
  removal.job_id = finished.job_id();
  removal.job_removed = true;
  removal.keep_runs_from = keep_from;
  removal.archived_run = std::move(finished);
  JobChanges creation;
  creation.job_id = next.job_id();
  creation.job = next;
  creation.upserted_nodes = std::move(nodes);
  return {removal, creation};
}

// Event `index` of `job_id` with every field set; its type and contents vary
// with the index (a failure with every field, a restart with a cause).
inline JobEvent Event(const std::string& job_id, int64_t index) {
  JobEvent e;
  e.set_job_id(job_id);
  e.set_index(index);
  SetEventTime(absl::FromUnixMillis(1700000000000 + index * 1003), &e);
  const JobEventType types[] = {JobEvent::NODE_JOINED, JobEvent::WORKER_FAILED,
                                JobEvent::RESTARTING, JobEvent::GENERATION_OPENED};
  e.set_type(index == 1 ? JobEvent::JOB_CREATED : types[index % 4]);
  e.set_node_id("node-" + std::to_string(index % 3));
  e.set_generation(5000000000 + index);
  e.set_message(std::string("event\0", 6) + std::to_string(index));
  if (e.type() == JobEvent::WORKER_FAILED) {
    *e.mutable_failure() = Hang(e.node_id(), e.generation(), static_cast<int>(index));
    e.mutable_failure()->set_process_stopped(index % 8 == 1);
  }
  if (e.type() == JobEvent::RESTARTING) {
    e.set_restart_cause(index % 8 == 2 ? RestartCause::NODE_LOSS : RestartCause::WORKER_FAILURE);
  }
  return e;
}

// Events `from` to `to` (inclusive) of `job_id`.
inline std::vector<JobEvent> Events(const std::string& job_id, int64_t from, int64_t to) {
  std::vector<JobEvent> events;
  for (int64_t i = from; i <= to; ++i) events.push_back(Event(job_id, i));
  return events;
}

inline NodeRecord Node(const std::string& node_id, int group_rank, Incarnation incarnation = 11) {
  NodeRecord n = rendezvous::NewNodeRecord("");
  n.set_node_id(node_id);
  n.set_incarnation(incarnation);
  n.set_nproc(8);
  n.set_requested_rank(-1);
  n.set_address(node_id + ".cluster.local");
  n.set_group_rank(group_rank);
  n.set_global_rank_offset(group_rank < 0 ? 0 : int64_t{group_rank} * 8);
  n.set_join_seq(static_cast<uint64_t>(group_rank + 2));
  if (group_rank == 1) {  // one node drains: a drain under way round-trips
    rendezvous::SetDrain(absl::FromUnixMillis(1'700'000'000'123), "preempted: maintenance", &n);
  }
  return n;
}

// A batch that creates (or replaces) `record` and upserts `nodes`.
inline JobChanges CreateJob(const JobRecord& record, std::vector<NodeRecord> nodes = {}) {
  JobChanges c;
  c.job_id = record.job_id();
  c.job = record;
  c.upserted_nodes = std::move(nodes);
  return c;
}

// A batch of node changes (and optional counters) to an existing job.
inline JobChanges NodeChanges(const std::string& job_id, std::vector<NodeRecord> upserted,
                              std::vector<std::string> removed = {}) {
  JobChanges c;
  c.job_id = job_id;
  c.upserted_nodes = std::move(upserted);
  c.removed_nodes = std::move(removed);
  return c;
}

inline std::vector<std::string> NodeIds(const JobSnapshot& snapshot) {
  std::vector<std::string> ids;
  for (const NodeRecord& n : snapshot.nodes) ids.push_back(n.node_id());
  return ids;
}

}  // namespace conformance

template <typename Factory>
class JobStateStoreConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<JobStateStore>> store = factory_.Open();
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }

  // Closes and reopens the storage; durable stores must keep everything.
  void Reopen() {
    absl::StatusOr<std::unique_ptr<JobStateStore>> store = factory_.Reopen(std::move(store_));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }

  void MustApply(const JobChanges& changes) {
    absl::Status status = store_->Apply(changes);
    ASSERT_TRUE(status.ok()) << status;
  }

  // LoadAll with jobs, nodes and excluded nodes sorted by id.
  std::vector<JobSnapshot> MustLoad() {
    absl::StatusOr<std::vector<JobSnapshot>> all = store_->LoadAll();
    EXPECT_TRUE(all.ok()) << all.status();
    if (!all.ok()) return {};
    std::sort(all->begin(), all->end(), [](const JobSnapshot& a, const JobSnapshot& b) {
      return a.job.job_id() < b.job.job_id();
    });
    for (JobSnapshot& snapshot : *all) {
      std::sort(snapshot.nodes.begin(), snapshot.nodes.end(),
                [](const NodeRecord& a, const NodeRecord& b) { return a.node_id() < b.node_id(); });
      std::sort(snapshot.job.mutable_excluded_nodes()->begin(),
                snapshot.job.mutable_excluded_nodes()->end());
    }
    return *std::move(all);
  }

  // Reopens, loads, and expects exactly one job; returns it.
  JobSnapshot ReopenAndLoadOne() {
    Reopen();
    std::vector<JobSnapshot> all = MustLoad();
    EXPECT_EQ(all.size(), 1u);
    return all.empty() ? JobSnapshot{} : all[0];
  }

  Factory factory_;
  std::unique_ptr<JobStateStore> store_;
};

TYPED_TEST_SUITE_P(JobStateStoreConformanceTest);

#include "coordinator/storage/job_state_store_conformance_tests.inc"

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_STORAGE_JOB_STATE_STORE_CONFORMANCE_H_
