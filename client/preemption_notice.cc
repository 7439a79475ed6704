#include "client/preemption_notice.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddp::client {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// A JSON string literal of `text` (quotes, backslashes and control characters
// escaped).
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

absl::Status WritePreemptionNotice(const std::string& path, const PreemptionNotice& notice) {
  const std::string json = absl::StrCat(
      "{\"node_id\": ", JsonString(notice.node_id),
      ", \"leave_at_unix_ms\": ", absl::ToUnixMillis(notice.leaves_at),
      ", \"reason\": ", JsonString(notice.reason), ", \"generation\": ", notice.generation, "}\n");
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << json;
    out.close();
    if (!out) {
      return absl::InternalError(
          absl::StrCat("cannot write the preemption notice ", temporary, ": ", strerror(errno)));
    }
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", temporary, " to ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

bool AllReadyToLeave(const std::vector<std::string>& ready_files) {
  if (ready_files.empty()) return false;
  for (const std::string& file : ready_files) {
    if (!Exists(file)) return false;
  }
  return true;
}

std::optional<absl::Duration> ReadCloudNotice(const std::string& path, absl::Duration fallback) {
  std::ifstream in(path);
  if (!in) {
    // Absent, or unreadable: an unreadable notice is still a notice.
    return Exists(path) ? std::optional<absl::Duration>(fallback) : std::nullopt;
  }
  std::stringstream content;
  content << in.rdbuf();
  int64_t seconds = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(content.str()), &seconds) && seconds >= 0) {
    return std::min(absl::Seconds(seconds), kMaxCloudNoticeGrace);
  }
  return fallback;
}

}  // namespace ddp::client
