#include "coordinator/rendezvous/write_behind_queue.h"

#include <iterator>

#include "common/logging.h"

namespace ddp::rendezvous {
namespace {

void MoveAppend(Outbox& from, Outbox& to) {
  if (to.empty()) {
    std::swap(from, to);
    return;
  }
  to.messages.insert(to.messages.end(), std::make_move_iterator(from.messages.begin()),
                     std::make_move_iterator(from.messages.end()));
  to.events.insert(to.events.end(), std::make_move_iterator(from.events.begin()),
                   std::make_move_iterator(from.events.end()));
  from.messages.clear();
  from.events.clear();
}

}  // namespace

void WriteBehindQueue::Add(JobChanges changes) {
  if (changes.empty()) return;
  pending_.push_back(std::move(changes));
}

uint64_t WriteBehindQueue::Mark() const {
  if (!pending_.empty()) return next_;
  if (in_flight_ != 0) return in_flight_;
  return committed_;
}

void WriteBehindQueue::Hold(Outbox& outbox) {
  if (outbox.empty()) return;
  const uint64_t mark = Mark();
  if (mark == committed_) return;  // nothing to wait for
  held_messages_ += outbox.messages.size() + outbox.events.size();
  if (held_.empty() || held_.back().batch != mark) {
    held_.push_back(Held{mark, Outbox()});
  }
  MoveAppend(outbox, held_.back().outbox);
}

WriteBehindQueue::Batch WriteBehindQueue::TakeBatch() {
  DDP_CHECK(in_flight_ == 0) << "a batch is already in flight";
  Batch batch;
  if (pending_.empty()) return batch;
  batch.number = next_++;
  batch.changes = std::move(pending_);
  pending_.clear();
  in_flight_ = batch.number;
  return batch;
}

std::vector<std::function<void()>> WriteBehindQueue::Committed(Outbox& outbox) {
  DDP_CHECK(in_flight_ != 0) << "no batch in flight";
  committed_ = in_flight_;
  in_flight_ = 0;
  while (!held_.empty() && held_.front().batch <= committed_) {
    Held& front = held_.front();
    held_messages_ -= front.outbox.messages.size() + front.outbox.events.size();
    MoveAppend(front.outbox, outbox);
    held_.pop_front();
  }
  std::vector<std::function<void()>> due;
  while (!waiters_.empty() && waiters_.front().first <= committed_) {
    due.push_back(std::move(waiters_.front().second));
    waiters_.pop_front();
  }
  return due;
}

void WriteBehindQueue::Failed(Batch batch) {
  DDP_CHECK(in_flight_ == batch.number) << "not the batch in flight";
  in_flight_ = 0;
  // The failed changes come first; held entries and waiters tagged with the
  // failed number are released by the next commit (numbers only grow).
  batch.changes.insert(batch.changes.end(), std::make_move_iterator(pending_.begin()),
                       std::make_move_iterator(pending_.end()));
  pending_ = std::move(batch.changes);
}

bool WriteBehindQueue::WhenDurable(uint64_t mark, std::function<void()> fn) {
  if (mark <= committed_) return false;
  // Marks are handed out in order, but a caller may register late: keep the
  // queue sorted.
  auto it = waiters_.end();
  while (it != waiters_.begin() && std::prev(it)->first > mark) --it;
  waiters_.insert(it, {mark, std::move(fn)});
  return true;
}

}  // namespace ddp::rendezvous
