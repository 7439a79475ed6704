// REST routing and decoding with untrusted input: "METHOD PATH?QUERY\nBODY"
// goes through the route table's templates, percent-decoding, query
// parameters into the request message and protobuf's JSON parser, as the
// gateway does before it calls a method. Nothing may crash, hang or leak.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "coordinator/http/path_template.h"
#include "coordinator/http/proto_fields.h"
#include "coordinator/http/rest_routes.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/util/json_util.h"
#include "proto/ddp/v1/jobs.pb.h"
#include "proto/ddp/v1/kv.pb.h"

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
    auto* list = new std::vector<Route>;
    const auto* pool = google::protobuf::DescriptorPool::generated_pool();
    for (const auto& route : ddp::http::RestRoutes()) {
      std::string name = route.grpc_method.substr(1);
      name[name.find('/')] = '.';
      const auto* method = pool->FindMethodByName(name);
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
  const std::string body = newline == std::string::npos ? "" : input.substr(newline + 1);
  const size_t space = line.find(' ');
  const std::string verb = line.substr(0, space);
  const std::string target = space == std::string::npos ? "" : line.substr(space + 1);
  const std::string path = target.substr(0, target.find('?'));
  const std::string query =
      target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1);
  std::vector<std::pair<std::string, std::string>> vars;
  for (const Route& route : Routes()) {
    if (!route.path.Match(path, &vars)) continue;
    if (route.route->http_method != verb) continue;
    std::unique_ptr<google::protobuf::Message> request(route.prototype->New());
    if (!body.empty()) {
      (void)google::protobuf::util::JsonStringToMessage(body, request.get());
    }
    for (const auto& [name, value] : vars) {
      (void)ddp::http::SetFieldFromText(*request, name, value);
    }
    for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
      const size_t eq = pair.find('=');
      auto name = ddp::http::PercentDecode(pair.substr(0, eq));
      auto value = ddp::http::PercentDecode(eq == absl::string_view::npos ? ""
                                                                          : pair.substr(eq + 1));
      if (name.ok() && value.ok()) (void)ddp::http::SetFieldFromText(*request, *name, *value);
    }
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(*request, &json);
    break;
  }
  return 0;
}
