#include "client/hang_order.h"

#include <algorithm>
#include <tuple>

namespace ddp::client {

void OrderByLastHeartbeat(std::vector<HungWorker>& hung) {
  std::sort(hung.begin(), hung.end(), [](const HungWorker& a, const HungWorker& b) {
    return std::tie(a.last_touch, a.last_mtime, a.global_rank) <
           std::tie(b.last_touch, b.last_mtime, b.global_rank);
  });
}

}  // namespace ddp::client
