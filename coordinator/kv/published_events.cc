#include "coordinator/kv/published_events.h"

#include <utility>

namespace ddp::kv {
namespace {

size_t SumBytes(const std::vector<Event>& events) {
  size_t bytes = 0;
  for (const Event& event : events) bytes += PublishedEvents::ApproxBytes(event);
  return bytes;
}

}  // namespace

size_t PublishedEvents::ApproxBytes(const Event& event) {
  return event.kv.ns.size() + event.kv.key.size() + event.kv.value.size() + kFixedEventBytes;
}

PublishedEvents::PublishedEvents(std::vector<Event> events, Revision revision)
    : events_(std::move(events)), revision_(revision), approx_bytes_(SumBytes(events_)) {}

}  // namespace ddp::kv
