// REST routing and decoding with untrusted input: "METHOD PATH?QUERY\nBODY"
// goes through the route table's templates and the gateway's own decoding
// (BuildRestRequest: percent-decoding, query parameters, protobuf's JSON
// parser, Last-Event-ID when the body starts with '#'). Nothing may crash,
// hang or leak.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/http/path_template.h"
#include "coordinator/http/rest_request.h"
#include "coordinator/http/rest_routes.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "proto/ddp/v1/cluster.pb.h"
#include "proto/ddp/v1/jobs.pb.h"
#include "proto/ddp/v1/kv.pb.h"
#include "proto/ddp/v1/nodes.pb.h"

namespace {

struct Route {
  const ddp::http::RestRoute* route;
  ddp::http::PathTemplate path;
  const google::protobuf::Message* prototype;
};

const std::vector<Route>& Routes() {
  static const auto* routes = [] {
    (void)ddp::v1::Job::descriptor();
    (void)ddp::v1::PutRequest::descriptor();
    (void)ddp::v1::GetClusterStatusRequest::descriptor();
    (void)ddp::v1::ListNodesRequest::descriptor();
    auto* list = new std::vector<Route>;
    for (const auto& route : ddp::http::RestRoutes()) {
      const auto* method = ddp::http::FindGrpcMethod(route.grpc_method);
      // Every route's service must be linked in here: a missing one is a
      // defect of this target, not an input to skip.
      if (method == nullptr) {
        std::fprintf(stderr, "route %s: method %s is not linked in\n", route.path.c_str(),
                     route.grpc_method.c_str());
        std::abort();
      }
      list->push_back({&route, *ddp::http::PathTemplate::Parse(route.path),
                       google::protobuf::MessageFactory::generated_factory()->GetPrototype(
                           method->input_type())});
    }
    return list;
  }();
  return *routes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string line = input.substr(0, newline);
  const size_t space = line.find(' ');
  ddp::http::RestRequestParts parts;
  parts.method = line.substr(0, space);
  parts.target = space == std::string::npos ? "" : line.substr(space + 1);
  parts.body = newline == std::string::npos ? "" : input.substr(newline + 1);
  if (!parts.body.empty() && parts.body[0] == '#') parts.last_event_id = parts.body.substr(1, 20);
  const std::string path = ddp::http::TargetPath(parts.target);
  std::vector<std::pair<std::string, std::string>> vars;
  for (const Route& route : Routes()) {
    if (!route.path.Match(path, &vars) || route.route->http_method != parts.method) continue;
    // The gateway's own decoding, as for a real request.
    auto request = ddp::http::BuildRestRequest(*route.route, *route.prototype, vars, parts);
    if (request.ok()) {
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(**request, &json);
    }
    break;
  }
  return 0;
}
