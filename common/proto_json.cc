#include "common/proto_json.h"

#include "google/protobuf/util/json_util.h"

namespace ddp {

std::string ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a valid message cannot fail (no Any with unknown types here).
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace ddp
