#ifndef DDP_COMMON_STACK_GROUPS_H_
#define DDP_COMMON_STACK_GROUPS_H_

// Many ranks' Python stacks, side by side: ranks whose stacks are the same
// (after NormalizeStack) form one group, so the rank that is somewhere else
// stands out. Used by the agent (its node's workers) and by whoever shows a
// job's stacks.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

struct RankStack {
  int64_t rank = -1;
  std::string node;   // where it runs (shown for ranks whose stack is missing)
  std::string stack;  // faulthandler's dump; empty when `error` is set
  std::string error;  // why there is no stack
};

struct StackGroup {
  std::vector<int64_t> ranks;  // ascending
  // The normalized stack, or "no stack: <error>" for ranks without one.
  std::string stack;
};

// faulthandler's dump with what differs between identical stacks taken out:
// thread ids ("Thread 0x00007f3a... (most recent call first):" and "Current
// thread 0x..." both become "Thread (most recent call first):"), trailing
// spaces and blank lines. File names, line numbers and functions stay.
std::string NormalizeStack(const std::string& dump);

// Groups by identical normalized stack (or identical error). Order: the
// smallest group first (the odd one out), then by lowest rank.
std::vector<StackGroup> GroupStacks(const std::vector<RankStack>& stacks);

// "rank 2:\n  <stack lines>\nranks 0,1,3:\n  <stack lines>\n".
std::string FormatStackGroups(const std::vector<StackGroup>& groups);

}  // namespace ddp

#endif  // DDP_COMMON_STACK_GROUPS_H_
