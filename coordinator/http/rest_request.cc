#include "coordinator/http/rest_request.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "coordinator/http/path_template.h"
#include "coordinator/http/proto_fields.h"
#include "google/protobuf/util/json_util.h"

namespace ddp::http {
namespace {

using google::protobuf::Message;

// The query parameters, from the request target only (httplib would also
// file a form body's fields as parameters, and `curl -d` sends JSON as a form).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> QueryParams(
    absl::string_view target) {
  std::vector<std::pair<std::string, std::string>> params;
  const size_t question = target.find('?');
  if (question == absl::string_view::npos) return params;
  for (absl::string_view pair :
       absl::StrSplit(target.substr(question + 1), '&', absl::SkipEmpty())) {
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

}  // namespace

std::string TargetPath(absl::string_view target) {
  return std::string(target.substr(0, target.find('?')));
}

const google::protobuf::MethodDescriptor* FindGrpcMethod(absl::string_view grpc_path) {
  if (grpc_path.size() < 2 || grpc_path[0] != '/') return nullptr;
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
      absl::StrReplaceAll(grpc_path.substr(1), {{"/", "."}}));
}

absl::StatusOr<std::unique_ptr<Message>> BuildRestRequest(
    const RestRoute& route, const Message& prototype,
    const std::vector<std::pair<std::string, std::string>>& vars, const RestRequestParts& parts) {
  std::unique_ptr<Message> call(prototype.New());
  if (!parts.body.empty()) {
    if (route.body != "*") {
      return absl::InvalidArgumentError(absl::StrCat(
          parts.method, " ", route.path, " takes no body; give its fields as query parameters"));
    }
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    auto parsed = google::protobuf::util::JsonStringToMessage(parts.body, call.get(), options);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("request body is not a valid ",
                                                     call->GetDescriptor()->full_name(), ": ",
                                                     parsed.message().as_string()));
    }
  }
  for (const auto& [name, value] : vars) {
    DDP_RETURN_IF_ERROR(SetFieldFromText(*call, name, value));
  }
  DDP_ASSIGN_OR_RETURN(auto params, QueryParams(parts.target));
  for (const auto& [name, value] : params) {
    DDP_RETURN_IF_ERROR(SetFieldFromText(*call, name, value));
  }
  if (route.stream && parts.last_event_id.has_value()) {
    int64_t id;
    if (!absl::SimpleAtoi(*parts.last_event_id, &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Last-Event-ID '", *parts.last_event_id,
                                                     "' is not an event id this API sent"));
    }
    DDP_RETURN_IF_ERROR(SetFieldFromText(*call, route.resume_field, absl::StrCat(id + 1)));
  }
  return call;
}

}  // namespace ddp::http
