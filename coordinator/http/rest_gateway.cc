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
#include "coordinator/http/proto_fields.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "httplib.h"
#include "proto/ddp/v1/jobs.pb.h"
#include "proto/ddp/v1/kv.pb.h"

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

// The path without the query string, as sent (still percent-encoded), so an
// encoded '/' or ':' in a key is not taken for a separator.
std::string RawPath(const httplib::Request& request) {
  const std::string& target = request.target.empty() ? request.path : request.target;
  return target.substr(0, target.find('?'));
}

// The query parameters, from the request line only: httplib also files a form
// body's fields under params, and `curl -d` sends JSON as a form.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> QueryParams(
    const httplib::Request& request) {
  std::vector<std::pair<std::string, std::string>> params;
  const size_t question = request.target.find('?');
  if (question == std::string::npos) return params;
  for (absl::string_view pair : absl::StrSplit(
           absl::string_view(request.target).substr(question + 1), '&', absl::SkipEmpty())) {
    const size_t eq = pair.find('=');
    std::string name = absl::StrReplaceAll(pair.substr(0, eq), {{"+", " "}});
    std::string value =
        eq == absl::string_view::npos ? "" : absl::StrReplaceAll(pair.substr(eq + 1), {{"+", " "}});
    DDP_ASSIGN_OR_RETURN(name, PercentDecode(name));
    DDP_ASSIGN_OR_RETURN(value, PercentDecode(value));
    params.emplace_back(std::move(name), std::move(value));
  }
  return params;
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
  const google::protobuf::Descriptor* linked[] = {ddp::v1::Job::descriptor(),
                                                  ddp::v1::PutRequest::descriptor()};
  (void)linked;
  std::unique_ptr<RestGateway> gateway(new RestGateway(std::move(channel), options));
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  auto* factory = google::protobuf::MessageFactory::generated_factory();
  for (const RestRoute& route : RestRoutes()) {
    const std::string full_name = absl::StrReplaceAll(route.grpc_method.substr(1), {{"/", "."}});
    const google::protobuf::MethodDescriptor* method = pool->FindMethodByName(full_name);
    if (method == nullptr || method->server_streaming() != route.stream) {
      return absl::InternalError(absl::StrCat("route ", route.http_method, " ", route.path,
                                              ": no such ", route.stream ? "streaming " : "",
                                              "method ", full_name));
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
  const std::string path = RawPath(request);
  std::vector<std::pair<std::string, std::string>> vars;
  bool path_known = false;
  for (const CompiledRoute& route : routes_) {
    if (!route.path.Match(path, &vars)) continue;
    path_known = true;
    if (route.route->http_method != request.method) continue;
    absl::StatusOr<std::unique_ptr<Message>> call = BuildRequest(route, vars, request);
    if (!call.ok()) return ReplyError(call.status(), response);
    if (route.route->stream) {
      return ServeStream(route, *std::move(call), ForwardedMetadata(request), response);
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
  std::unique_ptr<Message> call(route.request_prototype->New());
  if (!request.body.empty()) {
    if (route.route->body != "*") {
      return absl::InvalidArgumentError(
          absl::StrCat(request.method, " ", route.route->path,
                       " takes no body; give its fields as query parameters"));
    }
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    auto parsed = google::protobuf::util::JsonStringToMessage(request.body, call.get(), options);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("request body is not a valid ",
                                                     call->GetDescriptor()->full_name(), ": ",
                                                     parsed.message().as_string()));
    }
  }
  for (const auto& [name, value] : vars) {
    DDP_RETURN_IF_ERROR(SetFieldFromText(*call, name, value));
  }
  DDP_ASSIGN_OR_RETURN(auto params, QueryParams(request));
  for (const auto& [name, value] : params) {
    DDP_RETURN_IF_ERROR(SetFieldFromText(*call, name, value));
  }
  if (route.route->stream && request.has_header("Last-Event-ID")) {
    const std::string last = request.get_header_value("Last-Event-ID");
    int64_t id;
    if (!absl::SimpleAtoi(last, &id) || id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Last-Event-ID '", last, "' is not an event id this API sent"));
    }
    DDP_RETURN_IF_ERROR(SetFieldFromText(*call, route.route->resume_field, absl::StrCat(id + 1)));
  }
  return call;
}

void RestGateway::ServeUnary(const CompiledRoute& route, const Message& call,
                             const Metadata& metadata, httplib::Response& response) {
  std::unique_ptr<Message> reply(route.response_prototype->New());
  absl::Status status = bridge_.Unary(route.route->grpc_method, call, reply.get(), metadata);
  if (!status.ok()) return ReplyError(status, response);
  response.set_content(ProtoJson(*reply), kJson);
}

void RestGateway::ServeStream(const CompiledRoute& route, std::unique_ptr<Message> call,
                              Metadata metadata, httplib::Response& response) {
  if (shutting_down_.load()) {
    return ReplyError(absl::UnavailableError("the coordinator is shutting down; retry"), response);
  }
  if (open_streams_.fetch_add(1) >= options_.max_streams) {
    open_streams_.fetch_sub(1);
    return ReplyError(absl::ResourceExhaustedError(
                          absl::StrCat("too many event streams open (limit ", options_.max_streams,
                                       "); close one or use the gRPC method")),
                      response);
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
      [this](bool) { open_streams_.fetch_sub(1); });
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
