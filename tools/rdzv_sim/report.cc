#include "tools/rdzv_sim/report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ddp::rdzv_sim {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

std::string Verdict(bool ok) { return ok ? "ok" : "MISS"; }

std::string LatencyCell(absl::Duration value, std::optional<absl::Duration> target) {
  std::string cell = absl::StrFormat("%.0f ms", Ms(value));
  if (target) absl::StrAppend(&cell, " ", Verdict(value <= *target));
  return cell;
}

double PerJoinUs(const SizeResult& r) {
  return r.nodes > 0 ? absl::ToDoubleMicroseconds(r.rendezvous) / r.nodes : 0.0;
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string JsonNumber(std::optional<double> value) {
  return value ? absl::StrFormat("%.3f", *value) : "null";
}

// "coordinator 5.9 s (92% of a core), simulator 4.7 s (73%)" over `elapsed`.
std::string PhaseCpuCell(const PhaseCpu& cpu, absl::Duration elapsed) {
  auto share = [&](absl::Duration used) {
    if (elapsed <= absl::ZeroDuration()) return std::string();
    return absl::StrFormat(" (%.0f%% of a core)", 100 * absl::FDivDuration(used, elapsed));
  };
  std::string coordinator = "n/a";
  if (cpu.coordinator) {
    coordinator = absl::StrFormat("%.0f ms%s", Ms(*cpu.coordinator), share(*cpu.coordinator));
  }
  return absl::StrFormat("coordinator %s, simulator %.0f ms%s", coordinator, Ms(cpu.simulator),
                         share(cpu.simulator));
}

std::string PhaseCpuJson(const PhaseCpu& cpu) {
  std::optional<double> coordinator;
  if (cpu.coordinator) coordinator = Ms(*cpu.coordinator);
  return absl::StrCat("{\"coordinator_ms\":", JsonNumber(coordinator),
                      ",\"simulator_ms\":", JsonNumber(Ms(cpu.simulator)), "}");
}

std::string ThreadsJson(const std::vector<std::pair<std::string, double>>& threads) {
  std::vector<std::string> items;
  for (const auto& [name, share] : threads) {
    items.push_back(absl::StrCat(JsonString(name), ":", JsonNumber(share)));
  }
  return absl::StrJoin(items, ",");
}

std::string PacingCell(const SimPacing& pacing) {
  return absl::StrFormat(
      "simulator pacing: longest pause between heartbeat rounds %.0f ms, %d heartbeats skipped "
      "(it fell behind), %d not sent while the agent's previous one was queued",
      Ms(pacing.longest_pause), pacing.skipped, pacing.dropped_while_queued);
}

std::string PacingJson(const std::optional<SimPacing>& pacing) {
  if (!pacing) return "null";
  return absl::StrCat("{\"longest_pause_ms\":", JsonNumber(Ms(pacing->longest_pause)),
                      ",\"skipped\":", pacing->skipped,
                      ",\"dropped_while_queued\":", pacing->dropped_while_queued, "}");
}

}  // namespace

std::optional<absl::Duration> RendezvousTarget(int nodes) {
  if (nodes <= 1024) return absl::Seconds(1);
  if (nodes <= 4096) return absl::Seconds(3);
  if (nodes <= 65536) return absl::Seconds(5);
  return std::nullopt;
}

std::optional<absl::Duration> RestartTarget(int nodes) {
  if (nodes <= 1024) return absl::Seconds(1);
  if (nodes <= 16384) return absl::Milliseconds(1500);
  if (nodes <= 65536) return absl::Seconds(3);
  return std::nullopt;
}

std::optional<absl::Duration> CpuPerHeartbeat(const SizeResult& result) {
  if (!result.coordinator_cpu_fraction || result.heartbeats_sent <= 0) return std::nullopt;
  return *result.coordinator_cpu_fraction * result.heartbeat_window / result.heartbeats_sent;
}

std::optional<double> PerJoinGrowth(const std::vector<SizeResult>& results) {
  const SizeResult* base = nullptr;
  const SizeResult* largest = nullptr;
  for (const SizeResult& r : results) {
    if (!r.error.empty() || r.nodes <= 0) continue;
    if (r.nodes == 1024) base = &r;
    if (r.nodes > 1024 && r.nodes <= 16384 && (!largest || r.nodes > largest->nodes)) largest = &r;
  }
  if (!base || !largest || PerJoinUs(*base) <= 0) return std::nullopt;
  return PerJoinUs(*largest) / PerJoinUs(*base);
}

std::optional<double> BytesPerAgent(const SizeResult& result) {
  if (!result.rss_idle_bytes || !result.rss_connected_bytes || result.nodes <= 0) {
    return std::nullopt;
  }
  return static_cast<double>(*result.rss_connected_bytes - *result.rss_idle_bytes) / result.nodes;
}

std::string RenderTable(const std::vector<SizeResult>& results, const MachineInfo& machine) {
  std::string out =
      absl::StrFormat("rdzv_sim on %d cpus (%s); simulator and coordinator share them\n",
                      machine.cpus, machine.cpu_model);
  absl::StrAppendFormat(&out, "%6s | %-13s | %8s | %8s | %-13s | %-12s | %7s | %-12s | %s\n",
                        "nodes", "rendezvous", "per join", "reg p99", "restart", "coord CPU",
                        "sim CPU", "mem/agent", "heartbeats/s (CPU each; share over UDP)");
  for (const SizeResult& r : results) {
    if (!r.error.empty()) {
      absl::StrAppendFormat(&out, "%6d | error: %s\n", r.nodes, r.error);
      if (r.sim_pacing) absl::StrAppendFormat(&out, "%6s   %s\n", "", PacingCell(*r.sim_pacing));
      continue;
    }
    std::string cpu = "n/a";
    if (r.coordinator_cpu_fraction) {
      cpu = absl::StrFormat("%.1f%%", 100 * *r.coordinator_cpu_fraction);
      if (r.nodes <= kCpuShareTargetNodes) {
        absl::StrAppend(&cpu, " ", Verdict(*r.coordinator_cpu_fraction <= kCpuTargetFraction));
      }
    }
    std::string memory = "n/a";
    if (std::optional<double> bytes = BytesPerAgent(r)) {
      memory = absl::StrFormat("%.1f KB %s", *bytes / 1000,
                               Verdict(*bytes <= kMemoryTargetBytesPerAgent));
    }
    const double window = absl::ToDoubleSeconds(r.heartbeat_window);
    std::string per_heartbeat;
    if (std::optional<absl::Duration> each = CpuPerHeartbeat(r)) {
      per_heartbeat = absl::StrFormat(
          " (%.1f us each %s; %.0f%% UDP)", absl::ToDoubleMicroseconds(*each),
          Verdict(*each <= kHeartbeatCpuTarget), 100.0 * r.heartbeat_datagrams / r.heartbeats_sent);
    }
    absl::StrAppendFormat(&out,
                          "%6d | %-13s | %5.0f us | %5.0f ms | %-13s | %-12s | %6.1f%% | %-12s "
                          "| %.0f%s\n",
                          r.nodes, LatencyCell(r.rendezvous, RendezvousTarget(r.nodes)),
                          PerJoinUs(r), Ms(r.registration_round_trip.p99),
                          LatencyCell(r.restart, RestartTarget(r.nodes)), cpu,
                          100 * r.client_cpu_fraction, memory,
                          window > 0 ? r.heartbeats_sent / window : 0.0, per_heartbeat);
    absl::StrAppendFormat(&out, "%6s   CPU in rendezvous: %s; in restart: %s\n", "",
                          PhaseCpuCell(r.rendezvous_cpu, r.rendezvous),
                          PhaseCpuCell(r.restart_cpu, r.restart));
    if (r.load_start && r.load_end) {
      absl::StrAppendFormat(&out, "%6s   machine load average %.1f at the start, %.1f at the end\n",
                            "", *r.load_start, *r.load_end);
    }
    if (!r.coordinator_threads.empty()) {
      std::vector<std::string> threads;
      for (const auto& [name, share] : r.coordinator_threads) {
        threads.push_back(absl::StrFormat("%s %.1f%%", name, 100 * share));
      }
      absl::StrAppendFormat(&out, "%6s   coordinator threads: %s\n", "",
                            absl::StrJoin(threads, ", "));
    }
    if (r.sim_pacing) absl::StrAppendFormat(&out, "%6s   %s\n", "", PacingCell(*r.sim_pacing));
    if (!r.warning.empty()) {
      absl::StrAppendFormat(&out, "%6s   warning: %s\n", "", r.warning);
    }
  }
  if (std::optional<double> growth = PerJoinGrowth(results)) {
    absl::StrAppendFormat(&out, "per join, largest size up to 16,384 over 1,024: %.2fx %s\n",
                          *growth, Verdict(*growth <= kPerJoinGrowthTarget));
  }
  absl::StrAppend(&out,
                  "targets (issues 14, 30): rendezvous <= 1 s up to 1,024 nodes, 3 s up to "
                  "4,096, 5 s up to 65,536; restart <= 1 s up to 1,024, 1.5 s up to 16,384, "
                  "3 s up to 65,536; coordinator CPU <= 10 us per heartbeat and <= 10% of a core "
                  "up to 4,096 nodes; per join within 1.5x from 1,024 to 16,384; <= 32 KB per "
                  "agent\n");
  return out;
}

std::string RenderJson(const std::vector<SizeResult>& results, const MachineInfo& machine) {
  std::vector<std::string> rows;
  for (const SizeResult& r : results) {
    std::optional<double> rss_idle, rss_connected;
    if (r.rss_idle_bytes) rss_idle = *r.rss_idle_bytes;
    if (r.rss_connected_bytes) rss_connected = *r.rss_connected_bytes;
    rows.push_back(absl::StrCat(
        "{\"nodes\":", r.nodes, ",\"channels\":", r.channels, ",\"job_id\":", JsonString(r.job_id),
        ",\"error\":", JsonString(r.error), ",\"warning\":", JsonString(r.warning),
        ",\"rendezvous_ms\":", JsonNumber(Ms(r.rendezvous)), ",\"per_join_us\":",
        JsonNumber(PerJoinUs(r)), ",\"register_spread_ms\":", JsonNumber(Ms(r.register_spread)),
        ",\"registration_rtt_ms\":{\"p50\":", JsonNumber(Ms(r.registration_round_trip.p50)),
        ",\"p99\":", JsonNumber(Ms(r.registration_round_trip.p99)),
        ",\"max\":", JsonNumber(Ms(r.registration_round_trip.max)), "}",
        ",\"generation\":", r.generation, ",\"restart_ms\":", JsonNumber(Ms(r.restart)),
        ",\"restart_generation\":", r.restart_generation,
        ",\"load_start\":", JsonNumber(r.load_start), ",\"load_end\":", JsonNumber(r.load_end),
        ",\"rendezvous_cpu\":", PhaseCpuJson(r.rendezvous_cpu),
        ",\"restart_cpu\":", PhaseCpuJson(r.restart_cpu),
        ",\"heartbeat_window_s\":", JsonNumber(absl::ToDoubleSeconds(r.heartbeat_window)),
        ",\"heartbeats_sent\":", r.heartbeats_sent,
        ",\"heartbeat_datagrams\":", r.heartbeat_datagrams,
        ",\"coordinator_cpu_fraction\":", JsonNumber(r.coordinator_cpu_fraction),
        ",\"client_cpu_fraction\":", JsonNumber(r.client_cpu_fraction),
        ",\"coordinator_threads\":{", ThreadsJson(r.coordinator_threads), "}",
        ",\"sim_pacing\":", PacingJson(r.sim_pacing), ",\"rss_idle_bytes\":", JsonNumber(rss_idle),
        ",\"rss_connected_bytes\":", JsonNumber(rss_connected),
        ",\"bytes_per_agent\":", JsonNumber(BytesPerAgent(r)), "}"));
  }
  return absl::StrCat("{\"machine\":{\"cpus\":", machine.cpus,
                      ",\"cpu_model\":", JsonString(machine.cpu_model), "},\"results\":[",
                      absl::StrJoin(rows, ","), "]}\n");
}

}  // namespace ddp::rdzv_sim
