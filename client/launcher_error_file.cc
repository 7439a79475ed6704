#include "client/launcher_error_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace ddp::client {

absl::Status WriteLauncherErrorFile(const std::string& path, const std::string& message,
                                    const std::string& details, absl::Time when) {
  google::protobuf::Struct root;
  google::protobuf::Struct* inner = (*root.mutable_fields())["message"].mutable_struct_value();
  (*inner->mutable_fields())["message"].set_string_value(message);
  google::protobuf::Struct* extra = (*inner->mutable_fields())["extraInfo"].mutable_struct_value();
  (*extra->mutable_fields())["py_callstack"].set_string_value(details);
  (*extra->mutable_fields())["timestamp"].set_string_value(absl::StrCat(absl::ToUnixSeconds(when)));
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(root, &json).ok()) {
    return absl::InternalError("cannot render the launcher error file as JSON");
  }
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << json << "\n";
    out.close();
    if (!out) {
      return absl::UnavailableError(absl::StrCat("cannot write TORCHELASTIC_ERROR_FILE ", path));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write TORCHELASTIC_ERROR_FILE ", path));
  }
  return absl::OkStatus();
}

}  // namespace ddp::client
