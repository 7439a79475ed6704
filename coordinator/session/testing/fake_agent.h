#ifndef DDP_COORDINATOR_SESSION_TESTING_FAKE_AGENT_H_
#define DDP_COORDINATOR_SESSION_TESTING_FAKE_AGENT_H_

// A simulated node agent for integration tests: opens a Session stream,
// registers, heartbeats on its own thread, answers RequestMasterInfo with a
// port and a 128-byte NCCL id, records Assignments, confirms StopWorkers with
// WorkersStopped, and records JobFinished / NodeDismissed and how the stream
// ended. Tests wait on its state with loose real-time deadlines.
//
// Thread-safety: thread-safe. One reader thread and one heartbeat thread per
// agent; writes are serialized by a mutex.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/agent/session_core.h"
#include "common/clock.h"
#include "ddp/v1/session.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace ddp::session::testing {

struct FakeAgentOptions {
  std::string job_id;
  std::string node_id;
  uint64_t incarnation = 1;
  int nproc = 1;
  std::string address = "127.0.0.1";
  std::optional<v1::JobSettings> settings;  // the agent's own flags
  absl::Duration heartbeat_interval = absl::Milliseconds(50);
  int master_port = 29500;
  bool answer_master_info = true;
  bool confirm_stops = true;
};

class FakeAgent {
 public:
  FakeAgent(std::shared_ptr<grpc::Channel> channel, FakeAgentOptions options);
  ~FakeAgent();
  FakeAgent(const FakeAgent&) = delete;
  FakeAgent& operator=(const FakeAgent&) = delete;

  // Opens the stream and sends Register; returns the Registered reply, or the
  // status the stream ended with. Starts heartbeats once registered.
  absl::StatusOr<v1::Registered> Register(absl::Duration timeout);
  // Opens the stream and sends `first` as is (no heartbeats).
  void OpenAndSend(const v1::AgentMessage& first);
  // Sends a message on the open stream; false when the stream is closed.
  bool Send(const v1::AgentMessage& message);

  v1::NodeHeader Header() const;
  void ReportExit(int local_rank, int exit_code, int signal = 0,
                  const std::string& error_message = "");
  void ReportAllExitedOk();
  void Leave(const std::string& reason);
  // Breaks the stream without Leave (as a crashed agent would).
  void Disconnect();

  // Waits (up to `timeout`) for the Assignment of a generation >= `min_gen`.
  absl::StatusOr<v1::Assignment> WaitForAssignment(int64_t min_gen, absl::Duration timeout);
  absl::StatusOr<v1::JobFinished> WaitForJobFinished(absl::Duration timeout);
  absl::StatusOr<v1::NodeDismissed> WaitForDismissed(absl::Duration timeout);
  // Waits until at least `count` StopWorkers / RequestMasterInfo arrived.
  bool WaitForStops(size_t count, absl::Duration timeout);
  bool WaitForMasterInfoRequest(absl::Duration timeout);
  // The status the server ended the stream with.
  absl::StatusOr<grpc::Status> WaitForStreamEnd(absl::Duration timeout);

  std::vector<v1::Assignment> assignments() const;
  std::vector<v1::StopWorkers> stops() const;
  int master_info_requests() const;
  int64_t generation() const;
  const FakeAgentOptions& options() const { return options_; }

 private:
  void ReadLoop();
  void HeartbeatLoop();
  void Handle(const v1::CoordinatorMessage& message);
  bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout);

  const std::shared_ptr<grpc::Channel> channel_;
  const FakeAgentOptions options_;
  std::unique_ptr<v1::SessionService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::CoordinatorMessage>> stream_;
  std::thread reader_;
  std::thread heartbeater_;

  absl::Mutex write_mu_;  // one writer at a time on the stream

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<v1::Registered> registered_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> stream_end_ ABSL_GUARDED_BY(mu_);
  // Identity, generation and the messages' form (the agents' shared
  // protocol core; no resume here: tests drive the stream).
  client::SessionCore core_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Assignment> assignments_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::StopWorkers> stops_ ABSL_GUARDED_BY(mu_);
  int master_info_requests_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<v1::JobFinished> finished_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::NodeDismissed> dismissed_ ABSL_GUARDED_BY(mu_);
};

// A channel with its own TCP connection (gRPC would otherwise share one
// connection among channels with equal arguments).
std::shared_ptr<grpc::Channel> MakeDedicatedChannel(const std::string& target);

}  // namespace ddp::session::testing

#endif  // DDP_COORDINATOR_SESSION_TESTING_FAKE_AGENT_H_
