#include "client/agent/session_core.h"

#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

SessionCoreOptions Options() {
  SessionCoreOptions options;
  options.target = "coord:29400";
  options.registration.set_job_id("job");
  options.registration.set_node_id("node-a");
  options.registration.set_nproc(4);
  options.connect_timeout = absl::Seconds(60);
  options.resume_timeout = absl::Minutes(10);
  options.backoff = BackoffOptions{absl::Milliseconds(100), absl::Milliseconds(500), 2.0};
  options.stable_stream = absl::Seconds(5);
  return options;
}

TEST(SessionCoreTest, RegisterCarriesIdentityGenerationAndFrozenWorkers) {
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  core.SetGeneration(3);
  core.SetWorkersFrozen();
  v1::AgentMessage message = core.RegisterMessage();
  ASSERT_TRUE(message.has_register_());
  EXPECT_EQ(message.register_().job_id(), "job");
  EXPECT_EQ(message.register_().node_id(), "node-a");
  EXPECT_EQ(message.register_().nproc(), 4);
  EXPECT_EQ(message.register_().incarnation(), 77u);
  EXPECT_EQ(message.register_().generation(), 3);
  EXPECT_TRUE(message.register_().workers_frozen());
  EXPECT_FALSE(message.register_().lease_expired());  // the old agents' stop
  core.SetGeneration(4);                              // a new generation's workers run: not frozen
  EXPECT_FALSE(core.RegisterMessage().register_().workers_frozen());
  core.SetWorkersFrozen();
  core.OnRegistered(v1::Registered());  // the coordinator was told
  EXPECT_FALSE(core.RegisterMessage().register_().workers_frozen());
}

TEST(SessionCoreTest, WaitingNotice_AtOnceThenEveryInterval_SaysHowLongAndUntilWhen) {
  FakeClock clock;
  SessionCoreOptions options = Options();
  options.target = "head:29400";
  options.waiting_notice_interval = absl::Seconds(10);
  SessionCore core(options, 77, clock);
  clock.Advance(absl::Milliseconds(200));
  std::optional<std::string> first = core.WaitingNotice("connection refused");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first,
            "waiting for the coordinator at head:29400 (unreachable for 0 s; giving up after 1m, "
            "--connect-timeout): connection refused");
  clock.Advance(absl::Seconds(5));
  EXPECT_FALSE(core.WaitingNotice("connection refused").has_value());
  clock.Advance(absl::Seconds(7));
  std::optional<std::string> second = core.WaitingNotice("connection refused");
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->find("unreachable for 12 s; giving up after 1m"), std::string::npos) << *second;
  std::optional<std::string> reached = core.ReachedNotice();
  ASSERT_TRUE(reached.has_value());
  EXPECT_EQ(*reached, "reached the coordinator at head:29400 after 12.2s");
  EXPECT_FALSE(core.ReachedNotice().has_value());
  // A resume speaks of the resume timeout.
  core.OnRegistered(v1::Registered());
  core.OnStreamEnded(absl::UnavailableError("broken"));
  std::optional<std::string> resume = core.WaitingNotice("refused");
  ASSERT_TRUE(resume.has_value());
  EXPECT_NE(resume->find("giving up after 10m, the resume timeout"), std::string::npos) << *resume;
}

TEST(SessionCoreTest, HeartbeatAcks_ReturnTheirSendTimes_OldStreamsForgotten) {
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  core.SetGeneration(2);
  const absl::Time t1 = clock.Now();
  v1::AgentMessage first = core.HeartbeatMessage(/*ask_ack=*/true, t1);
  v1::AgentMessage second = core.HeartbeatMessage(/*ask_ack=*/true, t1 + absl::Seconds(1));
  EXPECT_EQ(first.heartbeat().header().generation(), 2);
  EXPECT_EQ(first.heartbeat().header().incarnation(), 77u);
  EXPECT_EQ(second.heartbeat().sequence(), first.heartbeat().sequence() + 1);
  EXPECT_EQ(core.HeartbeatMessage(/*ask_ack=*/false, t1).heartbeat().sequence(), 0u);
  v1::HeartbeatAck ack;
  ack.set_sequence(second.heartbeat().sequence());
  EXPECT_EQ(core.Acknowledged(ack), t1 + absl::Seconds(1));  // the first one is dropped
  ack.set_sequence(first.heartbeat().sequence());
  EXPECT_EQ(core.Acknowledged(ack), std::nullopt);
  v1::AgentMessage third = core.HeartbeatMessage(/*ask_ack=*/true, t1);
  core.RegisterMessage();  // a new stream: acks of the old one never come
  ack.set_sequence(third.heartbeat().sequence());
  EXPECT_EQ(core.Acknowledged(ack), std::nullopt);
}

TEST(SessionCoreTest, AckDue_OnceAThirdOfTheLeasePassed_UntilAnswered) {
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  const absl::Time t0 = clock.Now();
  EXPECT_TRUE(core.AckDue(t0));  // no lease named yet: every heartbeat asks
  v1::Registered registered;
  registered.set_lease_ms(2000);
  core.OnRegistered(registered);
  EXPECT_TRUE(core.AckDue(t0));  // nothing answered yet
  v1::AgentMessage asked = core.HeartbeatMessage(/*ask_ack=*/true, t0);
  EXPECT_TRUE(core.AckDue(t0 + absl::Milliseconds(500)));  // still unanswered
  v1::HeartbeatAck ack;
  ack.set_sequence(asked.heartbeat().sequence());
  ASSERT_EQ(core.Acknowledged(ack), t0);
  // Renewed from t0: no ask for a third of the 2 s lease, then every time.
  EXPECT_FALSE(core.AckDue(t0 + absl::Milliseconds(500)));
  EXPECT_FALSE(core.AckDue(t0 + absl::Milliseconds(666)));
  EXPECT_TRUE(core.AckDue(t0 + absl::Milliseconds(667)));
  EXPECT_TRUE(core.AckDue(t0 + absl::Milliseconds(1500)));
  // A coordinator that names no lease: every heartbeat asks.
  registered.set_lease_ms(0);
  core.OnRegistered(registered);
  EXPECT_TRUE(core.AckDue(t0 + absl::Milliseconds(100)));
}

TEST(SessionCoreTest, StampHeader_FillsIdsKeepsGeneration_LeavesRegisterAlone) {
  FakeClock clock;
  SessionCore core(Options(), 9, clock);
  v1::AgentMessage message;
  message.mutable_workers_stopped()->mutable_header()->set_generation(5);
  core.StampHeader(&message);
  EXPECT_EQ(message.workers_stopped().header().job_id(), "job");
  EXPECT_EQ(message.workers_stopped().header().node_id(), "node-a");
  EXPECT_EQ(message.workers_stopped().header().incarnation(), 9u);
  EXPECT_EQ(message.workers_stopped().header().generation(), 5);
  v1::AgentMessage reg;
  reg.mutable_register_()->set_job_id("other");
  core.StampHeader(&reg);
  EXPECT_EQ(reg.register_().job_id(), "other");
}

TEST(SessionCoreTest, StreamEnded_AbortedFences_ShortLivedBacksOff_StableResumesAtOnce) {
  FakeClock clock;
  SessionCore core(Options(), 1, clock);
  EXPECT_FALSE(core.OnRegistered(v1::Registered()));  // the first registration
  clock.Advance(absl::Seconds(1));
  SessionStep step = core.OnStreamEnded(absl::UnavailableError("broken"));
  EXPECT_EQ(step.kind, SessionStep::Kind::kRetry);
  EXPECT_GT(step.delay, absl::ZeroDuration()) << "a stream that lived 1 s must not spin";
  EXPECT_TRUE(core.OnRegistered(v1::Registered()));  // a resume
  clock.Advance(absl::Seconds(6));
  step = core.OnStreamEnded(absl::UnavailableError("coordinator restarted"));
  EXPECT_EQ(step.kind, SessionStep::Kind::kRetry);
  EXPECT_EQ(step.delay, absl::ZeroDuration()) << "a stable stream resumes at once";
  step = core.OnStreamEnded(absl::AbortedError("replaced"));
  EXPECT_EQ(step.kind, SessionStep::Kind::kFenced);
  core.Refenced(2);
  EXPECT_EQ(core.incarnation(), 2u);
  EXPECT_EQ(core.generation(), 0);
  EXPECT_FALSE(core.OnRegistered(v1::Registered())) << "a new incarnation registers afresh";
}

TEST(SessionCoreTest, AttemptFailed_PermanentGivesUp_TransientRetriesUntilTheTimeout) {
  FakeClock clock;
  SessionCore core(Options(), 1, clock);
  SessionStep step = core.OnAttemptFailed(absl::InvalidArgumentError("bad flags"));
  EXPECT_EQ(step.kind, SessionStep::Kind::kGiveUp);
  EXPECT_EQ(step.status.code(), absl::StatusCode::kInvalidArgument);
  step = core.OnAttemptFailed(absl::UnimplementedError("no such service"));
  EXPECT_EQ(step.kind, SessionStep::Kind::kGiveUp);
  EXPECT_NE(step.status.message().find("coord:29400"), std::string::npos) << step.status;
  step = core.OnAttemptFailed(absl::CancelledError("cut"));
  EXPECT_EQ(step.kind, SessionStep::Kind::kRetry);
  EXPECT_EQ(step.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(core.AttemptDeadline(), clock.Now() + absl::Seconds(60));
  clock.Advance(absl::Seconds(61));
  step = core.OnAttemptFailed(absl::UnavailableError("connection refused"));
  EXPECT_EQ(step.kind, SessionStep::Kind::kGiveUp);
  EXPECT_NE(step.status.message().find("connect timeout"), std::string::npos) << step.status;
}

TEST(SessionCoreTest, AfterARegistration_TheResumeTimeoutApplies) {
  FakeClock clock;
  SessionCore core(Options(), 1, clock);
  core.OnRegistered(v1::Registered());
  clock.Advance(absl::Seconds(10));
  core.OnStreamEnded(absl::UnavailableError("broken"));
  EXPECT_EQ(core.AttemptDeadline(), clock.Now() + absl::Minutes(10));
  clock.Advance(absl::Minutes(5));
  EXPECT_EQ(core.OnAttemptFailed(absl::UnavailableError("down")).kind, SessionStep::Kind::kRetry);
  clock.Advance(absl::Minutes(6));
  SessionStep step = core.OnAttemptFailed(absl::UnavailableError("down"));
  EXPECT_EQ(step.kind, SessionStep::Kind::kGiveUp);
  EXPECT_NE(step.status.message().find("resume timeout"), std::string::npos) << step.status;
}

TEST(SessionCoreTest, RegisteredSetsTheJobsHeartbeatInterval) {
  FakeClock clock;
  SessionCore core(Options(), 1, clock);
  EXPECT_EQ(core.heartbeat_interval(), absl::Milliseconds(500));
  v1::Registered registered;
  registered.mutable_settings()->set_heartbeat_interval_ms(250);
  core.OnRegistered(registered);
  EXPECT_EQ(core.heartbeat_interval(), absl::Milliseconds(250));
}

// ---- Heartbeats over UDP ----

v1::Registered WithChannel(int lease_ms) {
  v1::Registered registered;
  registered.set_lease_ms(lease_ms);
  registered.mutable_heartbeat_channel()->set_udp_port(29400);
  registered.mutable_heartbeat_channel()->set_session(99);
  registered.mutable_heartbeat_channel()->set_key(std::string(heartbeat::kKeySize, 'k'));
  return registered;
}

heartbeat::DatagramFields AckOf(const heartbeat::DatagramFields& sent, bool refused = false) {
  heartbeat::DatagramFields ack = sent;
  ack.kind = heartbeat::DatagramKind::kAck;
  ack.flag = refused;
  ack.generation = 5;
  return ack;
}

TEST(SessionCoreTest, Datagrams_OnlyWithAValidChannel_WhileItsStreamLives) {
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  EXPECT_EQ(core.heartbeat_channel(), nullptr);
  EXPECT_FALSE(core.SendAsDatagram(clock.Now()));
  v1::Registered bad_key = WithChannel(3000);
  bad_key.mutable_heartbeat_channel()->set_key("short");
  core.OnRegistered(bad_key);
  EXPECT_EQ(core.heartbeat_channel(), nullptr);
  v1::Registered bad_port = WithChannel(3000);
  bad_port.mutable_heartbeat_channel()->set_udp_port(70000);
  core.OnRegistered(bad_port);
  EXPECT_EQ(core.heartbeat_channel(), nullptr);
  core.OnRegistered(WithChannel(3000));
  ASSERT_NE(core.heartbeat_channel(), nullptr);
  EXPECT_TRUE(core.SendAsDatagram(clock.Now()));
  core.OnStreamEnded(absl::UnavailableError("broken"));
  EXPECT_EQ(core.heartbeat_channel(), nullptr);
  core.OnRegistered(WithChannel(3000));
  core.DropHeartbeatChannel();
  EXPECT_EQ(core.heartbeat_channel(), nullptr);
}

TEST(SessionCoreTest, Datagrams_ShareTheSequence_AndTheirAcksRenewTheLease) {
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  core.SetGeneration(4);
  core.OnRegistered(WithChannel(3000));
  const absl::Time t0 = clock.Now();
  const heartbeat::DatagramFields quiet = core.HeartbeatDatagram(/*ask_ack=*/false, t0);
  const heartbeat::DatagramFields asked = core.HeartbeatDatagram(/*ask_ack=*/true, t0);
  const v1::AgentMessage on_stream = core.HeartbeatMessage(/*ask_ack=*/true, t0);
  EXPECT_EQ(quiet.session, 99u);
  EXPECT_EQ(quiet.generation, 4);
  EXPECT_FALSE(quiet.flag);
  EXPECT_TRUE(asked.flag);
  EXPECT_GT(asked.sequence, quiet.sequence);  // every datagram is numbered
  EXPECT_GT(on_stream.heartbeat().sequence(), asked.sequence);
  EXPECT_EQ(core.DatagramAnswered(AckOf(asked)), t0);
  EXPECT_FALSE(core.AckDue(t0 + absl::Milliseconds(999)));  // a third of 3 s
  EXPECT_TRUE(core.AckDue(t0 + absl::Seconds(1)));
}

TEST(SessionCoreTest, Datagrams_AnUnansweredAskGoesOnTheStream_ThreeInARowGiveUp) {
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  core.OnRegistered(WithChannel(3000));
  absl::Time now = clock.Now();
  for (int miss = 1; miss <= SessionCore::kMaxDatagramMisses; ++miss) {
    ASSERT_TRUE(core.SendAsDatagram(now)) << miss;
    core.HeartbeatDatagram(/*ask_ack=*/true, now);  // lost
    now += absl::Milliseconds(500);
    EXPECT_FALSE(core.SendAsDatagram(now)) << "the lease is due and the ask went unanswered";
    v1::HeartbeatAck ack;
    ack.set_sequence(core.HeartbeatMessage(/*ask_ack=*/true, now).heartbeat().sequence());
    EXPECT_EQ(core.Acknowledged(ack), now);
    now += absl::Seconds(1);  // the next ack is due
  }
  EXPECT_EQ(core.heartbeat_channel(), nullptr);  // UDP given up until the next Registered
  core.OnRegistered(WithChannel(3000));
  EXPECT_TRUE(core.SendAsDatagram(now));
}

TEST(SessionCoreTest, Datagrams_AnAnswerResetsTheMisses_ARefusalDropsTheChannel) {
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  core.OnRegistered(WithChannel(3000));
  absl::Time now = clock.Now();
  for (int round = 0; round < 2 * SessionCore::kMaxDatagramMisses; ++round) {
    core.HeartbeatDatagram(/*ask_ack=*/true, now);  // lost
    now += absl::Milliseconds(500);
    core.HeartbeatMessage(/*ask_ack=*/true, now);  // made up for on the stream
    const heartbeat::DatagramFields asked = core.HeartbeatDatagram(/*ask_ack=*/true, now);
    EXPECT_EQ(core.DatagramAnswered(AckOf(asked)), now);  // answered: misses reset
    now += absl::Seconds(1);
  }
  ASSERT_NE(core.heartbeat_channel(), nullptr);
  const heartbeat::DatagramFields asked = core.HeartbeatDatagram(/*ask_ack=*/true, now);
  EXPECT_EQ(core.DatagramAnswered(AckOf(asked, /*refused=*/true)), std::nullopt);
  EXPECT_EQ(core.heartbeat_channel(), nullptr);
  EXPECT_FALSE(core.SendAsDatagram(now));
}

TEST(SessionCoreTest, Route_StatesOnTheStream_TheirLeaseRenewalAsADatagram) {
  using Route = SessionCore::HeartbeatRoute;
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  absl::Time now = clock.Now();
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/false, now), Route::kStream);  // no channel
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/true, now), Route::kStream);
  core.OnRegistered(WithChannel(3000));
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/false, now), Route::kDatagram);
  ASSERT_TRUE(core.AckDue(now));  // before the first answer
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/true, now), Route::kStreamAndRenewal);
  const heartbeat::DatagramFields asked = core.HeartbeatDatagram(/*ask_ack=*/true, now);
  ASSERT_EQ(core.DatagramAnswered(AckOf(asked)), now);
  now += absl::Milliseconds(500);  // renewed: no ack due for a third of 3 s
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/true, now), Route::kStream);
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/false, now), Route::kDatagram);
  // An asked datagram unanswered while the lease is due: all of it on the
  // stream, states or not (the stream's ask renews the lease).
  now += absl::Milliseconds(500);
  core.HeartbeatDatagram(/*ask_ack=*/true, now);  // lost
  now += absl::Milliseconds(500);
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/true, now), Route::kStream);
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/false, now), Route::kStream);
}

TEST(SessionCoreTest, Route_StatesAsADatagramWhereTheChannelTakesThemAndTheyFit) {
  using Route = SessionCore::HeartbeatRoute;
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  v1::Registered registered = WithChannel(3000);
  registered.mutable_heartbeat_channel()->set_worker_states(true);
  core.OnRegistered(registered);
  absl::Time now = clock.Now();
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/true, now, 400), Route::kStatesDatagram);
  EXPECT_EQ(core.RouteHeartbeat(true, now, heartbeat::kMaxStatesPayload), Route::kStatesDatagram);
  // Too large for one: on the stream, its renewal as a datagram.
  EXPECT_EQ(core.RouteHeartbeat(true, now, heartbeat::kMaxStatesPayload + 1),
            Route::kStreamAndRenewal);
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/false, now), Route::kDatagram);

  // A states datagram always asks; an ack that says "taken" marks it and
  // every earlier one, one that does not (deferred, or none) leaves it.
  const heartbeat::DatagramFields first = core.StatesDatagram(now);
  EXPECT_EQ(first.kind, heartbeat::DatagramKind::kStates);
  EXPECT_TRUE(first.flag);
  EXPECT_EQ(first.session, 99u);
  EXPECT_FALSE(core.StatesTaken(first.sequence));
  heartbeat::DatagramFields deferred = AckOf(first);
  EXPECT_EQ(core.DatagramAnswered(deferred), now);  // still renews the lease
  EXPECT_FALSE(core.StatesTaken(first.sequence));
  now += absl::Milliseconds(500);
  const heartbeat::DatagramFields second = core.StatesDatagram(now);
  EXPECT_GT(second.sequence, first.sequence);
  heartbeat::DatagramFields taken = AckOf(second);
  taken.states_taken = true;
  EXPECT_EQ(core.DatagramAnswered(taken), now);
  EXPECT_TRUE(core.StatesTaken(second.sequence));
  EXPECT_TRUE(core.StatesTaken(first.sequence));
  // A new stream: nothing it sent was taken yet.
  const heartbeat::DatagramFields third = core.StatesDatagram(now);
  core.OnRegistered(registered);
  EXPECT_FALSE(core.StatesTaken(third.sequence));

  // A states datagram unanswered while the lease is due: the stream.
  core.StatesDatagram(now);  // lost
  now += absl::Seconds(2);
  EXPECT_EQ(core.RouteHeartbeat(true, now, 400), Route::kStream);
}

TEST(SessionCoreTest, Route_StatesOnTheStreamWhereTheChannelDoesNotTakeThem) {
  using Route = SessionCore::HeartbeatRoute;
  FakeClock clock;
  SessionCore core(Options(), 77, clock);
  core.OnRegistered(WithChannel(3000));  // an older coordinator: worker_states unset
  EXPECT_EQ(core.RouteHeartbeat(/*carries_states=*/true, clock.Now(), 10),
            Route::kStreamAndRenewal);
}

}  // namespace
}  // namespace ddp::client
