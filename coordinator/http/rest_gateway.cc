#include "coordinator/http/rest_gateway.h"

#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/proto_json.h"
#include "common/status_macros.h"
#include "coordinator/http/http_errors.h"
#include "coordinator/http/rest_request.h"
#include "google/protobuf/descriptor.h"
#include "httplib.h"
#include "proto/ddp/v1/cluster.pb.h"
#include "proto/ddp/v1/jobs.pb.h"
#include "proto/ddp/v1/kv.pb.h"
#include "proto/ddp/v1/nodes.pb.h"

namespace ddp::http {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// With a charset, httplib does not compress replies: its brotli (the choice for
// browsers) took ~0.7 s for a 1,024-member job; loopback and LAN gain nothing.
constexpr char kJson[] = "application/json; charset=utf-8";

void ReplyError(const absl::Status& status, httplib::Response& response) {
  response.status = HttpStatusFromCode(status.code());
  response.set_content(ErrorJson(status), kJson);
}

// Credentials and tracing travel to the gRPC method as metadata.
Metadata ForwardedMetadata(const httplib::Request& request) {
  Metadata metadata;
  for (const char* header : {"authorization", "x-request-id"}) {
    if (request.has_header(header)) {
      metadata.emplace_back(header, request.get_header_value(header));
    }
  }
  return metadata;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RestGateway>> RestGateway::Create(
    std::shared_ptr<grpc::Channel> channel, RestGatewayOptions options) {
  // Referencing the descriptors links the generated code that registers them.
  const google::protobuf::Descriptor* linked[] = {
      ddp::v1::Job::descriptor(), ddp::v1::PutRequest::descriptor(),
      ddp::v1::ClusterStatus::descriptor(), ddp::v1::Node::descriptor()};
  (void)linked;
  std::unique_ptr<RestGateway> gateway(new RestGateway(std::move(channel), options));
  auto* factory = google::protobuf::MessageFactory::generated_factory();
  for (const RestRoute& route : RestRoutes()) {
    const google::protobuf::MethodDescriptor* method = FindGrpcMethod(route.grpc_method);
    if (method == nullptr || method->server_streaming() != route.stream) {
      return absl::InternalError(absl::StrCat("route ", route.http_method, " ", route.path,
                                              ": no such ", route.stream ? "streaming " : "",
                                              "method ", route.grpc_method));
    }
    auto path = PathTemplate::Parse(route.path);
    if (!path.ok()) return absl::InternalError(path.status().message());
    gateway->routes_.push_back({&route, *std::move(path),
                                factory->GetPrototype(method->input_type()),
                                factory->GetPrototype(method->output_type())});
  }
  return gateway;
}

void RestGateway::Install(httplib::Server& server) {
  auto handler = [this](const httplib::Request& request, httplib::Response& response) {
    Dispatch(request, response);
  };
  server.Get("/v1/.*", handler);
  server.Post("/v1/.*", handler);
  server.Put("/v1/.*", handler);
  server.Patch("/v1/.*", handler);
  server.Delete("/v1/.*", handler);
}

void RestGateway::Dispatch(const httplib::Request& request, httplib::Response& response) {
  const std::string path = TargetPath(request.target.empty() ? request.path : request.target);
  std::vector<std::pair<std::string, std::string>> vars;
  bool path_known = false;
  for (const CompiledRoute& route : routes_) {
    if (!route.path.Match(path, &vars)) continue;
    path_known = true;
    if (route.route->http_method != request.method) continue;
    absl::StatusOr<std::unique_ptr<Message>> call = BuildRequest(route, vars, request);
    if (!call.ok()) return ReplyError(call.status(), response);
    if (route.route->stream) {
      return ServeStream(route, *std::move(call), ForwardedMetadata(request), request.remote_addr,
                         response);
    }
    return ServeUnary(route, **call, ForwardedMetadata(request), response);
  }
  if (path_known) {
    response.status = 405;
    response.set_content(ErrorJson(absl::UnimplementedError(absl::StrCat(
                             request.method, " is not a method of ", path, "; see docs/api.md"))),
                         kJson);
    return;
  }
  ReplyError(absl::NotFoundError(absl::StrCat("no REST route ", request.method, " ", path,
                                              "; the routes are listed in docs/api.md")),
             response);
}

absl::StatusOr<std::unique_ptr<Message>> RestGateway::BuildRequest(
    const CompiledRoute& route, const std::vector<std::pair<std::string, std::string>>& vars,
    const httplib::Request& request) const {
  RestRequestParts parts{request.method, request.target, request.body, std::nullopt};
  if (request.has_header("Last-Event-ID")) {
    parts.last_event_id = request.get_header_value("Last-Event-ID");
  }
  return BuildRestRequest(*route.route, *route.request_prototype, vars, parts);
}

void RestGateway::ServeUnary(const CompiledRoute& route, const Message& call,
                             const Metadata& metadata, httplib::Response& response) {
  std::unique_ptr<Message> reply(route.response_prototype->New());
  absl::Status status = bridge_.Unary(route.route->grpc_method, call, reply.get(), metadata);
  if (!status.ok()) return ReplyError(status, response);
  response.set_content(ProtoJson(*reply), kJson);
}

absl::Status RestGateway::OpenStream(const std::string& client) {
  absl::MutexLock lock(&streams_mu_);
  if (open_streams_ >= options_.max_streams) {
    return absl::ResourceExhaustedError(absl::StrCat("too many event streams open (limit ",
                                                     options_.max_streams,
                                                     "); close one or use the gRPC method"));
  }
  int& from_client = streams_by_client_[client];
  if (from_client >= options_.max_streams_per_client) {
    if (from_client == 0) streams_by_client_.erase(client);
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many event streams open from ", client.substr(0, 64), " (limit ",
        options_.max_streams_per_client, " per client address); close one or use the gRPC method"));
  }
  ++from_client;
  ++open_streams_;
  return absl::OkStatus();
}

void RestGateway::CloseStream(const std::string& client) {
  absl::MutexLock lock(&streams_mu_);
  --open_streams_;
  auto it = streams_by_client_.find(client);
  if (it != streams_by_client_.end() && --it->second <= 0) streams_by_client_.erase(it);
}

void RestGateway::ServeStream(const CompiledRoute& route, std::unique_ptr<Message> call,
                              Metadata metadata, const std::string& client,
                              httplib::Response& response) {
  if (shutting_down_.load()) {
    return ReplyError(absl::UnavailableError("the coordinator is shutting down; retry"), response);
  }
  if (absl::Status opened = OpenStream(client); !opened.ok()) {
    return ReplyError(opened, response);
  }
  if (options_.authorize_stream) {
    std::string authorization;
    for (const auto& [key, value] : metadata) {
      if (key == "authorization") authorization = value;
    }
    absl::Status allowed =
        options_.authorize_stream(route.route->grpc_method, *call, authorization);
    if (!allowed.ok()) {
      CloseStream(client);
      return ReplyError(allowed, response);
    }
  }
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");
  std::shared_ptr<const Message> shared_call(std::move(call));
  response.set_chunked_content_provider(
      "text/event-stream",
      [this, &route, shared_call, metadata](size_t, httplib::DataSink& sink) {
        RunStream(route, *shared_call, metadata, sink);
        sink.done();
        return true;
      },
      [this, client](bool) { CloseStream(client); });
}

void RestGateway::RunStream(const CompiledRoute& route, const Message& call,
                            const Metadata& metadata, httplib::DataSink& sink) {
  absl::Time last_write = absl::Now();
  bool client_gone = false;
  auto write = [&](const std::string& text) {
    if (client_gone || !sink.write(text.data(), text.size())) {
      client_gone = true;
      return false;
    }
    last_write = absl::Now();
    return true;
  };
  if (!write(": stream open\n\n")) return;
  auto on_message = [&](const Message& message) {
    std::string event;
    const auto* id_field = message.GetDescriptor()->FindFieldByName(route.route->event_id_field);
    if (id_field != nullptr && id_field->cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
      absl::StrAppend(&event, "id: ", message.GetReflection()->GetInt64(message, id_field), "\n");
    }
    absl::StrAppend(&event, "data: ", ProtoJson(message), "\n\n");
    return write(event);
  };
  auto still_wanted = [&] {
    if (shutting_down_.load() || !sink.is_writable()) return false;
    if (absl::Now() - last_write >= options_.stream_keepalive) return write(": keepalive\n\n");
    return true;
  };
  absl::Status status =
      bridge_.ServerStream(route.route->grpc_method, call, *route.response_prototype, metadata,
                           on_message, still_wanted);
  if (client_gone) return;
  if (shutting_down_.load()) {
    status =
        absl::UnavailableError("the coordinator is shutting down; reconnect with Last-Event-ID");
  }
  if (!status.ok()) write(absl::StrCat("event: error\ndata: ", ErrorJson(status), "\n\n"));
}

}  // namespace ddp::http
