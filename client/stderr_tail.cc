#include "client/stderr_tail.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace ddp::client {
namespace {

constexpr size_t kMinSecretChars = 4;
constexpr absl::string_view kTracebackStart = "Traceback (most recent call last):";

bool NameSaysSecret(absl::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(name);
  for (absl::string_view word :
       {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY"}) {
    if (absl::StrContains(upper, word)) return true;
  }
  return false;
}

}  // namespace

void StderrTail::Append(absl::string_view bytes) {
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == absl::string_view::npos) {
      partial_.append(bytes.data(), bytes.size());
      // An endless line (a progress bar with "\r"): keep its end only.
      if (partial_.size() > limits_.max_bytes) {
        partial_.erase(0, partial_.size() - limits_.max_bytes);
      }
      break;
    }
    partial_.append(bytes.data(), newline);
    if (partial_.size() > limits_.max_bytes) {
      partial_.erase(0, partial_.size() - limits_.max_bytes);
    }
    bytes_ += partial_.size() + 1;
    lines_.push_back(std::move(partial_));
    partial_.clear();
    bytes.remove_prefix(newline + 1);
  }
  Trim();
}

void StderrTail::Trim() {
  while (!lines_.empty() && (lines_.size() + (partial_.empty() ? 0 : 1) > limits_.max_lines ||
                             bytes_ + partial_.size() > limits_.max_bytes)) {
    bytes_ -= lines_.front().size() + 1;
    lines_.pop_front();
  }
}

std::string StderrTail::Text() const {
  std::string text;
  text.reserve(bytes_ + partial_.size());
  for (const std::string& line : lines_) {
    text.append(line);
    text.push_back('\n');
  }
  text.append(partial_);
  return text;
}

std::vector<std::string> SecretValuesIn(const std::map<std::string, std::string>& env) {
  std::vector<std::string> secrets;
  for (const auto& [name, value] : env) {
    if (value.size() >= kMinSecretChars && NameSaysSecret(name)) secrets.push_back(value);
  }
  // Longest first: a secret that contains another is hidden whole.
  std::sort(secrets.begin(), secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  secrets.erase(std::unique(secrets.begin(), secrets.end()), secrets.end());
  return secrets;
}

std::string RedactSecrets(absl::string_view text, const std::vector<std::string>& secrets) {
  std::string out(text);
  for (const std::string& secret : secrets) {
    if (secret.empty()) continue;
    absl::StrReplaceAll({{secret, "[REDACTED]"}}, &out);
  }
  return out;
}

std::string PythonTracebackIn(absl::string_view text) {
  const size_t start = text.rfind(kTracebackStart);
  if (start == absl::string_view::npos) return "";
  // The header must begin its line.
  if (start > 0 && text[start - 1] != '\n') return "";
  std::vector<absl::string_view> lines = absl::StrSplit(text.substr(start), '\n');
  std::string traceback;
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    traceback.append(line.data(), line.size());
    traceback.push_back('\n');
    // After the header, frames are indented; the first line that is not
    // (and is not empty) is the exception ("ValueError: boom"), the end.
    if (i > 0 && !line.empty() && line[0] != ' ' && line[0] != '\t') break;
  }
  while (!traceback.empty() && traceback.back() == '\n') traceback.pop_back();
  return traceback;
}

}  // namespace ddp::client
