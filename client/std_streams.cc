#include "client/std_streams.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddp::client {
namespace {

constexpr size_t kMaxShownChars = 64;

std::string Shown(absl::string_view text) {
  if (text.size() <= kMaxShownChars) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxShownChars), "...");
}

bool ParseStdValue(absl::string_view text, Std* out) {
  if (text.size() != 1 || text[0] < '0' || text[0] > '3') return false;
  *out = static_cast<Std>(text[0] - '0');
  return true;
}

absl::Status Invalid(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid stream spec '", Shown(text), "': ", why,
                   "; use 0 (none), 1 (stdout), 2 (stderr), 3 (both), or per "
                   "local rank like 0:1,1:2"));
}

}  // namespace

absl::StatusOr<StdSpec> StdSpec::Parse(absl::string_view text) {
  StdSpec spec;
  if (ParseStdValue(text, &spec.all_)) return spec;
  if (text.find(':') == absl::string_view::npos) {
    return Invalid(text, "not a single digit 0..3");
  }
  spec.uniform_ = false;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    int rank = 0;
    Std value = Std::kNone;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &rank) || rank < 0 ||
        !ParseStdValue(parts[1], &value)) {
      return Invalid(text, absl::StrCat("bad item '", Shown(item), "'"));
    }
    if (!spec.per_rank_.emplace(rank, value).second) {
      return Invalid(text, absl::StrCat("local rank ", rank, " given twice"));
    }
  }
  return spec;
}

Std StdSpec::ForRank(int local_rank) const {
  if (uniform_) return all_;
  auto it = per_rank_.find(local_rank);
  return it == per_rank_.end() ? Std::kNone : it->second;
}

std::string StdSpec::ToString() const {
  if (uniform_) return absl::StrCat(static_cast<int>(all_));
  std::vector<std::string> items;
  for (const auto& [rank, value] : per_rank_) {
    items.push_back(absl::StrCat(rank, ":", static_cast<int>(value)));
  }
  return absl::StrJoin(items, ",");
}

}  // namespace ddp::client
