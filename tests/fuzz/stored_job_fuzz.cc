// Stored job records as arbitrary bytes: a JobSnapshot (record, nodes, past
// runs) decoded from the input, as a damaged or hand-edited jobs.db could
// yield, through Job::Restore into a JobRegistry (in memory, fake clock).
// Restore must refuse what is inconsistent (DATA_LOSS), never crash; a job it
// accepts must then take a tick, a registration and a scheduler call.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/rendezvous/job_registry.h"
#include "coordinator/rendezvous/job_state_store.h"

namespace {

using namespace ddp::rendezvous;  // NOLINT: a test

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }
  int64_t Int(int64_t lo, int64_t hi) {  // mostly in [lo, hi], sometimes anything
    uint64_t raw = 0;
    for (int i = 0; i < 8; ++i) raw = raw << 8 | Byte();
    if (Byte() % 8 == 0) return static_cast<int64_t>(raw);
    return lo + static_cast<int64_t>(raw % static_cast<uint64_t>(hi - lo + 1));
  }
  std::string Text(size_t max) {
    std::string out(Byte() % (max + 1), '\0');
    for (char& c : out) c = static_cast<char>(Byte());
    if (Byte() % 4 != 0) {  // mostly valid ids
      for (char& c : out) c = "abcdef-0123"[static_cast<uint8_t>(c) % 11];
    }
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

JobRecord Record(Bytes& in, const std::string& job_id) {
  JobRecord r = NewJobRecord(job_id, DefaultJobSettings(), absl::Time());
  JobSettings& s = *r.mutable_settings();
  s.set_min_nodes(static_cast<int>(in.Int(0, 5)));
  s.set_max_nodes(static_cast<int>(in.Int(0, 5)));
  s.set_nproc_per_node(static_cast<int>(in.Int(0, 4)));
  s.set_max_restarts(static_cast<int>(in.Int(-1, 3)));
  s.set_join_timeout_ms(in.Int(0, 100000));
  s.set_last_call_timeout_ms(in.Int(0, 1000));
  s.set_heartbeat_interval_ms(in.Int(0, 1000));
  s.set_heartbeat_timeout_ms(in.Int(0, 5000));
  s.set_shutdown_timeout_ms(in.Int(0, 5000));
  r.set_state(static_cast<int32_t>(in.Int(0, 6)));
  r.set_generation(in.Int(-1, 5));
  r.set_restart_count(static_cast<int>(in.Int(-1, 5)));
  if (in.Byte() % 2) r.mutable_cause();
  r.set_world_size(in.Int(-1, 20));
  r.set_last_event_index(in.Int(-1, 100));
  r.set_next_join_seq(static_cast<uint64_t>(in.Int(0, 20)));
  r.set_run(static_cast<int>(in.Int(-1, 4)));
  r.mutable_master()->set_master_port(static_cast<int>(in.Int(-1, 70000)));
  r.mutable_master()->set_master_addr(in.Text(8));
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  JobChanges changes;
  const std::string job_id = in.Text(6);
  changes.job_id = job_id;
  changes.job = Record(in, job_id);
  const int nodes = in.Byte() % 6;
  for (int i = 0; i < nodes; ++i) {
    NodeRecord n = NewNodeRecord("");
    n.set_node_id(in.Text(6));
    n.set_incarnation(static_cast<Incarnation>(in.Int(0, 3)));
    n.set_nproc(static_cast<int>(in.Int(0, 4)));
    n.set_requested_rank(static_cast<int>(in.Int(-2, 5)));
    n.set_group_rank(static_cast<int>(in.Int(-2, 5)));
    n.set_global_rank_offset(in.Int(-1, 20));
    n.set_join_seq(static_cast<uint64_t>(in.Int(0, 20)));
    n.set_address(in.Text(8));
    changes.upserted_nodes.push_back(n);
  }
  InMemoryJobStateStore store;
  if (!store.Apply(changes).ok()) return 0;
  if (in.Byte() % 2) {  // a past run too
    JobChanges replaced;
    replaced.job_id = job_id;
    replaced.job_removed = true;
    replaced.archived_run = Record(in, job_id);
    replaced.keep_runs_from = static_cast<int>(in.Int(0, 4));
    if (!store.ApplyBatch({replaced, changes}).ok()) return 0;
  }
  static ddp::FakeClock clock;
  JobRegistryOptions options;
  options.read_timeout = absl::ZeroDuration();  // this harness is the writer (PersistPending)
  JobRegistry registry(clock, &store, options);
  absl::Status restored = registry.Restore();
  if (!restored.ok()) {
    if (!absl::IsDataLoss(restored) && !absl::IsInvalidArgument(restored)) std::abort();
    return 0;
  }
  clock.Advance(absl::Milliseconds(in.Int(0, 10000)));
  registry.Tick();
  RegisterRequest r;
  r.job_id = job_id;
  r.node_id = in.Text(6);
  r.incarnation = static_cast<Incarnation>(in.Int(0, 3));
  r.nproc = static_cast<int>(in.Int(0, 3));
  r.address = "127.0.0.1";
  (void)registry.Register(r);
  if (!registry.PersistPending().ok()) std::abort();  // the in-memory store never fails
  (void)registry.ListJobs(true);
  (void)registry.GetJob(job_id, true, static_cast<int>(in.Int(0, 4)));
  return 0;
}
