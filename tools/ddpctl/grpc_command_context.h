#ifndef DDP_TOOLS_DDPCTL_GRPC_COMMAND_CONTEXT_H_
#define DDP_TOOLS_DDPCTL_GRPC_COMMAND_CONTEXT_H_

// What every command handler of ddpctl's gRPC layer gets (internal to the
// grpc_commands library): the parsed invocation, one stub per service on the
// same channel, the stop notification of streaming commands and stdout, and
// the one way to make a call and print its reply (Call, Print, CallAndPrint),
// so that a handler holds only its own request and text.
// A handler returns the call's status; a usage error found late (a value only
// the handler can check) is INVALID_ARGUMENT prefixed "usage: " (exit 2).
// Thread-safety: used by one handler on one thread.

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ddp/v1/cluster.grpc.pb.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "ddp/v1/nodes.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/ddpctl/command_line.h"
#include "tools/ddpctl/json_output.h"

namespace ddp::ddpctl {

struct CommandContext {
  const Invocation& invocation;
  v1::KeyValueService::Stub& stub;
  v1::JobService::Stub& jobs;
  v1::ClusterService::Stub& cluster;
  v1::NodeService::Stub& nodes;
  absl::Notification& stop;
  std::ostream& out;
  std::ostream& err;  // notes for the user (not results)
  bool json() const { return invocation.global.json; }
  const std::string& ns() const { return invocation.global.name_space; }
  const std::string& arg(size_t i) const { return invocation.args[i]; }
  void SetDeadline(grpc::ClientContext& context,
                   absl::Duration extra = absl::ZeroDuration()) const {
    context.set_deadline(absl::ToChronoTime(absl::Now() + invocation.global.timeout + extra));
  }

  // A unary method of a generated stub, e.g. &v1::KeyValueService::Stub::Get.
  template <typename Stub, typename Request, typename Response>
  using UnaryMethod = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

  // One unary call under --timeout (plus `extra`); `*response` holds the
  // reply when it returns OK.
  template <typename Stub, typename Request, typename Response>
  grpc::Status Call(Stub& stub, UnaryMethod<Stub, Request, Response> method, const Request& request,
                    Response* response, absl::Duration extra = absl::ZeroDuration()) const {
    grpc::ClientContext context;
    SetDeadline(context, extra);
    return (stub.*method)(&context, request, response);
  }
  // Prints a reply: its CliJson form (one line) with --json, else what
  // `text(out, response)` writes.
  template <typename Response, typename Text>
  void Print(const Response& response, Text&& text) {
    if (json()) {
      out << CliJson(response) << "\n";
    } else {
      text(out, response);
    }
  }
  // Call, then Print the reply when the call succeeded; returns the call's
  // status (RunInvocation turns it into the exit code and error line).
  template <typename Stub, typename Request, typename Response, typename Text>
  grpc::Status CallAndPrint(Stub& stub, UnaryMethod<Stub, Request, Response> method,
                            const Request& request, Text&& text,
                            absl::Duration extra = absl::ZeroDuration()) {
    Response response;
    grpc::Status status = Call(stub, method, request, &response, extra);
    if (status.ok()) Print(response, text);
    return status;
  }
};

using Handler = std::function<grpc::Status(CommandContext&)>;

inline grpc::Status UsageError(const absl::Status& status) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("usage: ", status.message()));
}

// While alive, cancels `context` as soon as `stop` is notified (the user's
// Ctrl-C), so a blocked stream Read() returns false and Finish() reports
// CANCELLED; the handler then treats the stop as a clean exit.
class CancelOnStop {
 public:
  // How often the canceller checks whether the stream already ended.
  static constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

  CancelOnStop(grpc::ClientContext& context, absl::Notification& stop)
      : thread_([this, &context, &stop] {
          while (!done_.HasBeenNotified()) {
            if (stop.WaitForNotificationWithTimeout(kPollInterval)) {
              context.TryCancel();
              return;
            }
          }
        }) {}
  ~CancelOnStop() {
    done_.Notify();
    thread_.join();
  }
  CancelOnStop(const CancelOnStop&) = delete;
  CancelOnStop& operator=(const CancelOnStop&) = delete;

 private:
  absl::Notification done_;
  std::thread thread_;  // Last: starts after done_ exists.
};

// The handlers of `jobs ...`, keyed "jobs VERB" (grpc_job_commands.cc).
std::map<std::string, Handler> JobCommandHandlers();
// `cluster status` (cluster_commands.cc).
std::map<std::string, Handler> ClusterCommandHandlers();
// `nodes ...` (node_commands.cc).
std::map<std::string, Handler> NodeCommandHandlers();

// The coordinator of `endpoints` that leads: each is asked GetClusterStatus
// (a standby names the leader, which is then asked). UNAVAILABLE naming
// every coordinator and its answer when none leads.
absl::StatusOr<std::string> FindLeader(const std::vector<std::string>& endpoints,
                                       const GlobalOptions& global);

}  // namespace ddp::ddpctl

#endif  // DDP_TOOLS_DDPCTL_GRPC_COMMAND_CONTEXT_H_
