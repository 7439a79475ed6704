#include "client/launcher_error_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace ddp::client {

namespace {

// Atomically: a scheduler never reads half a file.
absl::Status WriteAtomically(const std::string& path, const std::string& text) {
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::remove(temp.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write TORCHELASTIC_ERROR_FILE ", path));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write TORCHELASTIC_ERROR_FILE ", path));
  }
  return absl::OkStatus();
}

constexpr std::streamsize kMaxWorkerErrorFileBytes = 1 << 20;

}  // namespace

absl::Status CopyWorkerErrorFile(const std::string& worker_file, int exit_code,
                                 const std::string& path) {
  std::ifstream in(worker_file);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("no worker error file ", worker_file));
  }
  std::string text(static_cast<size_t>(kMaxWorkerErrorFileBytes), '\0');
  in.read(text.data(), kMaxWorkerErrorFileBytes);
  text.resize(static_cast<size_t>(in.gcount()));
  google::protobuf::Struct root;
  if (!google::protobuf::util::JsonStringToMessage(text, &root).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("worker error file ", worker_file,
                                                   " is not JSON (or over 1 MiB): not copied"));
  }
  auto message = root.mutable_fields()->find("message");
  if (exit_code != 0 && message != root.mutable_fields()->end() &&
      message->second.has_struct_value()) {
    (*message->second.mutable_struct_value()->mutable_fields())["errorCode"].set_number_value(
        exit_code);
  }
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(root, &json).ok()) {
    return absl::InternalError("cannot render the launcher error file as JSON");
  }
  return WriteAtomically(path, json);
}

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
  return WriteAtomically(path, json + "\n");
}

}  // namespace ddp::client
