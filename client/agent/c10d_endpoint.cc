#include "client/agent/c10d_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/endpoint.h"
#include "common/logging.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace ddp::client {
namespace {

// host:port or [v6]:port -> (host without brackets, port).
bool SplitEndpoint(const std::string& endpoint, std::string* host, std::string* port) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = EndpointHost(endpoint);
  *port = endpoint.substr(colon + 1);
  int number = 0;
  return absl::SimpleAtoi(*port, &number) && number > 0 && number < 65536;
}

addrinfo* Resolve(const std::string& host, const std::string& port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return nullptr;
  return found;
}

}  // namespace

bool EndpointAnswers(const std::string& endpoint, absl::Duration timeout) {
  std::string host, port;
  if (!SplitEndpoint(endpoint, &host, &port)) return false;
  addrinfo* found = Resolve(host, port, 0);
  bool answered = false;
  for (addrinfo* ai = found; ai != nullptr && !answered; ai = ai->ai_next) {
    const int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      answered = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1) {
        int error = 0;
        socklen_t length = sizeof(error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        answered = error == 0;
      }
    }
    close(fd);
  }
  if (found != nullptr) freeaddrinfo(found);
  return answered;
}

bool IsLocalHost(const std::string& host) {
  addrinfo* found = Resolve(host, "0", 0);
  bool local = false;
  for (addrinfo* ai = found; ai != nullptr && !local; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    local = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;  // port 0: any free one
    close(fd);
  }
  if (found != nullptr) freeaddrinfo(found);
  return local;
}

bool SpeaksCoordinatorApi(const std::string& endpoint, absl::Duration timeout) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::JobService::Stub> stub = v1::JobService::NewStub(channel);
  grpc::ClientContext context;
  // gRPC deadlines are system_clock time points: the wall clock is deliberate.
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::GetJobRequest request;
  request.set_job_id("ddp-client-probe");
  v1::Job reply;
  const grpc::Status status = stub->GetJob(&context, request, &reply);
  // A standby coordinator (HA) answers UNAVAILABLE naming its leader.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      context.GetServerTrailingMetadata().count("ddp-leader") > 0) {
    return true;
  }
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:        // no HTTP/2 (an HTTP/1 server, a reset)
    case grpc::StatusCode::DEADLINE_EXCEEDED:  // a silent listener
    case grpc::StatusCode::UNIMPLEMENTED:      // another gRPC service
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
      return false;
    default:
      return true;
  }
}

absl::StatusOr<std::unique_ptr<StandaloneCoordinator>> ServeC10dEndpointIfHere(
    const std::string& endpoint, const std::string& form, bool plaintext,
    StandaloneCoordinatorOptions served) {
  std::string host, port;
  if (!SplitEndpoint(endpoint, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv-endpoint '", endpoint, "' needs HOST:PORT"));
  }
  if (EndpointAnswers(endpoint, absl::Milliseconds(500))) {
    if (plaintext && !SpeaksCoordinatorApi(endpoint, absl::Seconds(3))) {
      return absl::FailedPreconditionError(absl::StrCat(
          form, ": ", endpoint,
          " accepts connections but is not a coordinator (it did not answer the coordinator's "
          "API within 3 s): another program holds that port. Free it, or pick another port for "
          "every node"));
    }
    return nullptr;
  }
  if (!IsLocalHost(host)) return nullptr;  // HEAD's agent will serve it
  StandaloneCoordinatorOptions options = std::move(served);
  options.bind = "0.0.0.0";
  absl::SimpleAtoi(port, &options.port);
  absl::StatusOr<std::unique_ptr<StandaloneCoordinator>> started =
      StandaloneCoordinator::Start(options);
  if (absl::IsAlreadyExists(started.status())) {
    DDP_LOG(INFO) << form << ": another agent on this host serves " << endpoint;
    return nullptr;
  }
  if (!started.ok()) return started.status();
  DDP_LOG(WARNING)
      << form << ": no coordinator answered at " << endpoint
      << " and its host is this machine: this agent serves one there, from its own binary "
         "(a child process, like torchrun's TCPStore on the endpoint's node). Its state is lost "
         "when this agent "
         "exits; for jobs that must survive that, run a standalone `coordinator` and point "
         "--rdzv-endpoint (or --coordinator) at it";
  return started;
}

}  // namespace ddp::client
