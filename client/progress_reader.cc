#include "client/progress_reader.h"

#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <utility>

#include "google/protobuf/util/json_util.h"

namespace ddp::client {

ProgressReader::ProgressReader(const Clock& clock, Options options)
    : clock_(clock), options_(options) {}

void ProgressReader::Reset(std::vector<std::string> files_by_local_rank) {
  workers_.clear();
  for (std::string& file : files_by_local_rank) workers_.push_back(Worker{std::move(file), {}, {}});
  last_read_.reset();
}

std::vector<std::optional<v1::WorkerProgress>> ProgressReader::Latest() {
  const absl::Time now = clock_.Now();
  if (!last_read_ || now - *last_read_ >= options_.interval) {
    last_read_ = now;
    for (size_t i = 0; i < workers_.size(); ++i) Read(static_cast<int>(i), workers_[i], now);
  }
  std::vector<std::optional<v1::WorkerProgress>> out;
  out.reserve(workers_.size());
  for (const Worker& w : workers_) out.push_back(w.report);
  return out;
}

void ProgressReader::Read(int local_rank, Worker& w, absl::Time now) {
  struct stat st;
  if (w.file.empty() || stat(w.file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > options_.max_file_bytes) {
    return;
  }
  const absl::Time written = absl::TimeFromTimespec(st.st_mtim);
  if (w.report && written == w.written) return;  // unchanged
  std::ifstream in(w.file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  v1::WorkerProgress parsed;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(text, &parsed, parse).ok() ||
      parsed.step() < 0) {
    return;  // a file being replaced by hand, or not ours: keep the last report
  }
  v1::WorkerProgress report;
  report.set_local_rank(local_rank);
  report.set_step(parsed.step());
  // Names in order; the first max_metrics that fit.
  std::map<std::string, double> metrics(parsed.metrics().begin(), parsed.metrics().end());
  for (const auto& [name, value] : metrics) {
    if (report.metrics_size() >= options_.max_metrics) break;
    if (name.empty() || name.size() > options_.max_metric_name_bytes) continue;
    (*report.mutable_metrics())[name] = value;
  }
  if (parsed.checkpoint_unix_ms() > 0 && parsed.checkpoint_step() >= 0) {
    report.set_checkpoint_unix_ms(parsed.checkpoint_unix_ms());
    report.set_checkpoint_step(parsed.checkpoint_step());
  }
  // A report of the same step (a checkpoint's) keeps the rate.
  if (w.report && written > w.written && report.step() > w.report->step()) {
    const double seconds = absl::ToDoubleSeconds(written - w.written);
    report.set_steps_per_second(static_cast<double>(report.step() - w.report->step()) / seconds);
  } else if (w.report && report.step() >= w.report->step()) {
    report.set_steps_per_second(w.report->steps_per_second());
  }
  report.set_age_ms(std::max<int64_t>(0, absl::ToInt64Milliseconds(now - written)));
  w.report = std::move(report);
  w.written = written;
}

}  // namespace ddp::client
