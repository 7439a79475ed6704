// The agent's workers' Python stacks: the sitecustomize.py that lets every
// Python worker dump them (client/stack_dump.h), the stacks taken when a hang
// is declared, and the answer to the coordinator's RequestStacks.

#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/agent/agent.h"
#include "client/prewarm/standby_site.h"
#include "client/worker_files.h"
#include "common/logging.h"
#include "common/stack_groups.h"

namespace ddp::client {
namespace {

void AddWorkerStack(const StackDump& dump, v1::Stacks* stacks) {
  v1::WorkerStack* w = stacks->add_workers();
  w->set_local_rank(dump.local_rank);
  w->set_global_rank(dump.global_rank);
  w->set_pid(dump.pid);
  if (dump.status.ok()) {
    w->set_stack(dump.text);
  } else {
    w->set_error(std::string(dump.status.message()));
  }
}

}  // namespace

void Agent::PrepareWorkerSite() {
  if (options_.run_dir.empty()) return;
  const std::string dir = options_.run_dir + "/site";
  if (absl::Status made = MakeDirectories(dir); !made.ok()) {
    DDP_LOG(WARNING) << "no stack dumps of the workers: " << made;
    return;
  }
  const std::string file = dir + "/sitecustomize.py";
  std::ofstream out(file, std::ios::trunc);
  out << StandbySiteSource();
  if (!out.flush()) {
    DDP_LOG(WARNING) << "no stack dumps of the workers: cannot write " << file;
    return;
  }
  worker_site_dir_ = dir;
}

std::vector<StackDump> Agent::CollectLocalStacks() {
  std::shared_ptr<WorkerSupervisor> supervisor;
  {
    absl::MutexLock lock(&supervisor_mu_);
    supervisor = supervisor_;
  }
  if (!supervisor || options_.run_dir.empty()) return {};
  std::vector<StackDumpTarget> targets;
  for (const WorkerState& w : supervisor->Workers()) {
    if (!w.running || w.exit) continue;
    targets.push_back(StackDumpTarget{
        w.local_rank, w.global_rank, w.pid,
        WorkerFilesFor(options_.run_dir, generation_, w.local_rank).stack_dump_file});
  }
  return CollectStackDumps(targets, StackDumpOptions{}, monotonic_clock_);
}

void Agent::TakeStacksAtHang(const std::string& when) {
  if (hang_stacks_) return;
  hang_stacks_ = CollectLocalStacks();
  std::vector<RankStack> stacks;
  for (const StackDump& dump : *hang_stacks_) {
    stacks.push_back(RankStack{dump.global_rank, options_.launch.node_id, dump.text,
                               dump.status.ok() ? "" : std::string(dump.status.message())});
  }
  if (!stacks.empty()) {
    DDP_LOG(WARNING) << "generation " << generation_ << ": the Python stacks of this node's "
                     << stacks.size() << " workers " << when << ":\n"
                     << FormatStackGroups(GroupStacks(stacks));
  }
}

void Agent::SendStacksAtHang() {
  TakeStacksAtHang("when the coordinator declared a hang");
  v1::AgentMessage message;
  v1::Stacks* stacks = message.mutable_stacks();
  stacks->mutable_header()->set_generation(generation_);
  stacks->set_request_id(0);
  for (const StackDump& dump : *hang_stacks_) AddWorkerStack(dump, stacks);
  DDP_LOG(INFO) << "sent the Python stacks of " << stacks->workers_size()
                << " workers taken at the hang";
  link_->Send(std::move(message));
}

std::string Agent::LogStacksAtHang(const WorkerExit& hang) {
  TakeStacksAtHang(absl::StrCat("when rank ", hang.global_rank, " was found hung"));
  for (const StackDump& dump : *hang_stacks_) {
    if (dump.local_rank == hang.local_rank && dump.status.ok()) return NormalizeStack(dump.text);
  }
  return "";
}

void Agent::HandleRequestStacks(const v1::RequestStacks& request) {
  v1::AgentMessage message;
  v1::Stacks* answer = message.mutable_stacks();
  answer->mutable_header()->set_generation(generation_);
  answer->set_request_id(request.request_id());
  for (const StackDump& dump : CollectLocalStacks()) AddWorkerStack(dump, answer);
  DDP_LOG(INFO) << "sent the Python stacks of " << answer->workers_size() << " workers (request "
                << request.request_id() << ")";
  link_->Send(std::move(message));
}

}  // namespace ddp::client
