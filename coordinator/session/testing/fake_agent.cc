#include "coordinator/session/testing/fake_agent.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::session::testing {
namespace {

absl::Status Timeout(const std::string& what, const std::string& node) {
  return absl::DeadlineExceededError(absl::StrCat("node ", node, ": timed out waiting for ", what));
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeDedicatedChannel(const std::string& target) {
  static std::atomic<int> next_id{0};
  grpc::ChannelArguments args;
  args.SetInt("ddp.test.channel_id", next_id.fetch_add(1));
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

namespace {

client::SessionCoreOptions CoreOptions(const FakeAgentOptions& options) {
  client::SessionCoreOptions core;
  core.registration.set_job_id(options.job_id);
  core.registration.set_node_id(options.node_id);
  core.registration.set_nproc(options.nproc);
  core.registration.set_requested_rank(-1);
  core.registration.set_address(options.address);
  if (options.settings) *core.registration.mutable_settings() = *options.settings;
  return core;
}

}  // namespace

FakeAgent::FakeAgent(std::shared_ptr<grpc::Channel> channel, FakeAgentOptions options)
    : channel_(std::move(channel)),
      options_(std::move(options)),
      stub_(v1::SessionService::NewStub(channel_)),
      core_(CoreOptions(options_), options_.incarnation, RealClock::Get()) {}

FakeAgent::~FakeAgent() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  context_.TryCancel();
  if (heartbeater_.joinable()) heartbeater_.join();
  if (reader_.joinable()) reader_.join();
}

void FakeAgent::OpenAndSend(const v1::AgentMessage& first) {
  stream_ = stub_->Session(&context_);
  Send(first);
  reader_ = std::thread([this] { ReadLoop(); });
}

bool FakeAgent::Send(const v1::AgentMessage& message) {
  absl::MutexLock lock(&write_mu_);
  return stream_ != nullptr && stream_->Write(message);
}

absl::StatusOr<v1::Registered> FakeAgent::Register(absl::Duration timeout) {
  v1::AgentMessage message;
  {
    absl::MutexLock lock(&mu_);
    message = core_.RegisterMessage();
  }
  OpenAndSend(message);
  bool done = WaitUntil([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                            mu_) { return registered_.has_value() || stream_end_.has_value(); },
                        timeout);
  absl::MutexLock lock(&mu_);
  if (!done) return Timeout("Registered", options_.node_id);
  if (!registered_) {
    return absl::Status(static_cast<absl::StatusCode>(stream_end_->error_code()),
                        stream_end_->error_message());
  }
  heartbeater_ = std::thread([this] { HeartbeatLoop(); });
  return *registered_;
}

v1::NodeHeader FakeAgent::Header() const {
  absl::MutexLock lock(&mu_);
  return core_.Header(core_.generation());
}

void FakeAgent::ReportExit(int local_rank, int exit_code, int signal,
                           const std::string& error_message) {
  v1::AgentMessage message;
  v1::WorkerExited* m = message.mutable_worker_exited();
  *m->mutable_header() = Header();
  m->set_local_rank(local_rank);
  m->set_exit_code(exit_code);
  m->set_signal(signal);
  m->set_error_message(error_message);
  m->set_time_unix_ms(absl::ToUnixMillis(absl::Now()));
  Send(message);
}

void FakeAgent::ReportAllExitedOk() {
  for (int rank = 0; rank < options_.nproc; ++rank) ReportExit(rank, 0);
}

void FakeAgent::Leave(const std::string& reason) {
  v1::AgentMessage message;
  *message.mutable_leave()->mutable_header() = Header();
  message.mutable_leave()->set_reason(reason);
  Send(message);
  absl::MutexLock lock(&write_mu_);
  if (stream_ != nullptr) stream_->WritesDone();
}

void FakeAgent::Disconnect() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  context_.TryCancel();
}

void FakeAgent::ReadLoop() {
  v1::CoordinatorMessage message;
  while (stream_->Read(&message)) Handle(message);
  grpc::Status status = stream_->Finish();
  absl::MutexLock lock(&mu_);
  stream_end_ = status;
}

void FakeAgent::Handle(const v1::CoordinatorMessage& message) {
  v1::AgentMessage reply;
  {
    absl::MutexLock lock(&mu_);
    switch (message.body_case()) {
      case v1::CoordinatorMessage::kRegistered:
        registered_ = message.registered();
        break;
      case v1::CoordinatorMessage::kRequestMasterInfo: {
        ++master_info_requests_;
        core_.SetGeneration(message.request_master_info().generation());
        if (!options_.answer_master_info) break;
        v1::MasterInfo* m = reply.mutable_master_info();
        *m->mutable_header() = core_.Header(core_.generation());
        m->set_master_port(options_.master_port);
        m->set_nccl_unique_id(std::string(128, static_cast<char>(core_.generation())));
        break;
      }
      case v1::CoordinatorMessage::kAssignment:
        core_.SetGeneration(message.assignment().generation());
        assignments_.push_back(message.assignment());
        break;
      case v1::CoordinatorMessage::kStopWorkers: {
        stops_.push_back(message.stop_workers());
        if (!options_.confirm_stops) break;
        *reply.mutable_workers_stopped()->mutable_header() =
            core_.Header(message.stop_workers().generation());
        break;
      }
      case v1::CoordinatorMessage::kJobFinished:
        finished_ = message.job_finished();
        break;
      case v1::CoordinatorMessage::kNodeDismissed:
        dismissed_ = message.node_dismissed();
        break;
      default:
        break;
    }
  }
  if (reply.body_case() != v1::AgentMessage::BODY_NOT_SET) Send(reply);
}

void FakeAgent::HeartbeatLoop() {
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || stream_end_.has_value();
  };
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.heartbeat_interval)) {
        return;
      }
    }
    v1::AgentMessage message;
    {
      absl::MutexLock lock(&mu_);
      message = core_.HeartbeatMessage(/*ask_ack=*/false, absl::Time());
    }
    Send(message);
  }
}

bool FakeAgent::WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

absl::StatusOr<v1::Assignment> FakeAgent::WaitForAssignment(int64_t min_gen,
                                                            absl::Duration timeout) {
  auto has = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !assignments_.empty() && assignments_.back().generation() >= min_gen;
  };
  if (!WaitUntil(has, timeout)) {
    return Timeout(absl::StrCat("assignment of generation >= ", min_gen), options_.node_id);
  }
  absl::MutexLock lock(&mu_);
  return assignments_.back();
}

absl::StatusOr<v1::JobFinished> FakeAgent::WaitForJobFinished(absl::Duration timeout) {
  if (!WaitUntil([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_.has_value(); },
                 timeout)) {
    return Timeout("JobFinished", options_.node_id);
  }
  absl::MutexLock lock(&mu_);
  return *finished_;
}

absl::StatusOr<v1::NodeDismissed> FakeAgent::WaitForDismissed(absl::Duration timeout) {
  if (!WaitUntil([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return dismissed_.has_value(); },
                 timeout)) {
    return Timeout("NodeDismissed", options_.node_id);
  }
  absl::MutexLock lock(&mu_);
  return *dismissed_;
}

absl::StatusOr<grpc::Status> FakeAgent::WaitForStreamEnd(absl::Duration timeout) {
  if (!WaitUntil([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stream_end_.has_value(); },
                 timeout)) {
    return Timeout("the end of the stream", options_.node_id);
  }
  absl::MutexLock lock(&mu_);
  return *stream_end_;
}

bool FakeAgent::WaitForStops(size_t count, absl::Duration timeout) {
  return WaitUntil([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stops_.size() >= count; },
                   timeout);
}

bool FakeAgent::WaitForMasterInfoRequest(absl::Duration timeout) {
  return WaitUntil([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return master_info_requests_ > 0; },
                   timeout);
}

std::vector<v1::Assignment> FakeAgent::assignments() const {
  absl::MutexLock lock(&mu_);
  return assignments_;
}

std::vector<v1::StopWorkers> FakeAgent::stops() const {
  absl::MutexLock lock(&mu_);
  return stops_;
}

int FakeAgent::master_info_requests() const {
  absl::MutexLock lock(&mu_);
  return master_info_requests_;
}

int64_t FakeAgent::generation() const {
  absl::MutexLock lock(&mu_);
  return core_.generation();
}

}  // namespace ddp::session::testing
