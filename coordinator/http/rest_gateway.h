#ifndef DDP_COORDINATOR_HTTP_REST_GATEWAY_H_
#define DDP_COORDINATOR_HTTP_REST_GATEWAY_H_

// The REST/JSON API: serves the routes of rest_routes.h by translating each
// request into a call of its gRPC method over an in-process channel (what
// grpc-gateway does out of process). Bodies and replies use protobuf's JSON
// mapping; errors are {code, message, details} with grpc-gateway's HTTP status
// for the code; streams are Server-Sent Events.
//
// Thread-safety: handlers run on the HTTP listener's threads, any number at
// once. BeginShutdown may be called from any thread.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/http/grpc_bridge.h"
#include "coordinator/http/path_template.h"
#include "coordinator/http/rest_routes.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"

namespace httplib {
class DataSink;
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ddp::http {

struct RestGatewayOptions {
  // Event streams open at once (each holds one HTTP worker), in all and from
  // one client address; beyond either a new stream gets 429
  // RESOURCE_EXHAUSTED. Keep max_streams below the listener's workers, so
  // that streams never take every worker.
  int max_streams = 32;
  int max_streams_per_client = 8;
  // A comment line on an idle event stream, so proxies keep it open and a
  // vanished client is noticed.
  absl::Duration stream_keepalive = absl::Seconds(15);
  // Checks an event stream's credentials before its 200 and headers go out
  // (a unary call's refusal comes from the gRPC method itself); null: none.
  // Arguments: the gRPC method, the request, the "authorization" header value.
  std::function<absl::Status(const std::string& grpc_method, const google::protobuf::Message&,
                             const std::string& authorization)>
      authorize_stream;
};

class RestGateway {
 public:
  // INTERNAL when a route names a method or template that does not resolve (a
  // programming error caught at start).
  static absl::StatusOr<std::unique_ptr<RestGateway>> Create(std::shared_ptr<grpc::Channel> channel,
                                                             RestGatewayOptions options);

  // Registers the /v1/ handlers.
  void Install(httplib::Server& server);

  // Ends every event stream within a poll interval and refuses new ones.
  void BeginShutdown() { shutting_down_.store(true); }

 private:
  struct CompiledRoute {
    const RestRoute* route;
    PathTemplate path;
    const google::protobuf::Message* request_prototype;
    const google::protobuf::Message* response_prototype;
  };

  RestGateway(std::shared_ptr<grpc::Channel> channel, RestGatewayOptions options)
      : options_(options), bridge_(std::move(channel)) {}

  void Dispatch(const httplib::Request& request, httplib::Response& response);
  absl::StatusOr<std::unique_ptr<google::protobuf::Message>> BuildRequest(
      const CompiledRoute& route, const std::vector<std::pair<std::string, std::string>>& vars,
      const httplib::Request& request) const;
  void ServeUnary(const CompiledRoute& route, const google::protobuf::Message& call,
                  const Metadata& metadata, httplib::Response& response);
  void ServeStream(const CompiledRoute& route, std::unique_ptr<google::protobuf::Message> call,
                   Metadata metadata, const std::string& client, httplib::Response& response);
  // Counts a stream of `client` in; RESOURCE_EXHAUSTED over a cap.
  absl::Status OpenStream(const std::string& client);
  void CloseStream(const std::string& client);
  void RunStream(const CompiledRoute& route, const google::protobuf::Message& call,
                 const Metadata& metadata, httplib::DataSink& sink);

  const RestGatewayOptions options_;
  GrpcBridge bridge_;
  std::vector<CompiledRoute> routes_;
  std::atomic<bool> shutting_down_{false};
  absl::Mutex streams_mu_;
  int open_streams_ ABSL_GUARDED_BY(streams_mu_) = 0;
  std::map<std::string, int> streams_by_client_ ABSL_GUARDED_BY(streams_mu_);
};

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_REST_GATEWAY_H_
