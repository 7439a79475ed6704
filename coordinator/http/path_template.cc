#include "coordinator/http/path_template.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddp::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

absl::StatusOr<std::string> PercentDecode(absl::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] != '%') {
      out.push_back(encoded[i]);
      continue;
    }
    const int hi = i + 1 < encoded.size() ? HexValue(encoded[i + 1]) : -1;
    const int lo = i + 2 < encoded.size() ? HexValue(encoded[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(absl::StrCat("malformed percent-escape at offset ", i,
                                                     " of '", encoded,
                                                     "'; escape a literal '%' as %25"));
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

absl::StatusOr<PathTemplate> PathTemplate::Parse(absl::string_view pattern) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("path template '", pattern, "': ", why));
  };
  if (!absl::StartsWith(pattern, "/")) return bad("must start with '/'");
  PathTemplate t;
  t.pattern_ = std::string(pattern);
  absl::string_view body = pattern.substr(1);
  // A verb follows the last ':' that is outside braces.
  const size_t close = body.rfind('}');
  const size_t colon = body.rfind(':');
  if (colon != absl::string_view::npos && (close == absl::string_view::npos || colon > close)) {
    t.verb_ = std::string(body.substr(colon + 1));
    body = body.substr(0, colon);
    if (t.verb_.empty()) return bad("empty verb after ':'");
  }
  for (absl::string_view part : absl::StrSplit(body, '/')) {
    if (part.empty()) return bad("empty segment");
    Segment seg;
    if (part.front() == '{') {
      if (part.back() != '}') return bad(absl::StrCat("unclosed variable '", part, "'"));
      absl::string_view inner = part.substr(1, part.size() - 2);
      if (absl::ConsumeSuffix(&inner, "=**")) seg.rest = true;
      if (inner.empty() || absl::StrContains(inner, '=')) {
        return bad(absl::StrCat("variable '", part, "' must be {name} or {name=**}"));
      }
      seg.variable = std::string(inner);
    } else {
      if (absl::StrContains(part, '{') || absl::StrContains(part, '}')) {
        return bad(absl::StrCat("segment '", part, "' mixes text and a variable"));
      }
      seg.literal = std::string(part);
    }
    if (!t.segments_.empty() && t.segments_.back().rest) {
      return bad("{name=**} must be the last segment");
    }
    t.segments_.push_back(std::move(seg));
  }
  return t;
}

bool PathTemplate::Match(absl::string_view path,
                         std::vector<std::pair<std::string, std::string>>* vars) const {
  vars->clear();
  if (!absl::ConsumePrefix(&path, "/")) return false;
  if (!verb_.empty() && !absl::ConsumeSuffix(&path, absl::StrCat(":", verb_))) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  if (parts.size() < segments_.size()) return false;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& seg = segments_[i];
    if (seg.variable.empty()) {
      if (parts[i] != seg.literal) return false;
      continue;
    }
    std::string raw;
    if (seg.rest) {
      raw = absl::StrJoin(parts.begin() + i, parts.end(), "/");
    } else {
      raw = std::string(parts[i]);
    }
    if (raw.empty()) return false;
    absl::StatusOr<std::string> value = PercentDecode(raw);
    if (!value.ok()) return false;
    vars->emplace_back(seg.variable, *std::move(value));
    if (seg.rest) return true;
  }
  return parts.size() == segments_.size();
}

}  // namespace ddp::http
