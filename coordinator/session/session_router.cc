#include "coordinator/session/session_router.h"

namespace ddp::session {

void SessionRouter::Attach(const std::string& job_id, const std::string& node_id,
                           rendezvous::Incarnation incarnation, SinkPtr sink) {
  absl::MutexLock lock(&mu_);
  sessions_[Key(job_id, node_id)].push_back(Session{incarnation, std::move(sink)});
  ++session_count_;
}

std::vector<SessionRouter::SinkPtr> SessionRouter::Confirm(const std::string& job_id,
                                                           const std::string& node_id,
                                                           const SessionSink* sink) {
  std::vector<SinkPtr> displaced;
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(Key(job_id, node_id));
  if (it == sessions_.end()) return displaced;
  std::vector<Session>& list = it->second;
  bool found = false;
  for (const Session& s : list) found = found || s.sink.get() == sink;
  if (!found) return displaced;
  std::vector<Session> kept;
  for (Session& s : list) {
    if (s.sink.get() == sink) {
      kept.push_back(std::move(s));
    } else {
      displaced.push_back(std::move(s.sink));
    }
  }
  session_count_ -= static_cast<int>(displaced.size());
  list = std::move(kept);
  return displaced;
}

bool SessionRouter::Detach(const std::string& job_id, const std::string& node_id,
                           const SessionSink* sink) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(Key(job_id, node_id));
  if (it == sessions_.end()) return false;
  std::vector<Session>& list = it->second;
  for (auto s = list.begin(); s != list.end(); ++s) {
    if (s->sink.get() != sink) continue;
    list.erase(s);
    --session_count_;
    if (list.empty()) sessions_.erase(it);
    return true;
  }
  return false;
}

bool SessionRouter::Route(const rendezvous::OutboundMessage& message) {
  SinkPtr target;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(Key(message.job_id, message.node_id));
    if (it != sessions_.end()) {
      for (auto s = it->second.rbegin(); s != it->second.rend(); ++s) {
        if (s->incarnation == message.incarnation) {
          target = s->sink;
          break;
        }
      }
    }
    if (target == nullptr) {
      ++dropped_;
      return false;
    }
    ++routed_;
  }
  target->Deliver(message);
  return true;
}

void SessionRouter::CloseAll(const absl::Status& status) {
  std::vector<SinkPtr> sinks;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, list] : sessions_) {
      for (Session& s : list) sinks.push_back(std::move(s.sink));
    }
    sessions_.clear();
    session_count_ = 0;
  }
  for (const SinkPtr& sink : sinks) sink->Close(status);
}

int64_t SessionRouter::routed() const {
  absl::MutexLock lock(&mu_);
  return routed_;
}

int64_t SessionRouter::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

int SessionRouter::session_count() const {
  absl::MutexLock lock(&mu_);
  return session_count_;
}

}  // namespace ddp::session
