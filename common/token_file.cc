#include "common/token_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ddp {

absl::StatusOr<std::string> ReadTokenFile(absl::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": cannot open it (does it exist, is it readable?)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxTokenBytes + 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": longer than ", kMaxTokenBytes, " bytes"));
  }
  const std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.size() < kMinTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", path, ": the token must be at least ", kMinTokenBytes,
        " bytes (e.g. head -c 32 /dev/urandom | base64)"));
  }
  for (char c : token) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || !absl::ascii_isprint(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, "=", path, ": the token must be one line of printable characters"));
    }
  }
  return token;
}

}  // namespace ddp
