// Sequences of agent messages and scheduler calls against the rendezvous
// state machine (JobRegistry, nothing persisted, fake clock). Each input byte
// string decodes into operations; after every step the outbox is checked:
//   - an assignment goes only to a node's current incarnation (fencing);
//   - within a generation, group ranks and global rank ranges never collide
//     and stay inside the world;
//   - no assignment of an older generation follows one of a newer generation
//     (one live generation);
//   - the restart count never exceeds the budget.
// A violation aborts (a finding for libFuzzer).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <variant>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/logging.h"
#include "coordinator/rendezvous/job_registry.h"

namespace {

using namespace ddp::rendezvous;  // NOLINT: a test

constexpr char kJob[] = "fuzz-job";
constexpr int kNodes = 4;

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  int Next(int modulo) { return empty() ? 0 : data_[at_++] % modulo; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

struct Model {
  std::map<std::string, Incarnation> incarnation;  // last successful Register
  std::map<std::string, Generation> generation;    // last assignment per node
  Generation newest = 0;
  std::map<Generation, std::map<int, std::pair<int64_t, int64_t>>> ranks;  // group rank -> range
  bool finished = false;  // the run ended: a later Register starts a new run from generation 1
};

// Assignments checked so far (FUZZ_STATS=1 prints it at exit: shows the
// corpus reaches running generations).
int64_t assignments_checked = 0;
// FUZZ_TRACE=1 prints every step and assignment (to read a finding).
const bool kTrace = std::getenv("FUZZ_TRACE") != nullptr;
struct StatsAtExit {
  ~StatsAtExit() {
    if (std::getenv("FUZZ_STATS") != nullptr) {
      std::fprintf(stderr, "rendezvous_fuzz: %lld assignments checked\n",
                   static_cast<long long>(assignments_checked));
    }
  }
} stats_at_exit;

#define CHECK_INVARIANT(condition, message)                                     \
  do {                                                                          \
    if (!(condition)) {                                                         \
      std::fprintf(stderr,                                                      \
                   "rendezvous_fuzz: violated: %s (node %s, incarnation %llu, " \
                   "generation %lld)\n",                                        \
                   #condition, (message).node_id.c_str(),                       \
                   static_cast<unsigned long long>((message).incarnation),      \
                   static_cast<long long>(generation_of(message)));             \
      std::abort();                                                             \
    }                                                                           \
  } while (false)

Generation generation_of(const OutboundMessage& message) {
  const auto* assignment = std::get_if<Assignment>(&message.body);
  return assignment != nullptr ? assignment->generation : -1;
}

void CheckOutbox(Outbox outbox, Model& model) {
  for (const OutboundMessage& message : outbox.messages) {
    if (std::holds_alternative<JobFinished>(message.body)) {
      model.finished = true;
      if (kTrace) std::fprintf(stderr, "  job finished\n");
    }
    if (const auto* request = std::get_if<RequestMasterInfo>(&message.body)) {
      model.generation[message.node_id] = request->generation;
    }
    const auto* assignment = std::get_if<Assignment>(&message.body);
    if (assignment == nullptr) continue;
    ++assignments_checked;
    if (kTrace) {
      std::fprintf(stderr,
                   "  assignment to %s/%llu: generation %lld rank %d range %lld+%d of %lld\n",
                   message.node_id.c_str(), static_cast<unsigned long long>(message.incarnation),
                   static_cast<long long>(assignment->generation), assignment->group_rank,
                   static_cast<long long>(assignment->global_rank_offset),
                   assignment->local_world_size, static_cast<long long>(assignment->world_size));
    }
    if (model.finished) {  // a new run of the job id
      model.finished = false;
      model.newest = 0;
      model.ranks.clear();
    }
    CHECK_INVARIANT(message.incarnation == model.incarnation[message.node_id], message);
    CHECK_INVARIANT(assignment->generation >= model.newest, message);
    model.newest = assignment->generation;
    CHECK_INVARIANT(assignment->restart_count <= assignment->max_restarts, message);
    CHECK_INVARIANT(
        assignment->group_rank >= 0 && assignment->group_rank < assignment->group_world_size,
        message);
    const int64_t first = assignment->global_rank_offset;
    const int64_t end = first + assignment->local_world_size;
    CHECK_INVARIANT(first >= 0 && end <= assignment->world_size, message);
    auto& ranks = model.ranks[assignment->generation];
    auto it = ranks.find(assignment->group_rank);
    if (it != ranks.end()) {
      CHECK_INVARIANT(it->second == std::make_pair(first, end), message);  // resends are identical
    } else {
      for (const auto& [rank, range] : ranks) {
        CHECK_INVARIANT(end <= range.first || first >= range.second, message);  // no overlap
      }
      ranks[assignment->group_rank] = {first, end};
    }
    model.generation[message.node_id] = assignment->generation;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    ddp::SetMinLogLevel(ddp::LogLevel::kError);  // a new run per input is normal here
    return true;
  }();
  (void)quiet;
  ddp::FakeClock clock;
  JobRegistry registry(clock, nullptr, {});
  Model model;
  Bytes in(data, size);
  for (int step = 0; step < 400 && !in.empty(); ++step) {
    const int op = in.Next(12);
    const std::string node = "n" + std::to_string(in.Next(kNodes));
    if (kTrace) std::fprintf(stderr, "step %d: op %d node %s\n", step, op, node.c_str());
    NodeRef ref{kJob, node, model.incarnation[node], model.generation[node]};
    // A finished job id that registers again starts a new run, whose
    // generations count from 1 again (even when no node was told the old
    // run finished).
    auto before = registry.GetJobIncludingPending(kJob);
    const bool was_finished = before.ok() && IsTerminal(before->state());
    switch (op) {
      case 0:
      case 1: {
        RegisterRequest request;
        request.job_id = kJob;
        request.node_id = node;
        request.incarnation = 1 + in.Next(3);
        request.nproc = in.Next(3);
        request.address = "10.0.0." + node.substr(1);
        JobSettings settings = DefaultJobSettings();
        settings.set_min_nodes(1 + in.Next(2));
        settings.set_max_nodes(settings.min_nodes() + in.Next(3));
        settings.set_max_restarts(in.Next(3));
        settings.set_heartbeat_interval_ms(100);
        settings.set_heartbeat_timeout_ms(500);
        settings.set_last_call_timeout_ms(200);
        settings.set_join_timeout_ms(5000);
        settings.set_shutdown_timeout_ms(1000);
        if (op == 0) request.settings = settings;
        if (op == 1 && in.Next(4) == 0) {  // a resume after the agent's lease ran out
          request.lease_expired = true;
          request.generation = model.generation[node];
        }
        if (registry.Register(request).ok()) model.incarnation[node] = request.incarnation;
        break;
      }
      case 2:
        (void)registry.Heartbeat(ref);
        break;
      case 3: {
        WorkerExit exit;
        exit.set_local_rank(in.Next(3));
        exit.set_exit_code(in.Next(3));
        exit.set_hang(in.Next(8) == 0);
        SetFailureTime(clock.Now(), &exit);
        (void)registry.WorkerExited(ref, exit);
        break;
      }
      case 4:
        (void)registry.WorkersStopped(ref);
        break;
      case 5: {
        MasterInfo info;
        info.set_master_port(20000 + in.Next(100));
        info.set_nccl_unique_id(std::string(in.Next(2) == 0 ? kNcclUniqueIdBytes : 3, 'x'));
        (void)registry.ReportMasterInfo(ref, info);
        break;
      }
      case 6:
        (void)registry.StreamClosed(ref);
        break;
      case 7:
        (void)registry.Leave(ref);
        break;
      case 8:
      case 9:
        clock.Advance(absl::Milliseconds(50 * (1 + in.Next(20))));
        registry.Tick();
        break;
      case 10: {
        const int min_nodes = in.Next(4);
        (void)registry.UpdateJob(kJob, min_nodes, min_nodes + in.Next(3));
        break;
      }
      default:
        if (in.Next(2) == 0) {
          (void)registry.ExcludeNode(kJob, node, "fuzz");
        } else {
          (void)registry.CancelJob(kJob, "fuzz");
        }
    }
    auto after = registry.GetJobIncludingPending(kJob);
    if (was_finished && after.ok() && !IsTerminal(after->state())) model.finished = true;
    CheckOutbox(registry.TakeOutbox(), model);
    auto status = registry.GetJobIncludingPending(kJob);
    if (status.ok() && status->restart_count() > status->settings().max_restarts()) {
      std::fprintf(stderr, "rendezvous_fuzz: violated: restart_count %d > max_restarts %d\n",
                   status->restart_count(), status->settings().max_restarts());
      std::abort();
    }
  }
  return 0;
}
