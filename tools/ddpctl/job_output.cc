// Text and JSON forms of jobs.proto messages for `ddpctl jobs ...` (declared
// in output.h). Strings from the coordinator go through PrintableBytes in text
// output, so a node id or message cannot inject control characters.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "tools/ddpctl/output.h"

namespace ddp::ddpctl {
namespace {

using Table = std::vector<std::vector<std::string>>;

// Columns padded to their widest cell plus two spaces; the last one is not
// padded, so lines carry no trailing blanks.
std::string AlignedTable(const Table& rows, absl::string_view indent) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line(indent);
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&text, line, "\n");
  }
  return text;
}

std::string TimeText(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

std::string MsText(int64_t ms) { return absl::FormatDuration(absl::Milliseconds(ms)); }

std::string NodeRangeText(const v1::JobSettings& settings) {
  if (settings.min_nodes() == settings.max_nodes()) {
    return absl::StrCat(settings.min_nodes());
  }
  return absl::StrCat(settings.min_nodes(), ":", settings.max_nodes());
}

std::string RestartsText(const v1::Job& job) {
  return absl::StrCat(job.restart_count(), "/", job.settings().max_restarts());
}

std::string MembersTable(const google::protobuf::RepeatedPtrField<v1::Member>& members) {
  Table rows = {
      {"NODE", "GROUP_RANK", "RANK_OFFSET", "NPROC", "ADDRESS", "HEARTBEAT_AGE", "CONNECTED"}};
  for (const v1::Member& m : members) {
    rows.push_back({PrintableBytes(m.node_id()),
                    m.group_rank() < 0 ? "-" : absl::StrCat(m.group_rank()),
                    m.global_rank_offset() < 0 ? "-" : absl::StrCat(m.global_rank_offset()),
                    absl::StrCat(m.nproc()), PrintableBytes(m.address()),
                    m.heartbeat_age_ms() < 0 ? "never" : MsText(m.heartbeat_age_ms()),
                    m.connected() ? "yes" : "no"});
  }
  return AlignedTable(rows, "  ");
}

// What a rank's SPEED was computed from: "step time", "steps/s", or for a
// rank that reports nothing the CPU busy share its agent measured ("cpu 20%",
// even while unscored); "-" when not scored.
std::string SpeedSourceText(const v1::WorkerProgress& p) {
  if (p.cpu_busy() > 0) return absl::StrFormat("cpu %.3g%%", 100 * p.cpu_busy());
  switch (p.speed_source()) {
    case v1::SPEED_SOURCE_STEP_TIME:
      return "step time";
    case v1::SPEED_SOURCE_STEP_RATE:
      return "steps/s";
    default:
      return "-";
  }
}

// One row per worker that reported progress (ddp_coordinator.report_progress)
// or, reporting nothing, whose CPU its agent measured; in global rank order;
// empty when there is none.
std::string ProgressTable(const google::protobuf::RepeatedPtrField<v1::Member>& members) {
  std::vector<std::pair<std::pair<int64_t, std::string>, std::vector<std::string>>> rows;
  for (const v1::Member& m : members) {
    for (const v1::WorkerProgress& p : m.progress()) {
      std::vector<std::string> metrics;
      std::map<std::string, double> sorted(p.metrics().begin(), p.metrics().end());
      for (const auto& [name, value] : sorted) {
        metrics.push_back(absl::StrCat(PrintableBytes(name), "=", absl::StrFormat("%.6g", value)));
      }
      rows.push_back(
          {{p.global_rank() < 0 ? INT64_MAX : p.global_rank(), m.node_id()},
           {p.global_rank() < 0 ? "-" : absl::StrCat(p.global_rank()),
            absl::StrCat(PrintableBytes(m.node_id()), "/", p.local_rank()),
            absl::StrCat(p.generation()), p.cpu_busy() > 0 ? "-" : absl::StrCat(p.step()),
            p.steps_per_second() > 0 ? absl::StrFormat("%.3g", p.steps_per_second()) : "-",
            p.relative_speed() > 0 ? absl::StrFormat("%.2f", p.relative_speed()) : "-",
            p.straggler() ? "STRAGGLER" : "", SpeedSourceText(p), MsText(p.age_ms()),
            metrics.empty() ? "-" : absl::StrJoin(metrics, " ")}});
    }
  }
  if (rows.empty()) return "";
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Table table = {{"RANK", "NODE/LOCAL", "GENERATION", "STEP", "STEPS/S", "SPEED", "", "FROM", "AGE",
                  "METRICS"}};
  for (auto& row : rows) table.push_back(std::move(row.second));
  return AlignedTable(table, "  ");
}

// Where the job's time went (Job.time): the totals, then one row per
// generation with the downtime before it; "" when the coordinator sent none.
std::string TimeTable(const v1::JobTime& time) {
  if (time.generations().empty()) return "";
  const int64_t lost = time.rendezvous_ms() + time.detection_ms() + time.work_lost_ms();
  std::string text = absl::StrCat("time: training ", MsText(time.training_ms()), ", lost ",
                                  MsText(lost), " (rendezvous ", MsText(time.rendezvous_ms()),
                                  ", detection ", MsText(time.detection_ms()),
                                  ", work since checkpoint ", MsText(time.work_lost_ms()), ")\n");
  Table table = {{"GENERATION", "STARTED", "LOST BEFORE: DETECTION", "RENDEZVOUS", "TRAINING",
                  "WORK LOST", "CHECKPOINT", "ENDED BY"}};
  if (time.generations_omitted() > 0) {
    table.push_back(
        {absl::StrCat("(", time.generations_omitted(), " older)"), "", "", "", "", "", "", ""});
  }
  for (const v1::GenerationTime& g : time.generations()) {
    const bool next = g.generation() == 0;
    table.push_back({next ? (g.ended_unix_ms() == 0 ? "next" : "none (job ended)")
                          : absl::StrCat(g.generation()),
                     next ? "-" : TimeText(g.started_unix_ms()), MsText(g.detection_ms()),
                     MsText(g.rendezvous_ms()), next ? "-" : MsText(g.training_ms()),
                     next ? "-" : MsText(g.work_lost_ms()),
                     g.last_checkpoint_unix_ms() == 0
                         ? "-"
                         : absl::StrCat("step ", g.last_checkpoint_step(), " at ",
                                        TimeText(g.last_checkpoint_unix_ms())),
                     next ? (g.ended_unix_ms() == 0 ? "so far" : "-")
                          : (g.ended_by().empty() ? "running" : PrintableBytes(g.ended_by()))});
  }
  return text + AlignedTable(table, "  ");
}

}  // namespace

std::string JobStateName(v1::JobState state) {
  const std::string& name = v1::JobState_Name(state);
  return name.empty() ? absl::StrCat("STATE_", static_cast<int>(state)) : name;
}

absl::StatusOr<v1::JobState> ParseJobState(absl::string_view name) {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  if (!v1::JobState_Parse(absl::AsciiStrToUpper(name), &state) ||
      state == v1::JOB_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state='", name.substr(0, 64),
                     "' is not a job state; use WAITING, STARTING, RUNNING, RESTARTING, "
                     "SUCCEEDED, FAILED or CANCELLED"));
  }
  return state;
}

std::string JobListText(const std::vector<v1::Job>& jobs, bool show_runs) {
  Table rows = {{"JOB", "STATE", "GENERATION", "RESTARTS", "MEMBERS", "SPARES"}};
  if (show_runs) rows[0].insert(rows[0].begin() + 1, "RUN");
  for (const v1::Job& job : jobs) {
    rows.push_back({PrintableBytes(job.job_id()), JobStateName(job.state()),
                    absl::StrCat(job.generation()), RestartsText(job),
                    absl::StrCat(job.members_size()), absl::StrCat(job.spares_size())});
    if (show_runs) rows.back().insert(rows.back().begin() + 1, absl::StrCat(job.run()));
  }
  return AlignedTable(rows, "");
}

std::string JobSummaryText(const v1::Job& job) {
  return absl::StrCat(PrintableBytes(job.job_id()), ": ", JobStateName(job.state()),
                      ", generation ", job.generation(), ", restarts ", RestartsText(job), ", ",
                      job.members_size(), " members, ", job.spares_size(), " spares");
}

std::string JobStacksText(const v1::JobStacks& stacks) {
  std::string out = absl::StrFormat("job %s, generation %d: %d ranks in %d %s\n", stacks.job_id(),
                                    stacks.generation(), stacks.ranks_size(), stacks.groups_size(),
                                    stacks.groups_size() == 1 ? "group" : "groups");
  if (stacks.missing_nodes_size() > 0) {
    absl::StrAppend(&out, "no answer from node", stacks.missing_nodes_size() == 1 ? " " : "s ",
                    absl::StrJoin(stacks.missing_nodes(), ", "), "\n");
  }
  for (const v1::StackGroup& group : stacks.groups()) {
    absl::StrAppend(&out, group.ranks_size() == 1 ? "rank " : "ranks ",
                    absl::StrJoin(group.ranks(), ","));
    if (group.ranks_size() == 1) {
      // A single rank: say where it runs, to go and look.
      for (const v1::RankStack& r : stacks.ranks()) {
        if (r.global_rank() != group.ranks(0)) continue;
        absl::StrAppend(&out, " (node ", r.node_id());
        if (r.pid() > 0) absl::StrAppend(&out, ", pid ", r.pid());
        absl::StrAppend(&out, ")");
      }
    }
    absl::StrAppend(&out, ":\n");
    for (absl::string_view line : absl::StrSplit(group.stack(), '\n')) {
      absl::StrAppend(&out, "  ", line, "\n");
    }
  }
  return out;
}

std::string JobText(const v1::Job& job) {
  const v1::JobSettings& s = job.settings();
  std::string state = JobStateName(job.state());
  if (!job.message().empty()) {
    absl::StrAppend(&state, " (", PrintableBytes(job.message()), ")");
  }
  Table head = {{"job:", PrintableBytes(job.job_id())},
                {"run:", absl::StrCat(std::max(job.run(), 1))},
                {"state:", state},
                {"generation:", absl::StrCat(job.generation())},
                {"restarts:", RestartsText(job)},
                {"created:", TimeText(job.created_unix_ms())}};
  if (job.finished_unix_ms() != 0) head.push_back({"finished:", TimeText(job.finished_unix_ms())});
  head.push_back({"last event:", absl::StrCat(job.last_event_index())});
  std::string text = AlignedTable(head, "");
  // "-": a coordinator that does not keep it.
  const std::string hang_timeout = !s.has_hang_timeout_ms()   ? "-"
                                   : s.hang_timeout_ms() == 0 ? "off"
                                                              : MsText(s.hang_timeout_ms());
  absl::StrAppend(&text, "settings:\n",
                  AlignedTable({{"nnodes", NodeRangeText(s)},
                                {"nproc-per-node", absl::StrCat(s.nproc_per_node())},
                                {"max-restarts", absl::StrCat(s.max_restarts())},
                                {"join-timeout", MsText(s.join_timeout_ms())},
                                {"last-call-timeout", MsText(s.last_call_timeout_ms())},
                                {"heartbeat-interval", MsText(s.heartbeat_interval_ms())},
                                {"heartbeat-timeout", MsText(s.heartbeat_timeout_ms())},
                                {"shutdown-timeout", MsText(s.shutdown_timeout_ms())},
                                {"hang-timeout", hang_timeout},
                                {"straggler-exclude",
                                 s.straggler_exclude_factor() == 0
                                     ? "off"
                                     : absl::StrCat(s.straggler_exclude_factor(), "x for ",
                                                    MsText(s.straggler_exclude_after_ms()))}},
                               "  "));
  // A finished job's members are the nodes of its last generation (no ranks
  // are kept once it ends).
  const bool finished =
      job.state() == v1::SUCCEEDED || job.state() == v1::FAILED || job.state() == v1::CANCELLED;
  absl::StrAppend(&text, finished ? "members of the last generation (" : "members (",
                  job.members_size(), "):", job.members().empty() ? " none\n" : "\n");
  if (!job.members().empty()) absl::StrAppend(&text, MembersTable(job.members()));
  for (const v1::Member& m : job.members()) {
    if (m.leaves_at_unix_ms() == 0) continue;
    absl::StrAppend(&text, "draining: ", PrintableBytes(m.node_id()), " leaves by ",
                    TimeText(m.leaves_at_unix_ms()), " at the latest (",
                    PrintableBytes(m.drain_reason()), ")\n");
  }
  if (const std::string progress = ProgressTable(job.members()); !progress.empty()) {
    absl::StrAppend(&text,
                    "progress (as the workers reported it, or their CPU as the agent saw it):\n",
                    progress);
  }
  absl::StrAppend(&text, TimeTable(job.time()));
  absl::StrAppend(&text, "spares (", job.spares_size(),
                  "):", job.spares().empty() ? " none\n" : "\n");
  if (!job.spares().empty()) absl::StrAppend(&text, MembersTable(job.spares()));
  std::vector<std::string> excluded;
  for (const std::string& node : job.excluded_nodes()) {
    excluded.push_back(PrintableBytes(node));
  }
  absl::StrAppend(&text, "excluded nodes (", excluded.size(),
                  "): ", excluded.empty() ? "none" : absl::StrJoin(excluded, ", "), "\n");
  absl::StrAppend(&text, "failures (", job.failures_size(),
                  ", newest last):", job.failures().empty() ? " none\n" : "\n");
  for (const v1::Failure& f : job.failures()) {
    absl::StrAppend(&text, "  ", FailureText(f), "\n");
    if (!f.traceback().empty()) {
      // The exception line ends a traceback; jobs logs shows all of it.
      const absl::string_view tb = absl::StripTrailingAsciiWhitespace(f.traceback());
      const size_t newline = tb.rfind('\n');
      absl::StrAppend(
          &text, "    error: ",
          PrintableBytes(newline == absl::string_view::npos ? tb : tb.substr(newline + 1)), "\n");
    }
    if (!f.log_path().empty()) {
      absl::StrAppend(&text, "    logs: ", PrintableBytes(f.node_id()), ":",
                      PrintableBytes(f.log_path()), "\n");
    }
  }
  absl::StrAppend(
      &text, "root cause: ", job.has_root_cause() ? FailureText(job.root_cause()) : "none", "\n");
  if (job.has_root_cause() && !job.root_cause().traceback().empty()) {
    absl::StrAppend(&text, "  traceback:\n    ",
                    PrintableLines(job.root_cause().traceback(), "    "), "\n");
  }
  if (job.has_root_cause() && !job.root_cause().log_path().empty()) {
    absl::StrAppend(&text, "  logs: ", PrintableBytes(job.root_cause().node_id()), ":",
                    PrintableBytes(job.root_cause().log_path()), "\n");
  }
  if (job.has_root_cause() && !job.root_cause().stderr_tail().empty()) {
    absl::StrAppend(&text, "  (ddpctl jobs logs ", PrintableBytes(job.job_id()),
                    " shows its last lines of stderr)\n");
  }
  return text;
}

std::string PrintableLines(absl::string_view text, absl::string_view indent) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(PrintableBytes(line));
  }
  return absl::StrJoin(lines, absl::StrCat("\n", indent));
}

std::string FailureText(const v1::Failure& f) {
  std::string text = absl::StrCat(TimeText(f.time_unix_ms()), " generation ", f.generation());
  if (f.node_id().empty()) {
    absl::StrAppend(&text, " coordinator");
  } else {
    absl::StrAppend(&text, " node ", PrintableBytes(f.node_id()));
    // A failure of the node itself (lost, silent, its session closed) has no
    // worker: no rank, no exit code.
    if (f.local_rank() < 0) {
      absl::StrAppend(&text, " node lost");
      if (!f.message().empty()) absl::StrAppend(&text, ": ", PrintableBytes(f.message()));
      return text;
    }
    absl::StrAppend(&text, " local rank ", f.local_rank(), " global rank ", f.global_rank());
    if (f.pid() > 0) absl::StrAppend(&text, " pid ", f.pid());
    if (f.hang()) {
      absl::StrAppend(&text, " hang");
    } else if (f.signal() != 0) {
      absl::StrAppend(&text, " signal ", f.signal());
    } else {
      absl::StrAppend(&text, " exit code ", f.exit_code());
    }
  }
  if (!f.message().empty()) {
    absl::StrAppend(&text, ": ", PrintableBytes(f.message()));
  }
  return text;
}

std::string JobEventText(const v1::JobEvent& event) {
  std::string text = absl::StrCat("#", event.index(), " ", TimeText(event.time_unix_ms()), " ",
                                  v1::JobEvent::Type_Name(event.type()));
  if (!event.node_id().empty()) {
    absl::StrAppend(&text, " node ", PrintableBytes(event.node_id()));
  }
  absl::StrAppend(&text, " generation ", event.generation());
  if (!event.message().empty()) {
    absl::StrAppend(&text, ": ", PrintableBytes(event.message()));
  }
  if (event.has_failure()) {
    absl::StrAppend(&text, " [failure ", FailureText(event.failure()), "]");
  }
  return text;
}

}  // namespace ddp::ddpctl
