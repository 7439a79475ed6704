#include "coordinator/rendezvous/job_time.h"

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

JobEvent Event(JobEventType type, double at_s, Generation generation = 0) {
  JobEvent e;
  e.set_job_id("train");
  e.set_type(type);
  SetEventTime(At(at_s), &e);
  e.set_generation(generation);
  return e;
}

JobEvent Failed(double at_s, double failed_at_s, Generation generation) {
  JobEvent e = Event(JobEvent::WORKER_FAILED, at_s, generation);
  FailureInfo failure;
  SetFailureTime(At(failed_at_s), &failure);
  *e.mutable_failure() = failure;
  return e;
}

JobEvent Restarting(double at_s, Generation generation, std::optional<double> checkpoint_s = {},
                    RestartCause cause = RestartCause::WORKER_FAILURE) {
  JobEvent e = Event(JobEvent::RESTARTING, at_s, generation);
  e.set_restart_cause(cause);
  if (checkpoint_s) {
    e.set_last_checkpoint_unix_ms(absl::ToUnixMillis(At(*checkpoint_s)));
    e.set_last_checkpoint_step(100);
  }
  return e;
}

JobEvent Finished(double at_s, JobState state, std::optional<double> checkpoint_s = {}) {
  JobEvent e = Event(JobEvent::JOB_FINISHED, at_s);
  e.set_message(std::string(JobStateName(state)) + ": done");
  if (checkpoint_s) e.set_last_checkpoint_unix_ms(absl::ToUnixMillis(At(*checkpoint_s)));
  return e;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

TEST(JobTimeLedger, FailureThenRestart_TrainingStopsAtFailureRestLost) {
  JobTimeLedger ledger;
  ledger.Add(Event(JobEvent::JOB_CREATED, 0));
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 4, 1));
  ledger.Add(Failed(30, 25, 1));  // a hang found 5 s after its last activity
  ledger.Add(Restarting(31, 1));
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 33, 2));

  const JobTimeTotals totals = ledger.TotalsAt(At(43));
  EXPECT_EQ(Seconds(totals.training), 21 + 10);
  EXPECT_EQ(Seconds(totals.rendezvous), 4 + 2);
  EXPECT_EQ(Seconds(totals.detection), 6);
  EXPECT_EQ(Seconds(totals.work_lost), 0);  // never reported a checkpoint

  const auto generations = ledger.GenerationsAt(At(43));
  ASSERT_EQ(generations.size(), 2u);
  EXPECT_EQ(generations[0].generation, 1);
  EXPECT_EQ(Seconds(generations[0].rendezvous), 4);
  EXPECT_EQ(Seconds(generations[0].training), 21);
  EXPECT_EQ(generations[0].ended_by, "worker_failure");
  EXPECT_EQ(generations[1].generation, 2);
  EXPECT_EQ(Seconds(generations[1].detection), 6);  // before it: the hang and its detection
  EXPECT_EQ(Seconds(generations[1].rendezvous), 2);
  EXPECT_EQ(Seconds(generations[1].training), 10);  // running, to now
  EXPECT_FALSE(generations[1].ended.has_value());
}

TEST(JobTimeLedger, CheckpointBeforeFailure_WorkSinceItLost) {
  JobTimeLedger ledger;
  ledger.Add(Event(JobEvent::JOB_CREATED, 0));
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 2, 1));
  ledger.Add(Failed(40, 40, 1));
  ledger.Add(Restarting(41, 1, /*checkpoint_s=*/32));
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 44, 2));

  const auto& first = ledger.generations().front();
  EXPECT_EQ(Seconds(first.training), 38);
  EXPECT_EQ(Seconds(first.work_lost), 8);
  EXPECT_EQ(first.last_checkpoint, At(32));
  EXPECT_EQ(first.last_checkpoint_step, 100);
  const JobTimeTotals closed = ledger.closed();
  EXPECT_EQ(Seconds(closed.training), 30);
  EXPECT_EQ(Seconds(closed.work_lost), 8);
  EXPECT_EQ(Seconds(closed.detection), 1);
  EXPECT_EQ(Seconds(closed.rendezvous), 2 + 3);
  EXPECT_EQ(Seconds(closed.lost()), 14);
}

TEST(JobTimeLedger, CheckpointsEarlierButNoneThisGeneration_AllItsTrainingLost) {
  JobTimeLedger ledger;
  ledger.Add(Event(JobEvent::JOB_CREATED, 0));
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 1, 1));
  ledger.Add(Restarting(20, 1, /*checkpoint_s=*/15));
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 22, 2));
  ledger.Add(Failed(30, 29, 2));
  ledger.Add(Finished(31, JobState::kFailed));

  const auto& generations = ledger.generations();
  ASSERT_EQ(generations.size(), 2u);
  EXPECT_EQ(Seconds(generations[0].work_lost), 5);
  EXPECT_EQ(Seconds(generations[1].training), 7);
  EXPECT_EQ(Seconds(generations[1].work_lost), 7);  // from its start
  EXPECT_EQ(generations[1].ended_by, "failed");
  EXPECT_EQ(ledger.finished_at(), At(31));
}

TEST(JobTimeLedger, CheckpointOutsideTheGeneration_ClampedToIt) {
  JobTimeLedger ledger;
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 10, 1));
  // Reported after the failure (a late report) and one before the start.
  ledger.Add(Failed(20, 18, 1));
  ledger.Add(Restarting(21, 1, /*checkpoint_s=*/19));
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 22, 2));
  ledger.Add(Restarting(30, 2, /*checkpoint_s=*/5));

  EXPECT_EQ(Seconds(ledger.generations()[0].work_lost), 0);
  EXPECT_EQ(Seconds(ledger.generations()[1].work_lost), 8);
}

TEST(JobTimeLedger, SuccessOrCancel_NoWorkLost) {
  for (JobState end : {JobState::kSucceeded, JobState::kCancelled}) {
    JobTimeLedger ledger;
    ledger.Add(Event(JobEvent::GENERATION_OPENED, 0, 1));
    ledger.Add(Finished(50, end, /*checkpoint_s=*/10));
    EXPECT_EQ(Seconds(ledger.closed().training), 50) << JobStateName(end);
    EXPECT_EQ(Seconds(ledger.closed().work_lost), 0) << JobStateName(end);
    EXPECT_EQ(ledger.generations()[0].ended_by, JobStateName(end));
  }
}

TEST(JobTimeLedger, RendezvousUnderWay_ShownAsGenerationZeroToNow) {
  JobTimeLedger ledger;
  ledger.Add(Event(JobEvent::JOB_CREATED, 0));
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 3, 1));
  ledger.Add(Event(JobEvent::NODE_LOST, 10, 1));
  ledger.Add(Restarting(12, 1, std::nullopt, RestartCause::NODE_LOSS));

  const auto generations = ledger.GenerationsAt(At(20));
  ASSERT_EQ(generations.size(), 2u);
  EXPECT_EQ(Seconds(generations[0].training), 7);
  EXPECT_EQ(generations[1].generation, 0);
  EXPECT_EQ(Seconds(generations[1].detection), 2);
  EXPECT_EQ(Seconds(generations[1].rendezvous), 8);
  EXPECT_TRUE(generations[1].after_restart);

  const v1::JobTime proto = ledger.ToProto(At(20));
  ASSERT_EQ(proto.generations_size(), 2);
  EXPECT_EQ(proto.generations(0).started_unix_ms(), absl::ToUnixMillis(At(3)));
  EXPECT_EQ(proto.generations(0).ended_by(), "node_loss");
  EXPECT_EQ(proto.generations(1).started_unix_ms(), 0);
  EXPECT_EQ(proto.generations(1).rendezvous_ms(), 8000);
  EXPECT_EQ(proto.rendezvous_ms(), 3000 + 8000);
  EXPECT_EQ(proto.detection_ms(), 2000);
  EXPECT_EQ(proto.training_ms(), 7000);
}

TEST(JobTimeLedger, EndedWithNoGenerationRunning_DowntimeFrozenAtTheEnd) {
  JobTimeLedger ledger;
  ledger.Add(Event(JobEvent::JOB_CREATED, 0));
  ledger.Add(Finished(60, JobState::kFailed));  // join timeout
  const auto generations = ledger.GenerationsAt(At(500));
  ASSERT_EQ(generations.size(), 1u);
  EXPECT_EQ(generations[0].generation, 0);
  EXPECT_EQ(Seconds(generations[0].rendezvous), 60);
  EXPECT_EQ(Seconds(ledger.TotalsAt(At(500)).rendezvous), 60);
  // A repeated end changes nothing.
  ledger.Add(Finished(90, JobState::kFailed));
  EXPECT_EQ(Seconds(ledger.TotalsAt(At(500)).rendezvous), 60);
}

TEST(JobTimeLedger, ManyGenerations_NewestKeptTotalsWhole) {
  JobTimeLedger ledger(/*max_generations=*/3);
  for (int g = 1; g <= 5; ++g) {
    ledger.Add(Event(JobEvent::GENERATION_OPENED, 10 * g, g));
    ledger.Add(Restarting(10 * g + 8, g, std::nullopt, RestartCause::SCALE));
  }
  ASSERT_EQ(ledger.generations().size(), 3u);
  EXPECT_EQ(ledger.generations().front().generation, 3);
  EXPECT_EQ(ledger.ToProto(At(60)).generations_omitted(), 2);
  EXPECT_EQ(Seconds(ledger.closed().training), 5 * 8);
}

TEST(JobTimeLedger, LateFailureEarlierThanFirst_EarliestCounts) {
  JobTimeLedger ledger;
  ledger.Add(Event(JobEvent::GENERATION_OPENED, 0, 1));
  ledger.Add(Failed(20, 19, 1));
  ledger.Add(Failed(21, 12, 1));  // its report came later
  ledger.Add(Restarting(22, 1));
  EXPECT_EQ(Seconds(ledger.generations()[0].training), 12);
  EXPECT_EQ(Seconds(ledger.closed().detection), 10);
}

}  // namespace
}  // namespace ddp::rendezvous
