#include "common/stack_groups.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ddp {
namespace {

constexpr absl::string_view kThreadLine = "Thread (most recent call first):";

// "Thread 0x..." / "Current thread 0x..." headers, without their id.
bool IsThreadHeader(absl::string_view line) {
  return (absl::StartsWith(line, "Thread 0x") || absl::StartsWith(line, "Current thread 0x")) &&
         absl::EndsWith(line, "(most recent call first):");
}

}  // namespace

std::string NormalizeStack(const std::string& dump) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(dump, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    lines.emplace_back(IsThreadHeader(line) ? kThreadLine : line);
  }
  return absl::StrJoin(lines, "\n");
}

std::vector<StackGroup> GroupStacks(const std::vector<RankStack>& stacks) {
  std::map<std::string, std::vector<int64_t>> by_stack;
  for (const RankStack& s : stacks) {
    const std::string key =
        s.error.empty() ? NormalizeStack(s.stack) : absl::StrCat("no stack: ", s.error);
    by_stack[key].push_back(s.rank);
  }
  std::vector<StackGroup> groups;
  for (auto& [stack, ranks] : by_stack) {
    std::sort(ranks.begin(), ranks.end());
    groups.push_back(StackGroup{std::move(ranks), stack});
  }
  std::sort(groups.begin(), groups.end(), [](const StackGroup& a, const StackGroup& b) {
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() < b.ranks.size();
    return a.ranks.front() < b.ranks.front();
  });
  return groups;
}

std::string FormatStackGroups(const std::vector<StackGroup>& groups) {
  std::string out;
  for (const StackGroup& group : groups) {
    absl::StrAppend(&out, group.ranks.size() == 1 ? "rank " : "ranks ",
                    absl::StrJoin(group.ranks, ","), ":\n");
    for (absl::string_view line : absl::StrSplit(group.stack, '\n')) {
      absl::StrAppend(&out, "  ", line, "\n");
    }
  }
  return out;
}

}  // namespace ddp
