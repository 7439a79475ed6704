#include "tools/ddpctl/command_line.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::ddpctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Invocation> Parse(std::vector<std::string> argv) {
  return ParseCommandLine(argv, "default-host:1");
}

TEST(ParseCommandLine, PutWithGlobalAndCommandFlags_FillsInvocation) {
  absl::StatusOr<Invocation> got = Parse({"--coordinator", "h:5", "--json", "kv", "put", "k", "v",
                                          "--lease=7", "--if-absent", "--namespace", "job1"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->kind, Invocation::Kind::kRun);
  EXPECT_EQ(got->command->group, "kv");
  EXPECT_EQ(got->command->verb, "put");
  EXPECT_EQ(got->global.coordinator, "h:5");
  EXPECT_TRUE(got->global.json);
  EXPECT_EQ(got->global.name_space, "job1");
  EXPECT_THAT(got->args, ElementsAre("k", "v"));
  EXPECT_EQ(got->FlagInt64("lease", 0), 7);
  EXPECT_EQ(got->FlagString("if-absent"), "true");
  EXPECT_FALSE(got->HasFlag("prev"));
}

TEST(ParseCommandLine, CoordinatorWithoutPort_DefaultPortAsDdpClient) {
  absl::StatusOr<Invocation> got = Parse({"--coordinator", "head,grpc://b:7", "kv", "get", "k"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->global.coordinator, "head:29400,b:7");
}

TEST(ParseCommandLine, NoCoordinatorFlag_UsesDefault) {
  absl::StatusOr<Invocation> got = Parse({"kv", "get", "k"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->global.coordinator, "default-host:1");
  EXPECT_EQ(got->global.timeout, absl::Seconds(10));
  EXPECT_EQ(got->global.name_space, "default");
}

TEST(ParseCommandLine, Timeout_ParsesDurationAndBareSeconds) {
  absl::StatusOr<Invocation> got = Parse({"--timeout", "250ms", "kv", "get", "k"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->global.timeout, absl::Milliseconds(250));
  got = Parse({"kv", "get", "k", "--timeout=3"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->global.timeout, absl::Seconds(3));
}

TEST(ParseCommandLine, BadTimeout_IsInvalidArgumentNamingValue) {
  absl::StatusOr<Invocation> got = Parse({"--timeout", "soon", "kv", "get", "k"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("'soon'"));
  got = Parse({"--timeout", "-1s", "kv", "get", "k"});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseCommandLine, NegativeDelta_IsPositionalNotFlag) {
  absl::StatusOr<Invocation> got = Parse({"kv", "add", "counter", "-5"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->args, ElementsAre("counter", "-5"));
}

TEST(ParseCommandLine, DoubleDash_EndsFlags) {
  absl::StatusOr<Invocation> got = Parse({"kv", "put", "--", "--k", "--v"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->args, ElementsAre("--k", "--v"));
}

TEST(ParseCommandLine, MissingArgument_NamesItAndShowsUsage) {
  absl::StatusOr<Invocation> got = Parse({"kv", "put", "k"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("missing VALUE"));
  EXPECT_THAT(got.status().message(), HasSubstr("usage: ddpctl"));
}

TEST(ParseCommandLine, ExtraArgument_IsRejected) {
  absl::StatusOr<Invocation> got = Parse({"kv", "get", "a", "b"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("unexpected argument 'b'"));
}

TEST(ParseCommandLine, RepeatedArgument_TakesAll) {
  absl::StatusOr<Invocation> got = Parse({"kv", "wait", "a", "b", "c"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->args, ElementsAre("a", "b", "c"));
  EXPECT_FALSE(Parse({"kv", "wait"}).ok());
}

TEST(ParseCommandLine, OptionalArgument_MayBeOmitted) {
  absl::StatusOr<Invocation> got = Parse({"kv", "list"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->args.empty());
}

TEST(ParseCommandLine, UnknownCommandOrVerb_IsRejectedWithChoices) {
  absl::StatusOr<Invocation> got = Parse({"frobnicate"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("unknown command 'frobnicate'"));
  got = Parse({"kv", "explode"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("put|get|list"));
  got = Parse({"lease"});
  EXPECT_THAT(got.status().message(), HasSubstr("missing subcommand of lease"));
}

TEST(ParseCommandLine, NoCommand_IsUsageError) {
  EXPECT_EQ(Parse({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseCommandLine, FlagOfAnotherCommand_IsRejected) {
  absl::StatusOr<Invocation> got = Parse({"kv", "get", "k", "--lease", "3"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("unknown flag --lease"));
  // Command flags are not accepted before the command.
  EXPECT_FALSE(Parse({"--lease", "3", "kv", "put", "k", "v"}).ok());
}

TEST(ParseCommandLine, NonNumericIntFlag_IsRejected) {
  absl::StatusOr<Invocation> got = Parse({"kv", "watch", "--from-revision", "ten"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("--from-revision='ten'"));
}

TEST(ParseCommandLine, FlagWithoutValue_IsRejected) {
  absl::StatusOr<Invocation> got = Parse({"kv", "get", "k", "--coordinator"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("needs a value"));
}

TEST(ParseCommandLine, HelpAlone_GivesMainHelpWithExitCodes) {
  absl::StatusOr<Invocation> got = Parse({"--help"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->kind, Invocation::Kind::kHelp);
  EXPECT_THAT(got->help_text, HasSubstr("Exit codes"));
  EXPECT_THAT(got->help_text, HasSubstr("lease keep-alive"));
  EXPECT_THAT(got->help_text, HasSubstr("print FAILURE, as"));
  EXPECT_THAT(got->help_text, HasSubstr("DDP_COORDINATOR"));
}

TEST(ParseCommandLine, CommandHelp_ListsArgumentsAndFlags) {
  absl::StatusOr<Invocation> got = Parse({"kv", "watch", "-h"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->kind, Invocation::Kind::kHelp);
  EXPECT_THAT(got->help_text, HasSubstr("--from-revision REV"));
  EXPECT_THAT(got->help_text, HasSubstr("--prefix"));
  EXPECT_THAT(got->help_text, HasSubstr("--namespace NS"));
}

TEST(CommandTable, EveryCommand_HasSummaryAndHelpForEachArgAndFlag) {
  for (const CommandSpec& command : CommandTable()) {
    EXPECT_FALSE(command.summary.empty()) << command.verb;
    for (const ArgSpec& arg : command.args) EXPECT_FALSE(arg.help.empty());
    for (const FlagSpec& flag : command.flags) EXPECT_FALSE(flag.help.empty());
  }
}

TEST(ParseCommandLine, JobsCreateWithSettings_FillsFlags) {
  absl::StatusOr<Invocation> got =
      Parse({"jobs", "create", "train-1", "--nnodes", "2:4", "--nproc-per-node=8", "--max-restarts",
             "3", "--join-timeout", "5m", "--heartbeat-timeout", "1500ms"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->command->group, "jobs");
  EXPECT_EQ(got->command->verb, "create");
  EXPECT_THAT(got->args, ElementsAre("train-1"));
  EXPECT_EQ(got->FlagString("nnodes"), "2:4");
  EXPECT_EQ(got->FlagInt64("nproc-per-node", 0), 8);
  EXPECT_EQ(got->FlagInt64("max-restarts", 0), 3);
  EXPECT_EQ(got->FlagDuration("join-timeout", absl::ZeroDuration()), absl::Minutes(5));
  EXPECT_EQ(got->FlagDuration("heartbeat-timeout", absl::ZeroDuration()), absl::Milliseconds(1500));
  EXPECT_FALSE(got->HasFlag("shutdown-timeout"));
}

TEST(ParseCommandLine, JobsCreateBadDuration_IsRejectedNamingFlag) {
  absl::StatusOr<Invocation> got = Parse({"jobs", "create", "j", "--last-call-timeout", "forever"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("--last-call-timeout='forever'"));
}

TEST(ParseCommandLine, RepeatedStateFlag_JoinsValues) {
  absl::StatusOr<Invocation> got =
      Parse({"jobs", "list", "--state", "RUNNING", "--state=waiting,FAILED"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->FlagString("state"), "RUNNING,waiting,FAILED");
  EXPECT_THAT(SplitFlagValues(got->FlagString("state")),
              ElementsAre("RUNNING", "waiting", "FAILED"));
}

TEST(ParseCommandLine, NonRepeatedFlagGivenTwice_LastWins) {
  absl::StatusOr<Invocation> got = Parse({"jobs", "cancel", "j", "--reason", "a", "--reason", "b"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->FlagString("reason"), "b");
}

TEST(ParseCommandLine, JobsExcludeWithoutNode_NamesMissingArgument) {
  absl::StatusOr<Invocation> got = Parse({"jobs", "exclude", "j"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("missing NODE"));
  got = Parse({"jobs", "exclude", "j", "node-3", "--reason", "bad gpu"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->args, ElementsAre("j", "node-3"));
  EXPECT_EQ(got->FlagString("reason"), "bad gpu");
}

TEST(ParseCommandLine, JobsWatchNonNumericIndex_IsRejected) {
  absl::StatusOr<Invocation> got = Parse({"jobs", "watch", "j", "--from-index", "first"});
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("--from-index='first'"));
}

TEST(ParseCommandLine, JobsHelp_ListsVerbsAndFlags) {
  absl::StatusOr<Invocation> got = Parse({"--help"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->help_text, HasSubstr("jobs create"));
  EXPECT_THAT(got->help_text, HasSubstr("jobs exclude"));
  got = Parse({"jobs", "create", "--help"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->help_text, HasSubstr("--nnodes N|MIN:MAX"));
  EXPECT_THAT(got->help_text, HasSubstr("--shutdown-timeout DURATION"));
  got = Parse({"jobs"});
  EXPECT_THAT(got.status().message(),
              HasSubstr("list|get|logs|create|watch|update|cancel|exclude"));
}

TEST(ParseNodeRange, SingleAndRange_Parse) {
  absl::StatusOr<NodeRange> range = ParseNodeRange("3", "--nnodes");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->min_nodes, 3);
  EXPECT_EQ(range->max_nodes, 3);
  range = ParseNodeRange("2:16", "--nnodes");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->min_nodes, 2);
  EXPECT_EQ(range->max_nodes, 16);
}

TEST(ParseNodeRange, BadRanges_AreInvalidArgumentNamingValue) {
  for (const char* bad : {"", "0", "4:2", "1:2:3", "a:b", ":4", "-1:2", "1:99999999999"}) {
    absl::StatusOr<NodeRange> range = ParseNodeRange(bad, "--nnodes");
    ASSERT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(range.status().message(), HasSubstr(absl::StrCat("--nnodes='", bad, "'")));
  }
}

TEST(ParseInt64, Overflow_IsInvalidArgument) {
  EXPECT_EQ(*ParseInt64("-42", "X"), -42);
  EXPECT_EQ(ParseInt64("99999999999999999999", "X").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ddp::ddpctl
