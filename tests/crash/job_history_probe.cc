#include "tests/crash/job_history_probe.h"

#include <stdio.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace ddp::testing {
namespace {

using session::testing::FakeAgent;
using session::testing::FakeAgentOptions;

v1::JobSettings TwoNodes() {
  v1::JobSettings s;
  s.set_min_nodes(2);
  s.set_max_nodes(2);
  s.set_nproc_per_node(2);
  s.set_max_restarts(5);
  s.set_join_timeout_ms(60000);
  s.set_last_call_timeout_ms(100);
  s.set_heartbeat_interval_ms(100);
  s.set_heartbeat_timeout_ms(60000);
  s.set_shutdown_timeout_ms(60000);
  return s;
}

// Runs `command` through /bin/sh; its stdout.
std::string Capture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

}  // namespace

RestartedJob::RestartedJob(const std::string& address, std::string job_id)
    : job_id_(std::move(job_id)) {
  for (int i = 0; i < 2; ++i) {
    FakeAgentOptions options;
    options.job_id = job_id_;
    options.node_id = absl::StrCat("node-", i);
    options.incarnation = 100 + i;
    options.nproc = 2;
    options.settings = TwoNodes();
    options.heartbeat_interval = absl::Milliseconds(100);
    agents_.push_back(
        std::make_unique<FakeAgent>(session::testing::MakeDedicatedChannel(address), options));
  }
}

absl::Status RestartedJob::Run(absl::Duration timeout) {
  for (auto& agent : agents_) {
    absl::StatusOr<v1::Registered> registered = agent->Register(timeout);
    if (!registered.ok()) return registered.status();
  }
  for (int64_t generation : {int64_t{1}, int64_t{2}}) {
    for (auto& agent : agents_) {
      absl::StatusOr<v1::Assignment> assigned = agent->WaitForAssignment(generation, timeout);
      if (!assigned.ok()) return assigned.status();
    }
    if (generation == 1) agents_[1]->ReportExit(0, 3, 0, "CUDA error: out of memory");
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> GetJobWhenServing(const std::string& address, const std::string& job_id,
                                          absl::Duration timeout) {
  auto stub =
      v1::JobService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const absl::Time give_up = absl::Now() + timeout;
  grpc::Status status;
  while (absl::Now() < give_up) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    context.set_wait_for_ready(true);
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    v1::Job job;
    status = stub->GetJob(&context, request, &job);
    if (status.ok()) return job;
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("GetJob ", job_id, ": ", status.error_message()));
}

absl::StatusOr<std::vector<v1::JobEvent>> WatchJobEvents(const std::string& address,
                                                         const std::string& job_id,
                                                         int64_t from_index, int64_t through_index,
                                                         absl::Duration timeout) {
  auto stub =
      v1::JobService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  request.set_from_index(from_index);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub->WatchJob(&context, request);
  std::vector<v1::JobEvent> events;
  v1::JobEvent event;
  while (reader->Read(&event)) {
    events.push_back(event);
    if (event.index() >= through_index) {
      context.TryCancel();
      reader->Finish();
      return events;
    }
  }
  const grpc::Status status = reader->Finish();
  return absl::Status(
      status.ok() ? absl::StatusCode::kDeadlineExceeded
                  : static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("WatchJob ", job_id, " from ", from_index, " ended after ", events.size(),
                   " events before event ", through_index, ": ", status.error_message()));
}

absl::StatusOr<std::vector<std::string>> SseEventData(int http_port, const std::string& job_id,
                                                      int64_t from_index, size_t count,
                                                      absl::Duration timeout) {
  const std::string url = absl::StrCat("http://127.0.0.1:", http_port, "/v1/jobs/", job_id,
                                       ":watch?from_index=", from_index);
  const absl::Time give_up = absl::Now() + timeout;
  std::string last;
  while (true) {
    // A watch of a running job does not end: curl stops after 2 s.
    last = Capture(absl::StrCat("curl -s -N --max-time 2 '", url, "'"));
    std::vector<std::string> data;
    bool error = false;
    for (absl::string_view line : absl::StrSplit(last, '\n')) {
      if (line == "event: error") error = true;
      if (!absl::ConsumePrefix(&line, "data: ")) continue;
      if (error) return absl::InternalError(absl::StrCat("the SSE stream of ", url, ": ", line));
      if (data.size() < count) data.emplace_back(line);
    }
    if (data.size() == count) return data;
    if (absl::Now() >= give_up) {
      return absl::DeadlineExceededError(absl::StrCat("the SSE stream of ", url, " gave ",
                                                      data.size(), " of ", count,
                                                      " events: ", last.substr(0, 2000)));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::StatusOr<std::vector<std::string>> EventCounterSamples(int http_port) {
  const std::string scrape =
      Capture(absl::StrCat("curl -s --max-time 10 http://127.0.0.1:", http_port, "/metrics"));
  std::vector<std::string> samples;
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    for (const char* family : {"ddp_restarts_total", "ddp_worker_failures_total",
                               "ddp_node_losses_total", "ddp_generations_opened_total"}) {
      if (absl::StartsWith(line, family)) samples.emplace_back(line);
    }
  }
  if (samples.empty()) {
    return absl::UnavailableError(absl::StrCat("no job event counters in the scrape of port ",
                                               http_port, ": ", scrape.substr(0, 2000)));
  }
  return samples;
}

absl::StatusOr<int> ReadPortFile(const std::string& path, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    int port = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text.str()), &port) && port > 0) return port;
    if (absl::Now() >= give_up) {
      return absl::DeadlineExceededError(absl::StrCat("no port in ", path));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<SeenHistory> SeeHistory(const std::string& address,
                                       const std::string& http_port_file, const std::string& job_id,
                                       absl::Duration timeout) {
  SeenHistory seen;
  absl::StatusOr<v1::Job> job = GetJobWhenServing(address, job_id, timeout);
  if (!job.ok()) return job.status();
  seen.job = *std::move(job);
  const int64_t last = seen.job.last_event_index();
  absl::StatusOr<std::vector<v1::JobEvent>> watched =
      WatchJobEvents(address, job_id, 1, last, timeout);
  if (!watched.ok()) return watched.status();
  for (const v1::JobEvent& event : *watched) seen.watched.push_back(event.DebugString());
  absl::StatusOr<int> http_port = ReadPortFile(http_port_file, timeout);
  if (!http_port.ok()) return http_port.status();
  absl::StatusOr<std::vector<std::string>> sse =
      SseEventData(*http_port, job_id, 1, static_cast<size_t>(last), timeout);
  if (!sse.ok()) return sse.status();
  seen.sse = *std::move(sse);
  absl::StatusOr<std::vector<std::string>> counters = EventCounterSamples(*http_port);
  if (!counters.ok()) return counters.status();
  seen.counters = *std::move(counters);
  return seen;
}

std::vector<std::string> HistoryDifferences(const SeenHistory& before, const SeenHistory& after) {
  std::vector<std::string> out;
  auto number = [&out](absl::string_view what, int64_t was, int64_t is) {
    if (was != is) out.push_back(absl::StrCat(what, ": ", was, " before, ", is, " after"));
  };
  auto lines = [&out](absl::string_view what, const std::vector<std::string>& was,
                      const std::vector<std::string>& is) {
    if (was == is) return;
    size_t i = 0;
    while (i < was.size() && i < is.size() && was[i] == is[i]) ++i;
    out.push_back(absl::StrCat(what, ": ", was.size(), " before, ", is.size(),
                               " after; the first that differs, #", i, ": '",
                               i < was.size() ? was[i] : "(none)", "' before, '",
                               i < is.size() ? is[i] : "(none)", "' after"));
  };
  number("first_event_index (1: every event is still kept)", 1, after.job.first_event_index());
  number("last_event_index", before.job.last_event_index(), after.job.last_event_index());
  number("restart_count", before.job.restart_count(), after.job.restart_count());
  std::vector<std::string> failures_before, failures_after;
  for (const v1::Failure& f : before.job.failures()) failures_before.push_back(f.DebugString());
  for (const v1::Failure& f : after.job.failures()) failures_after.push_back(f.DebugString());
  lines("the failures", failures_before, failures_after);
  lines("WatchJob's events", before.watched, after.watched);
  lines("the SSE stream's events", before.sse, after.sse);
  lines("the event counters", before.counters, after.counters);
  return out;
}

}  // namespace ddp::testing
